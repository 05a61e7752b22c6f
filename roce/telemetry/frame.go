package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rocelab/rocelab/roce"
)

// Errors shared by the codecs; test with errors.Is.
var (
	// ErrNoTelemetry: the frame does not carry this codec's telemetry.
	ErrNoTelemetry = errors.New("telemetry: frame carries no telemetry of this format")
	// ErrAlreadyPresent: Request on a frame that already carries the telemetry.
	ErrAlreadyPresent = errors.New("telemetry: frame already carries telemetry of this format")
	// ErrNoRoom: the frame's buffer cannot grow by the bytes an operation needs.
	ErrNoRoom = errors.New("telemetry: no room in the frame buffer")
	// ErrMalformed: a header or length contradicts itself or the frame.
	ErrMalformed = errors.New("telemetry: malformed telemetry")
	// ErrUnsupported: a frame the codec cannot carry telemetry in (not IP, not UDP,
	// IPv4 where the format needs IPv6, ...).
	ErrUnsupported = errors.New("telemetry: frame cannot carry this format")
)

// Malformed returns an error wrapping ErrMalformed that says what was wrong.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// IP protocol numbers the codecs meet.
const (
	ProtoHopByHop = 0
	ProtoUDP      = 17
)

// Layout locates the network layers of an Ethernet frame: what every codec needs
// before it can insert or find its telemetry.
type Layout struct {
	L3    int   // offset of the IP header
	IPv6  bool  // the IP header is IPv6 (else IPv4)
	L4    int   // offset after the IP header (IPv4 options included; IPv6 fixed header only)
	Proto uint8 // IPv4 protocol / IPv6 fixed header's next header
	End   int   // offset of the end of the IP packet (Ethernet padding excluded)
}

// Locate parses the Ethernet, optional 802.1Q and IP headers of frame.
func Locate(frame []byte) (Layout, error) {
	var l Layout
	if len(frame) < roce.EthernetSize {
		return l, fmt.Errorf("%w: %d-byte frame", ErrUnsupported, len(frame))
	}
	off := roce.EthernetSize
	et := binary.BigEndian.Uint16(frame[12:])
	if et == roce.EtherTypeVLAN {
		if len(frame) < off+roce.VLANTagSize {
			return l, Malformed("VLAN tag cut off")
		}
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += roce.VLANTagSize
	}
	l.L3 = off
	switch et {
	case roce.EtherTypeIPv4:
		if len(frame) < off+roce.IPv4MinSize || frame[off]>>4 != 4 {
			return l, Malformed("IPv4 header cut off or wrong version")
		}
		h := roce.IPv4(frame[off:])
		ihl, total := h.HeaderLen(), h.TotalLen()
		if ihl < roce.IPv4MinSize || total < ihl || off+total > len(frame) {
			return l, Malformed("IPv4 IHL %d, total length %d in %d bytes", ihl, total, len(frame)-off)
		}
		l.L4, l.Proto, l.End = off+ihl, h.Protocol(), off+total
	case roce.EtherTypeIPv6:
		if len(frame) < off+roce.IPv6Size || frame[off]>>4 != 6 {
			return l, Malformed("IPv6 header cut off or wrong version")
		}
		h := roce.IPv6(frame[off:])
		end := off + roce.IPv6Size + h.PayloadLen()
		if end > len(frame) {
			return l, Malformed("IPv6 payload length %d in %d bytes", h.PayloadLen(), len(frame)-off-roce.IPv6Size)
		}
		l.IPv6, l.L4, l.Proto, l.End = true, off+roce.IPv6Size, h.NextHeader(), end
	default:
		return l, fmt.Errorf("%w: EtherType %#04x", ErrUnsupported, et)
	}
	return l, nil
}

// DSCP returns the packet's DSCP.
func (l *Layout) DSCP(frame []byte) uint8 {
	if l.IPv6 {
		return roce.IPv6(frame[l.L3:]).DSCP()
	}
	return roce.IPv4(frame[l.L3:]).DSCP()
}

// SetDSCP rewrites the DSCP, keeping ECN (and the IPv4 checksum valid).
func (l *Layout) SetDSCP(frame []byte, dscp uint8) {
	if l.IPv6 {
		h := roce.IPv6(frame[l.L3:])
		h.SetTrafficClass(dscp, h.ECN())
		return
	}
	h := roce.IPv4(frame[l.L3:])
	h.SetTOS(dscp, h.ECN())
	h.UpdateChecksum()
}

// TTL returns the IPv4 TTL or IPv6 hop limit.
func (l *Layout) TTL(frame []byte) uint8 {
	if l.IPv6 {
		return roce.IPv6(frame[l.L3:]).HopLimit()
	}
	return roce.IPv4(frame[l.L3:]).TTL()
}

// SetProto rewrites the IPv4 protocol or the IPv6 fixed header's next header.
func (l *Layout) SetProto(frame []byte, p uint8) {
	l.Proto = p
	if l.IPv6 {
		roce.IPv6(frame[l.L3:]).SetNextHeader(p)
		return
	}
	h := roce.IPv4(frame[l.L3:])
	h.SetProtocol(p)
	h.UpdateChecksum()
}

// AddIPLength adds delta bytes to the IP length field (and fixes the IPv4 checksum).
func (l *Layout) AddIPLength(frame []byte, delta int) {
	l.End += delta
	if l.IPv6 {
		h := roce.IPv6(frame[l.L3:])
		h.SetPayloadLen(h.PayloadLen() + delta)
		return
	}
	h := roce.IPv4(frame[l.L3:])
	h.SetTotalLen(h.TotalLen() + delta)
	h.UpdateChecksum()
}

// AddUDPLength adds delta to the length of the UDP header at off.
func AddUDPLength(frame []byte, off, delta int) {
	u := roce.UDP(frame[off:])
	u.SetLength(u.Length() + delta)
}

// UDPAt reports whether a well-formed UDP header starts at off and ends within the IP
// packet.
func (l *Layout) UDPAt(frame []byte, off int) bool {
	return off+roce.UDPSize <= l.End && off+roce.UDP(frame[off:]).Length() == l.End
}

// Open inserts n zero bytes at off, shifting frame[off:] right inside frame's
// capacity, and returns the longer frame. It fails with ErrNoRoom when cap(frame) is
// short. It never allocates.
func Open(frame []byte, off, n int) ([]byte, error) {
	if off > len(frame) || n < 0 {
		return frame, Malformed("gap at %d outside a %d-byte frame", off, len(frame))
	}
	if len(frame)+n > cap(frame) {
		return frame, fmt.Errorf("%w: need %d bytes, capacity %d", ErrNoRoom, len(frame)+n, cap(frame))
	}
	grown := frame[:len(frame)+n]
	copy(grown[off+n:], frame[off:])
	clear(grown[off : off+n])
	return grown, nil
}

// Close removes n bytes at off and returns the shorter frame.
func Close(frame []byte, off, n int) []byte {
	copy(frame[off:], frame[off+n:])
	return frame[:len(frame)-n]
}

// PutAllOnes fills b with 0xFF: the value of a field a node cannot supply.
func PutAllOnes(b []byte) {
	for i := range b {
		b[i] = 0xFF
	}
}

// Saturate returns v, or max when v does not fit below max. Formats reserve the
// all-ones value for "not supplied", so callers pass the all-ones value minus one.
func Saturate(v, max uint64) uint64 {
	if v > max {
		return max
	}
	return v
}

// Codec is what every format offers a switch or a NIC besides decoding (whose result
// is format-specific): see the package comment for the contract of each operation.
type Codec interface {
	// Request adds an empty telemetry request to frame and returns the longer frame.
	Request(frame []byte) ([]byte, error)
	// Push adds hop h as a transit node would and says what happened; the returned
	// frame is to be forwarded whatever the Status. An error means the frame does not
	// carry this format (ErrNoTelemetry) or is malformed; the frame is then unchanged.
	Push(frame []byte, h *Hop) ([]byte, Status, error)
	// Strip removes the telemetry and returns the original packet.
	Strip(frame []byte) ([]byte, error)
}
