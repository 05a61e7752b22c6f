package roce

import (
	"encoding/binary"
	"net/netip"
)

// Layout locates the headers of an Ethernet frame down to the transport: the one
// Ethernet/VLAN/IP walk that the RoCEv2 decoder, the switch and the telemetry codecs
// share, so that a frame one of them can read, the others can too. Offsets index the
// frame Locate read and go stale when it is modified (Layout's setters keep them up
// to date for the changes they make).
type Layout struct {
	// Tags counts the VLAN tags walked: 802.1Q (0x8100) and 802.1ad service tags
	// (0x88A8), stacked in any order and number (QinQ is two).
	Tags int
	// TCI is the tag control information of the outermost tag (PCP 3 bits, DEI 1,
	// VID 12): the tag a switch classifies by.
	TCI uint16
	// EtherType is the EtherType after the tags.
	EtherType uint16
	// L3 is the offset of what EtherType names: the IP header of an IP frame.
	L3 int
	// IPVersion is 4 or 6 for an IP frame, 0 otherwise (the fields below are then 0).
	IPVersion uint8
	// L4 is the offset after the IP header: IPv4 options included, IPv6 fixed header
	// only (extension headers are the caller's: see Proto).
	L4 int
	// Proto is the IPv4 protocol or the IPv6 fixed header's next header.
	Proto uint8
	// End is the offset of the end of the IP packet, Ethernet padding excluded.
	End int
}

// LayoutError says why Locate could not locate a frame's headers. It unwraps to
// ErrTruncated, ErrBadHeader or ErrBadLength. It is a byte, so that locating a
// malformed frame allocates nothing on a switch's data path.
type LayoutError uint8

// The ways a frame's headers can fail to locate.
const (
	// ErrEthernetCutOff: the frame ends inside the Ethernet header or a VLAN tag.
	ErrEthernetCutOff LayoutError = iota + 1
	// ErrIPCutOff: the frame ends inside the IP header (IPv4 options included).
	ErrIPCutOff
	// ErrIPVersion: the IP version field disagrees with the EtherType.
	ErrIPVersion
	// ErrIPHeaderLen: an IPv4 IHL below 5 words.
	ErrIPHeaderLen
	// ErrIPLength: the IP length field disagrees with the header or the frame. The
	// headers are in the frame and every field but End is set: a switch forwards on
	// them, an endpoint drops the packet.
	ErrIPLength
)

var layoutErrors = [...]struct {
	msg string
	err error
}{
	ErrEthernetCutOff: {"Ethernet header or VLAN tag cut off", ErrTruncated},
	ErrIPCutOff:       {"IP header cut off", ErrTruncated},
	ErrIPVersion:      {"IP version disagrees with the EtherType", ErrBadHeader},
	ErrIPHeaderLen:    {"IPv4 header length below 20 bytes", ErrBadHeader},
	ErrIPLength:       {"IP length disagrees with the header or the frame", ErrBadLength},
}

// Error says what is wrong with the frame.
func (e LayoutError) Error() string {
	if int(e) < len(layoutErrors) && e != 0 {
		return "roce: " + layoutErrors[e].msg
	}
	return "roce: layout error"
}

// Unwrap returns the sentinel error the fault is an instance of.
func (e LayoutError) Unwrap() error {
	if int(e) < len(layoutErrors) && e != 0 {
		return layoutErrors[e].err
	}
	return nil
}

// isTag reports whether an EtherType introduces a VLAN tag.
func isTag(et uint16) bool { return et == EtherTypeVLAN || et == EtherTypeQinQ }

// Locate walks frame's Ethernet header, any stacked VLAN tags and, when the EtherType
// is IPv4 or IPv6, the IP header, checking the IP version, header length and packet
// length against the frame. A frame that is not IP locates without error with
// IPVersion 0. It does not allocate.
//
// Every node runs it on every frame, several times (a switch to forward and stamp,
// an RNIC and each telemetry codec to find their headers), so the common frame —
// untagged IPv4 without options, its length consistent — takes a path of its own.
func Locate(frame []byte) (Layout, error) {
	if len(frame) >= EthernetSize+IPv4MinSize && frame[ethEtherType] == EtherTypeIPv4>>8 &&
		frame[ethEtherType+1] == EtherTypeIPv4&0xFF && frame[EthernetSize+ipv4VersIHL] == ipv4VersIHLMin {
		if total := IPv4(frame[EthernetSize:]).TotalLen(); total >= IPv4MinSize && EthernetSize+total <= len(frame) {
			return Layout{EtherType: EtherTypeIPv4, L3: EthernetSize, IPVersion: 4, L4: EthernetSize + IPv4MinSize,
				Proto: frame[EthernetSize+ipv4Protocol], End: EthernetSize + total}, nil
		}
	}
	return walk(frame)
}

// walk is Locate for any frame.
func walk(frame []byte) (Layout, error) {
	var l Layout
	if len(frame) < EthernetSize {
		return l, ErrEthernetCutOff
	}
	off := EthernetSize
	et := Ethernet(frame).EtherType()
	for isTag(et) {
		if len(frame) < off+VLANTagSize {
			return l, ErrEthernetCutOff
		}
		if l.Tags == 0 {
			l.TCI = binary.BigEndian.Uint16(frame[off+vlanTCI:])
		}
		l.Tags++
		et = binary.BigEndian.Uint16(frame[off+vlanEtherType:])
		off += VLANTagSize
	}
	l.EtherType, l.L3 = et, off
	switch et {
	case EtherTypeIPv4:
		if len(frame) < off+IPv4MinSize {
			return l, ErrIPCutOff
		}
		h := IPv4(frame[off:])
		if h.Version() != 4 {
			return l, ErrIPVersion
		}
		ihl := h.HeaderLen()
		if ihl < IPv4MinSize {
			return l, ErrIPHeaderLen
		}
		if len(frame) < off+ihl {
			return l, ErrIPCutOff
		}
		l.IPVersion, l.L4, l.Proto = 4, off+ihl, h.Protocol()
		if total := h.TotalLen(); total < ihl || off+total > len(frame) {
			return l, ErrIPLength
		}
		l.End = off + h.TotalLen()
	case EtherTypeIPv6:
		if len(frame) < off+IPv6Size {
			return l, ErrIPCutOff
		}
		h := IPv6(frame[off:])
		if h.Version() != 6 {
			return l, ErrIPVersion
		}
		l.IPVersion, l.L4, l.Proto = 6, off+IPv6Size, h.NextHeader()
		if off+IPv6Size+h.PayloadLen() > len(frame) {
			return l, ErrIPLength
		}
		l.End = off + IPv6Size + h.PayloadLen()
	}
	return l, nil
}

// IPv6 reports whether the frame is IPv6.
func (l *Layout) IPv6() bool { return l.IPVersion == 6 }

// DSCP returns the packet's DSCP.
func (l *Layout) DSCP(frame []byte) uint8 {
	if l.IPv6() {
		return IPv6(frame[l.L3:]).DSCP()
	}
	return IPv4(frame[l.L3:]).DSCP()
}

// SetDSCP rewrites the DSCP, keeping ECN (and the IPv4 checksum valid).
func (l *Layout) SetDSCP(frame []byte, dscp uint8) {
	if l.IPv6() {
		h := IPv6(frame[l.L3:])
		h.SetTrafficClass(dscp, h.ECN())
		return
	}
	h := IPv4(frame[l.L3:])
	old := binary.BigEndian.Uint16(h[ipv4VersIHL:]) // the 16-bit word that holds the TOS
	h.SetTOS(dscp, h.ECN())
	h.AdjustChecksum(ipv4VersIHL, old)
}

// TTL returns the IPv4 TTL or IPv6 hop limit.
func (l *Layout) TTL(frame []byte) uint8 {
	if l.IPv6() {
		return IPv6(frame[l.L3:]).HopLimit()
	}
	return IPv4(frame[l.L3:]).TTL()
}

// Dst returns the destination address.
func (l *Layout) Dst(frame []byte) netip.Addr {
	if l.IPv6() {
		return IPv6(frame[l.L3:]).Dst()
	}
	return IPv4(frame[l.L3:]).Dst()
}

// SetProto rewrites the IPv4 protocol or the IPv6 fixed header's next header.
func (l *Layout) SetProto(frame []byte, p uint8) {
	l.Proto = p
	if l.IPv6() {
		IPv6(frame[l.L3:]).SetNextHeader(p)
		return
	}
	h := IPv4(frame[l.L3:])
	old := binary.BigEndian.Uint16(h[ipv4TTL:]) // the 16-bit word that holds the protocol
	h.SetProtocol(p)
	h.AdjustChecksum(ipv4TTL, old)
}

// AddIPLength adds delta bytes to the IP length field (and fixes the IPv4 checksum).
func (l *Layout) AddIPLength(frame []byte, delta int) {
	l.End += delta
	if l.IPv6() {
		h := IPv6(frame[l.L3:])
		h.SetPayloadLen(h.PayloadLen() + delta)
		return
	}
	h := IPv4(frame[l.L3:])
	old := binary.BigEndian.Uint16(h[ipv4TotalLen:])
	h.SetTotalLen(h.TotalLen() + delta)
	h.AdjustChecksum(ipv4TotalLen, old)
}

// UDPAt reports whether a UDP header starts at off and its length ends exactly where
// the IP packet does.
func (l *Layout) UDPAt(frame []byte, off int) bool {
	return off+UDPSize <= l.End && off+UDP(frame[off:]).Length() == l.End
}
