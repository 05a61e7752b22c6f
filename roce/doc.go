// Package roce implements the RoCEv2 wire format as the Linux kernel's Soft-RoCE (rxe)
// and RoCEv2 NICs put it on the wire: Ethernet / IPv4 or IPv6 / UDP (port 4791) / BTH /
// extension headers / payload / pad / ICRC.
//
// Headers are typed views over byte slices (BTH, RETH, AETH, ...) with getters and
// setters, in the style of gVisor's pkg/tcpip/header; a view never copies and never
// allocates. A view's methods assume the slice is at least the header's size: callers
// obtain views from Packet.Decode, which checks lengths, or slice a buffer they sized
// with the *Size constants.
//
// Building and parsing whole frames:
//
//   - Builder writes a complete frame into a caller-provided buffer (Build) without
//     allocating, ICRC included.
//   - Packet.Decode parses a frame into views without allocating, the way gopacket's
//     DecodingLayerParser does, and reports malformed input with typed errors.
//   - ICRC and VerifyICRC compute the invariant CRC with the masking rules of
//     IBTA Annex A17, on hash/crc32's accelerated IEEE implementation.
//   - Locate finds the IP header behind any stack of VLAN tags, for the decoder, the
//     switch, the RNIC and the telemetry codecs alike.
//   - Package roce/layers registers a gopacket layer on UDP port 4791 (a
//     DecodingLayer and SerializableLayer over TransportPacket); roce itself does not
//     import gopacket, so the data path and the sample apps do not link it.
//
// Sources: InfiniBand Architecture Specification vol. 1 rel. 1.4 (ch. 9) and Annex A17
// (RoCEv2); Linux drivers/infiniband/sw/rxe (rxe_hdr.h, rxe_opcode.c, rxe_icrc.c,
// rxe_net.c); the captures in shared/vectors/rxe.
package roce
