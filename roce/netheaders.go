package roce

import (
	"encoding/binary"
	"net/netip"
)

// The L2–L4 headers below RoCEv2: just the fields the RoCEv2 data path reads and
// writes. Each is a view over its bytes, like the transport headers.

// EtherType values.
const (
	EtherTypeIPv4       = 0x0800
	EtherTypeIPv6       = 0x86DD
	EtherTypeVLAN       = 0x8100 // IEEE 802.1Q customer tag
	EtherTypeQinQ       = 0x88A8 // IEEE 802.1ad service tag (the outer tag of QinQ)
	EtherTypeARP        = 0x0806
	EtherTypeMACControl = 0x8808 // IEEE 802.3 Annex 31B MAC control (PAUSE, PFC)
)

// Ethernet header sizes.
const (
	EthernetSize = 14
	VLANTagSize  = 4
)

// Ethernet is a view of an Ethernet II header (destination, source, EtherType).
type Ethernet []byte

func (e Ethernet) Dst() [6]byte          { return [6]byte(e[0:6]) }
func (e Ethernet) Src() [6]byte          { return [6]byte(e[6:12]) }
func (e Ethernet) EtherType() uint16     { return binary.BigEndian.Uint16(e[12:]) }
func (e Ethernet) SetDst(a [6]byte)      { copy(e[0:6], a[:]) }
func (e Ethernet) SetSrc(a [6]byte)      { copy(e[6:12], a[:]) }
func (e Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(e[12:], t) }

// IP protocol numbers used here.
const (
	IPProtoUDP = 17
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

func (h IPv4) Version() uint8         { return h[0] >> 4 }
func (h IPv4) HeaderLen() int         { return int(h[0]&0x0F) * 4 }
func (h IPv4) DSCP() uint8            { return h[1] >> 2 }
func (h IPv4) ECN() uint8             { return h[1] & 3 }
func (h IPv4) TotalLen() int          { return int(binary.BigEndian.Uint16(h[2:])) }
func (h IPv4) ID() uint16             { return binary.BigEndian.Uint16(h[4:]) }
func (h IPv4) Flags() uint8           { return h[6] >> 5 }
func (h IPv4) DontFragment() bool     { return h[6]&0x40 != 0 }
func (h IPv4) TTL() uint8             { return h[8] }
func (h IPv4) Protocol() uint8        { return h[9] }
func (h IPv4) Checksum() uint16       { return binary.BigEndian.Uint16(h[10:]) }
func (h IPv4) Src() netip.Addr        { return netip.AddrFrom4([4]byte(h[12:16])) }
func (h IPv4) Dst() netip.Addr        { return netip.AddrFrom4([4]byte(h[16:20])) }
func (h IPv4) SetTotalLen(n int)      { binary.BigEndian.PutUint16(h[2:], uint16(n)) }
func (h IPv4) SetTOS(dscp, ecn uint8) { h[1] = dscp<<2 | ecn&3 }
func (h IPv4) SetTTL(t uint8)         { h[8] = t }
func (h IPv4) SetProtocol(p uint8)    { h[9] = p }

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
func (h IPv4) UpdateChecksum() { binary.BigEndian.PutUint16(h[10:], h.CalculateChecksum()) }

// AdjustChecksum updates the header checksum after the 16-bit word at the even offset
// off changed from old to what it holds now, without summing the header again
// (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')). Telemetry codecs change a length, the
// DSCP or the protocol of every frame they stamp, strip or request; a router's update
// also keeps a wrong checksum wrong instead of making it right.
func (h IPv4) AdjustChecksum(off int, old uint16) {
	sum := uint32(^h.Checksum()) + uint32(^old) + uint32(binary.BigEndian.Uint16(h[off:]))
	sum = sum&0xFFFF + sum>>16
	sum = sum&0xFFFF + sum>>16
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
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

func (h IPv6) Version() uint8        { return h[0] >> 4 }
func (h IPv6) TrafficClass() uint8   { return h[0]<<4 | h[1]>>4 }
func (h IPv6) DSCP() uint8           { return h.TrafficClass() >> 2 }
func (h IPv6) ECN() uint8            { return h.TrafficClass() & 3 }
func (h IPv6) FlowLabel() uint32     { return binary.BigEndian.Uint32(h[0:]) & 0xFFFFF }
func (h IPv6) PayloadLen() int       { return int(binary.BigEndian.Uint16(h[4:])) }
func (h IPv6) NextHeader() uint8     { return h[6] }
func (h IPv6) HopLimit() uint8       { return h[7] }
func (h IPv6) Src() netip.Addr       { return netip.AddrFrom16([16]byte(h[8:24])) }
func (h IPv6) Dst() netip.Addr       { return netip.AddrFrom16([16]byte(h[24:40])) }
func (h IPv6) SetPayloadLen(n int)   { binary.BigEndian.PutUint16(h[4:], uint16(n)) }
func (h IPv6) SetNextHeader(p uint8) { h[6] = p }
func (h IPv6) SetHopLimit(t uint8)   { h[7] = t }

// SetTrafficClass writes DSCP and ECN, keeping version and flow label.
func (h IPv6) SetTrafficClass(dscp, ecn uint8) {
	tc := dscp<<2 | ecn&3
	h[0] = h[0]&0xF0 | tc>>4
	h[1] = h[1]&0x0F | tc<<4
}

// UDPSize is the size of a UDP header.
const UDPSize = 8

// UDP is a view of a UDP header (RFC 768).
type UDP []byte

func (h UDP) SrcPort() uint16      { return binary.BigEndian.Uint16(h[0:]) }
func (h UDP) DstPort() uint16      { return binary.BigEndian.Uint16(h[2:]) }
func (h UDP) Length() int          { return int(binary.BigEndian.Uint16(h[4:])) }
func (h UDP) Checksum() uint16     { return binary.BigEndian.Uint16(h[6:]) }
func (h UDP) SetSrcPort(p uint16)  { binary.BigEndian.PutUint16(h[0:], p) }
func (h UDP) SetDstPort(p uint16)  { binary.BigEndian.PutUint16(h[2:], p) }
func (h UDP) SetLength(n int)      { binary.BigEndian.PutUint16(h[4:], uint16(n)) }
func (h UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(h[6:], c) }
