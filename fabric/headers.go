package fabric

import (
	"encoding/binary"
	"errors"

	"github.com/rocelab/rocelab/roce"
)

// Protocol numbers the switch reads beyond roce's EtherTypes.
const (
	opcodePFC = 0x0101 // IEEE 802.1Qbb priority-based flow control
	protoIFA  = 253    // IFA 2.0 default (WIRE.md)
)

var (
	errShort     = errors.New("fabric: truncated frame")
	errBadHeader = errors.New("fabric: bad IP header")
)

// Headers is what a switch reads of a frame: L2, the IP DSCP/ECN byte and the 5-tuple.
// Parse fills it without allocating; offsets index the frame it was parsed from and are
// stale once the frame is modified.
type Headers struct {
	Dst, Src  [6]byte
	EtherType uint16 // after any VLAN tags
	VLAN      bool   // a tag was present; PCP is from the outermost
	PCP       uint8
	L3        int   // offset of the IP header; 0 when the frame is not IP
	IPVersion uint8 // 4, 6 or 0
	DSCP, ECN uint8
	Proto     uint8 // the transport protocol, after IPv6 extension headers and IFA
	L4        int   // offset of the transport header; 0 when absent
	SrcPort   uint16
	DstPort   uint16
	// PFC frames: which priorities the frame addresses and their pause quanta.
	PFC         bool
	PFCEnable   uint8
	PFCQuanta   [8]uint16
	ipAddrs     int // offset of the source address, followed by the destination
	ipAddrsSize int
	// layout is what roce.Locate found, when it found the frame whole (located).
	layout  roce.Layout
	located bool
}

// Parse reads b. A frame that is not IP, or whose transport is not TCP/UDP, parses
// without error and with the fields it lacks left zero; a truncated header is an error.
// L2 and IP are located by roce.Locate, as the RNIC and the telemetry codecs locate
// them (stacked 802.1Q/802.1ad tags included); an IP length that disagrees with the
// frame is the endpoint's to judge, so the switch forwards on the headers it has.
func (h *Headers) Parse(b []byte) error {
	*h = Headers{}
	l, err := roce.Locate(b)
	switch err {
	case nil, roce.ErrIPLength:
	case roce.ErrEthernetCutOff, roce.ErrIPCutOff:
		return errShort
	default:
		return errBadHeader
	}
	h.layout, h.located = l, err == nil
	copy(h.Dst[:], b[0:6])
	copy(h.Src[:], b[6:12])
	h.EtherType = l.EtherType
	h.VLAN, h.PCP = l.Tags > 0, uint8(l.TCI>>13)
	switch l.IPVersion {
	case 4:
		ip := roce.IPv4(b[l.L3:])
		h.DSCP, h.ECN = ip.DSCP(), ip.ECN()
		h.ipAddrs, h.ipAddrsSize = l.L3+12, 8
	case 6:
		ip := roce.IPv6(b[l.L3:])
		h.DSCP, h.ECN = ip.DSCP(), ip.ECN()
		h.ipAddrs, h.ipAddrsSize = l.L3+8, 32
	default:
		if l.EtherType == roce.EtherTypeMACControl {
			return h.parsePFC(b[l.L3:])
		}
		return nil
	}
	h.L3, h.IPVersion = l.L3, l.IPVersion
	return h.parseL4(b, l.Proto, l.L4)
}

func (h *Headers) parsePFC(b []byte) error {
	if len(b) < 2 || binary.BigEndian.Uint16(b) != opcodePFC {
		return nil // other MAC control (802.3x PAUSE) is not modelled
	}
	if len(b) < 20 {
		return errShort
	}
	h.PFC = true
	h.PFCEnable = b[3]
	for i := range h.PFCQuanta {
		h.PFCQuanta[i] = binary.BigEndian.Uint16(b[4+2*i:])
	}
	return nil
}

// parseL4 walks IPv6 extension headers (Hop-by-Hop, which IOAM uses, routing,
// destination options, fragment) and an IFA header to the transport's ports.
func (h *Headers) parseL4(b []byte, proto uint8, off int) error {
	for h.IPVersion == 6 && (proto == 0 || proto == 43 || proto == 60 || proto == 44) {
		if len(b) < off+8 {
			return errShort
		}
		size := 8
		if proto != 44 {
			size = (int(b[off+1]) + 1) * 8
		}
		proto, off = b[off], off+size
	}
	if proto == protoIFA { // IFA 2.0 header: the original protocol follows
		if len(b) < off+4 {
			return errShort
		}
		proto, off = b[off+1], off+4
	}
	h.Proto = proto
	if proto != 6 && proto != 17 {
		return nil
	}
	if len(b) < off+4 {
		return errShort
	}
	h.L4 = off
	h.SrcPort = binary.BigEndian.Uint16(b[off:])
	h.DstPort = binary.BigEndian.Uint16(b[off+2:])
	return nil
}

// FlowHash hashes the 5-tuple (for RoCEv2 the UDP source port is the flow's entropy)
// with seed; frames without one hash their MAC addresses.
func (h *Headers) FlowHash(b []byte, seed uint32) uint32 {
	x := uint64(seed)*0x9E3779B97F4A7C15 + 0x243F6A8885A308D3
	mix := func(v uint64) {
		x ^= v
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
	}
	if h.ipAddrsSize == 0 {
		mix(uint64(binary.BigEndian.Uint32(h.Dst[2:])) | uint64(binary.BigEndian.Uint32(h.Src[2:]))<<32)
	} else {
		for i := h.ipAddrs; i < h.ipAddrs+h.ipAddrsSize; i += 8 {
			mix(binary.BigEndian.Uint64(b[i:]))
		}
		mix(uint64(h.Proto)<<32 | uint64(h.SrcPort)<<16 | uint64(h.DstPort))
	}
	x ^= x >> 29
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 32
	return uint32(x)
}

// setCE marks the frame Congestion Experienced if its transport is ECN-capable and
// reports whether it did. The IPv4 header checksum is updated incrementally
// (roce.IPv4.AdjustChecksum).
func setCE(b []byte, h *Headers) bool {
	if h.ECN == 0 || h.L3 == 0 {
		return false
	}
	if h.ECN == 3 {
		return true
	}
	ip := b[h.L3:]
	switch h.IPVersion {
	case 4:
		old := binary.BigEndian.Uint16(ip[0:])
		ip[1] |= 3
		roce.IPv4(ip).AdjustChecksum(0, old)
	case 6:
		ip[1] |= 0x30 // the ECN bits are the low two of the traffic class: bits 4–5 of byte 1
	}
	h.ECN = 3
	return true
}

// putPFC writes an 802.1Qbb PFC frame (padded to the 60-byte minimum) into b and returns
// its length. quanta[p] applies to priority p when enable has bit p set.
func putPFC(b []byte, src [6]byte, enable uint8, quanta *[8]uint16) int {
	const size = 60
	clear(b[:size])
	copy(b[0:6], []byte{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01})
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], roce.EtherTypeMACControl)
	binary.BigEndian.PutUint16(b[14:], opcodePFC)
	binary.BigEndian.PutUint16(b[16:], uint16(enable))
	for p, q := range quanta {
		binary.BigEndian.PutUint16(b[18+2*p:], q)
	}
	return size
}
