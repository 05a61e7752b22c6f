package roce

import (
	"encoding/binary"
	"net/netip"
)

// The L2–L4 headers below RoCEv2: just the fields the RoCEv2 data path reads and
// writes. Each is a view over its bytes, like the transport headers.

// EtherType values.
const (
	EtherTypeIPv4       = 0x0800 // IPv4
	EtherTypeIPv6       = 0x86DD // IPv6
	EtherTypeVLAN       = 0x8100 // IEEE 802.1Q customer tag
	EtherTypeQinQ       = 0x88A8 // IEEE 802.1ad service tag (the outer tag of QinQ)
	EtherTypeARP        = 0x0806 // ARP (RFC 826)
	EtherTypeMACControl = 0x8808 // IEEE 802.3 Annex 31B MAC control (PAUSE, PFC)
)

// Ethernet header sizes.
const (
	EthernetSize = 14 // destination, source, EtherType
	VLANTagSize  = 4  // TPID (the tag's EtherType) and TCI
)

// Offsets of the Ethernet header's fields.
const (
	ethDst       = 0  // destination MAC
	ethSrc       = 6  // source MAC
	ethEtherType = 12 // EtherType (16 bits)
	macSize      = 6
)

// Offsets of a VLAN tag's fields after its TPID, which stands where the EtherType
// would (the TPID is the EtherType before the tag).
const (
	vlanTCI       = 0 // tag control information: PCP 3 bits, DEI 1, VID 12
	vlanEtherType = 2 // the EtherType after the tag
)

// Ethernet is a view of an Ethernet II header (destination, source, EtherType).
type Ethernet []byte

// Dst returns the destination MAC address.
func (e Ethernet) Dst() [6]byte { return [macSize]byte(e[ethDst : ethDst+macSize]) }

// Src returns the source MAC address.
func (e Ethernet) Src() [6]byte { return [macSize]byte(e[ethSrc : ethSrc+macSize]) }

// EtherType returns the EtherType: a VLAN TPID when the frame is tagged.
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[ethEtherType:]) }

// SetDst sets the destination MAC address.
func (e Ethernet) SetDst(a [6]byte) { copy(e[ethDst:ethDst+macSize], a[:]) }

// SetSrc sets the source MAC address.
func (e Ethernet) SetSrc(a [6]byte) { copy(e[ethSrc:ethSrc+macSize], a[:]) }

// SetEtherType sets the EtherType.
func (e Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(e[ethEtherType:], t) }

// IP protocol numbers used here.
const (
	IPProtoUDP = 17 // UDP, which carries RoCEv2
)

// IPv4MinSize is the size of an IPv4 header without options.
const IPv4MinSize = 20

// IPv4 is a view of an IPv4 header (RFC 791).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |   DSCP    |ECN|          Total Length         |
//	|         Identification        |Flags|      Fragment Offset    |
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	|                       Source Address                          |
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv4 []byte

// Offsets of the IPv4 header's fields.
const (
	ipv4VersIHL    = 0  // Version (4 bits), IHL (4 bits, in 32-bit words)
	ipv4TOS        = 1  // DSCP (6 bits), ECN (2 bits)
	ipv4TotalLen   = 2  // Total Length (16 bits)
	ipv4ID         = 4  // Identification (16 bits)
	ipv4FlagsFrag  = 6  // Flags (3 bits), Fragment Offset (13 bits)
	ipv4TTL        = 8  // Time to Live
	ipv4Protocol   = 9  // Protocol
	ipv4Checksum   = 10 // Header Checksum (16 bits)
	ipv4Src        = 12 // Source Address
	ipv4Dst        = 16 // Destination Address
	ipv4AddrSize   = 4
	ipv4DFBit      = 0x40   // Don't Fragment, in the byte at ipv4FlagsFrag
	ipv4FlagsShift = 5      // the Flags' shift in the byte at ipv4FlagsFrag
	ipv4FragMask   = 0x3FFF // MF and the Fragment Offset, in the 16 bits at ipv4FlagsFrag
	// ipv4VersIHLMin is the first byte of a header without options: version 4, IHL 5.
	ipv4VersIHLMin = 4<<4 | IPv4MinSize/4
)

// Bits of the DSCP/ECN byte, shared by the IPv4 TOS and the IPv6 traffic class.
const (
	dscpShift = 2 // DSCP is the top 6 bits
	ecnMask   = 3 // ECN is the low 2 bits
)

// Version returns the IP version field (4 for a valid header).
func (h IPv4) Version() uint8 { return h[ipv4VersIHL] >> 4 }

// HeaderLen returns the header's length in bytes, options included (IHL × 4).
func (h IPv4) HeaderLen() int { return int(h[ipv4VersIHL]&0x0F) * 4 }

// DSCP returns the differentiated services code point.
func (h IPv4) DSCP() uint8 { return h[ipv4TOS] >> dscpShift }

// ECN returns the explicit congestion notification codepoint (3 = CE).
func (h IPv4) ECN() uint8 { return h[ipv4TOS] & ecnMask }

// TotalLen returns the length of the IP packet, header included.
func (h IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(h[ipv4TotalLen:])) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return binary.BigEndian.Uint16(h[ipv4ID:]) }

// Flags returns the 3 flag bits (reserved, DF, MF).
func (h IPv4) Flags() uint8 { return h[ipv4FlagsFrag] >> ipv4FlagsShift }

// DontFragment reports whether DF is set.
func (h IPv4) DontFragment() bool { return h[ipv4FlagsFrag]&ipv4DFBit != 0 }

// TTL returns the time to live.
func (h IPv4) TTL() uint8 { return h[ipv4TTL] }

// Protocol returns the protocol of the payload (IPProtoUDP for RoCEv2).
func (h IPv4) Protocol() uint8 { return h[ipv4Protocol] }

// Checksum returns the header checksum as carried.
func (h IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(h[ipv4Checksum:]) }

// Src returns the source address.
func (h IPv4) Src() netip.Addr {
	return netip.AddrFrom4([ipv4AddrSize]byte(h[ipv4Src : ipv4Src+ipv4AddrSize]))
}

// Dst returns the destination address.
func (h IPv4) Dst() netip.Addr {
	return netip.AddrFrom4([ipv4AddrSize]byte(h[ipv4Dst : ipv4Dst+ipv4AddrSize]))
}

// SetTotalLen sets the total length (the checksum is the caller's).
func (h IPv4) SetTotalLen(n int) { binary.BigEndian.PutUint16(h[ipv4TotalLen:], uint16(n)) }

// SetTOS sets the DSCP and ECN (the checksum is the caller's).
func (h IPv4) SetTOS(dscp, ecn uint8) { h[ipv4TOS] = dscp<<dscpShift | ecn&ecnMask }

// SetTTL sets the time to live (the checksum is the caller's).
func (h IPv4) SetTTL(t uint8) { h[ipv4TTL] = t }

// SetProtocol sets the protocol (the checksum is the caller's).
func (h IPv4) SetProtocol(p uint8) { h[ipv4Protocol] = p }

// CalculateChecksum returns the header checksum (RFC 1071) of the header as it stands,
// with the checksum field taken as zero.
// It adds 32-bit words (the header length is a multiple of 4), which folds to the same
// one's-complement sum as 16-bit words with a quarter of the carries to fold and half
// the loads: it runs for every frame the RNIC sends.
func (h IPv4) CalculateChecksum() uint16 {
	n := h.HeaderLen()
	sum := -uint64(h.Checksum()) // the field counts as zero
	for i := 0; i < n; i += 4 {
		sum += uint64(binary.BigEndian.Uint32(h[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}

// UpdateChecksum recomputes and stores the header checksum.
func (h IPv4) UpdateChecksum() {
	binary.BigEndian.PutUint16(h[ipv4Checksum:], h.CalculateChecksum())
}

// AdjustChecksum updates the header checksum after the 16-bit word at the even offset
// off changed from old to what it holds now, without summing the header again
// (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')). Telemetry codecs change a length, the
// DSCP or the protocol of every frame they stamp, strip or request; a router's update
// also keeps a wrong checksum wrong instead of making it right.
func (h IPv4) AdjustChecksum(off int, old uint16) {
	sum := uint32(^h.Checksum()) + uint32(^old) + uint32(binary.BigEndian.Uint16(h[off:]))
	sum = sum&0xFFFF + sum>>16
	sum = sum&0xFFFF + sum>>16
	binary.BigEndian.PutUint16(h[ipv4Checksum:], ^uint16(sum))
}

// IPv6Size is the size of the IPv6 fixed header.
const IPv6Size = 40

// IPv6 is a view of the IPv6 fixed header (RFC 8200).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	|                 Source Address (128)                          |
//	|              Destination Address (128)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv6 []byte

// Offsets of the IPv6 fixed header's fields. The traffic class straddles the first
// two bytes, between the version and the flow label.
const (
	ipv6VersTCFlow   = 0  // Version (4 bits), Traffic Class (8), Flow Label (20)
	ipv6PayloadLen   = 4  // Payload Length (16 bits)
	ipv6NextHeader   = 6  // Next Header
	ipv6HopLimit     = 7  // Hop Limit
	ipv6Src          = 8  // Source Address
	ipv6Dst          = 24 // Destination Address
	ipv6AddrSize     = 16
	ipv6FlowLabelMax = 0xFFFFF // the flow label's 20 bits
)

// Version returns the IP version field (6 for a valid header).
func (h IPv6) Version() uint8 { return h[ipv6VersTCFlow] >> 4 }

// TrafficClass returns the traffic class: DSCP and ECN.
func (h IPv6) TrafficClass() uint8 { return h[ipv6VersTCFlow]<<4 | h[ipv6VersTCFlow+1]>>4 }

// DSCP returns the differentiated services code point.
func (h IPv6) DSCP() uint8 { return h.TrafficClass() >> dscpShift }

// ECN returns the explicit congestion notification codepoint (3 = CE).
func (h IPv6) ECN() uint8 { return h.TrafficClass() & ecnMask }

// FlowLabel returns the 20-bit flow label.
func (h IPv6) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(h[ipv6VersTCFlow:]) & ipv6FlowLabelMax
}

// PayloadLen returns the length of what follows the fixed header, extension headers
// included.
func (h IPv6) PayloadLen() int { return int(binary.BigEndian.Uint16(h[ipv6PayloadLen:])) }

// NextHeader returns the type of the header after the fixed header.
func (h IPv6) NextHeader() uint8 { return h[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[ipv6HopLimit] }

// Src returns the source address.
func (h IPv6) Src() netip.Addr {
	return netip.AddrFrom16([ipv6AddrSize]byte(h[ipv6Src : ipv6Src+ipv6AddrSize]))
}

// Dst returns the destination address.
func (h IPv6) Dst() netip.Addr {
	return netip.AddrFrom16([ipv6AddrSize]byte(h[ipv6Dst : ipv6Dst+ipv6AddrSize]))
}

// SetPayloadLen sets the payload length.
func (h IPv6) SetPayloadLen(n int) { binary.BigEndian.PutUint16(h[ipv6PayloadLen:], uint16(n)) }

// SetNextHeader sets the next header.
func (h IPv6) SetNextHeader(p uint8) { h[ipv6NextHeader] = p }

// SetHopLimit sets the hop limit.
func (h IPv6) SetHopLimit(t uint8) { h[ipv6HopLimit] = t }

// SetTrafficClass writes DSCP and ECN, keeping version and flow label.
func (h IPv6) SetTrafficClass(dscp, ecn uint8) {
	tc := dscp<<dscpShift | ecn&ecnMask
	h[ipv6VersTCFlow] = h[ipv6VersTCFlow]&0xF0 | tc>>4
	h[ipv6VersTCFlow+1] = h[ipv6VersTCFlow+1]&0x0F | tc<<4
}

// UDPSize is the size of a UDP header.
const UDPSize = 8

// UDP is a view of a UDP header (RFC 768).
type UDP []byte

// Offsets of the UDP header's fields, 16 bits each.
const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
)

// SrcPort returns the source port (RoCEv2's flow entropy).
func (h UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(h[udpSrcPort:]) }

// DstPort returns the destination port (UDPPort for RoCEv2).
func (h UDP) DstPort() uint16 { return binary.BigEndian.Uint16(h[udpDstPort:]) }

// Length returns the length of the UDP header and payload.
func (h UDP) Length() int { return int(binary.BigEndian.Uint16(h[udpLength:])) }

// Checksum returns the checksum as carried (0 in RoCEv2: the ICRC protects the packet).
func (h UDP) Checksum() uint16 { return binary.BigEndian.Uint16(h[udpChecksum:]) }

// SetSrcPort sets the source port.
func (h UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(h[udpSrcPort:], p) }

// SetDstPort sets the destination port.
func (h UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(h[udpDstPort:], p) }

// SetLength sets the length.
func (h UDP) SetLength(n int) { binary.BigEndian.PutUint16(h[udpLength:], uint16(n)) }

// SetChecksum sets the checksum.
func (h UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(h[udpChecksum:], c) }
