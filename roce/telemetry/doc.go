// Package telemetry holds what rocelab's in-band telemetry codecs share: the hop model
// (the HPCC hop of package hpcc plus the fields other formats carry), the outcome of a
// transit push, the decoded stack, and the frame surgery every codec needs (locating
// the IP and UDP headers, opening and closing a gap, fixing lengths and checksums).
//
// Each wire format lives in its own package and offers the same four operations:
//
//   - Request: make a packet ask for telemetry, as the INT source / IOAM encapsulating
//     node / IFA initiator / HPCC sender does (an empty stack is added);
//
//   - Push: add one hop as a transit switch would, applying the format's overflow
//     rules (the packet is forwarded either way; Status says what happened);
//
//   - Decode: read the header and the hops into a Stack without allocating;
//
//   - Strip: remove the telemetry and restore the original packet byte for byte, so
//     that the RoCEv2 ICRC (which never covers telemetry) verifies again.
//
//     roce/telemetry/hpcchop  the HPCC reference simulator's 64-bit hop (ns-3 int-header.h)
//     roce/telemetry/intmd    P4.org INT v2.1 INT-MD and INT-MX over UDP
//     roce/telemetry/ioam     IOAM trace options in an IPv6 Hop-by-Hop header (RFC 9197, 9486)
//     roce/telemetry/ifa      IFA 2.0 (draft-kumar-ippm-ifa)
//     roce/telemetry/probe    rocelab's telemetry request/response probe bodies
//
// Frames are Ethernet frames in slices whose capacity is the buffer's: a codec that
// grows a packet shifts the bytes after the insertion point right inside the same
// backing array and returns the longer slice (ErrNoRoom when the capacity is short).
// Nothing on the Push, Decode or Strip paths allocates.
package telemetry
