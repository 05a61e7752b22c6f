package telemetry

import (
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

// Locate locates frame's IP header with roce.Locate, the locator every layer shares
// (stacked VLAN tags included), for a codec: a frame that is not IP is
// ErrUnsupported (returned as is: a switch meets such frames all the time and must
// not allocate for them), one whose IP header contradicts itself or the frame
// ErrMalformed.
func Locate(frame []byte) (roce.Layout, error) {
	l, err := roce.Locate(frame)
	switch {
	case err == roce.ErrEthernetCutOff || err == nil && l.IPVersion == 0:
		return l, ErrUnsupported
	case err != nil:
		return l, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return l, nil
}

// AddUDPLength adds delta to the length of the UDP header at off.
func AddUDPLength(frame []byte, off, delta int) {
	u := roce.UDP(frame[off:])
	u.SetLength(u.Length() + delta)
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

// Opener opens n zero bytes at off in frame and returns the longer frame, as Open
// does; Closer removes n bytes at off and returns the shorter frame, as Close does.
// Either may move the bytes before off instead of those after it: the frame's
// headers keep their offsets from its start, whichever moves.
type (
	Opener func(frame []byte, off, n int) ([]byte, error)
	Closer func(frame []byte, off, n int) []byte
)

// InPlace is a Codec that edits a pooled frame through an Opener and a Closer bound
// to it, which move the frame's shorter side into the room its buffer has before or
// after it (fabric/link's Editor): telemetry goes a few dozen bytes into a frame, so
// a NIC adding or stripping it and a switch pushing a hop move the headers, not the
// payload. RequestWith, PushWith and StripWith are Request, Push and Strip with every
// gap opened by open and closed by close. PushWith takes the frame's headers as Locate
// found them, l, and sets h.TTL to the TTL (or hop limit) of the frame's IP header, as
// a switch does: the switch has located the headers to see whether the frame asks for
// telemetry, and the codec does not walk them a second time.
type InPlace interface {
	RequestWith(frame []byte, open Opener, close Closer) ([]byte, error)
	PushWith(frame []byte, l roce.Layout, h *Hop, open Opener) ([]byte, Status, error)
	StripWith(frame []byte, close Closer) ([]byte, error)
}

// HopsPusher is a Codec that pushes several hops at once: PushHops(frame, hops) is
// Push called on each of hops in turn, first to last, stopping at the first error.
type HopsPusher interface {
	PushHops(frame []byte, hops []Hop) ([]byte, error)
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

// Signal is how a format marks the frames that carry it, read from a located frame:
// the test each codec's decoder starts its search with. A caller that has located the
// frame already (roce.Locate) asks it first, and skips the codec for the many frames
// that carry no telemetry (a probe-per-RTT flow's data and ACKs): each codec would
// locate the headers again to find that out.
type Signal struct {
	By    SignalBy
	Value uint8 // the DSCP (SignalDSCP) or the IP protocol (SignalProtocol)
}

// rocelab's own signals. A soft-RNIC (package rnic) uses each format twice: as the
// request a sender adds to a data packet or probe, which switches on the forward path
// push hops into, and as the echo a receiver puts in an ACK to carry those hops back.
// The echo is the same encoding with another signal, so that the switches on the
// reverse path, which serve only the request's, leave it alone. Decoders (rocelab
// decode, conformance, the Wireshark dissector) honour these besides each format's
// default, so that a lab's captures decode as they stand.
const (
	// RequestDSCPINT signals an INT-MD request: the INT specification's example value
	// (0x17) is class 2, which would put telemetry packets in another queue than the
	// flow's other packets and reorder them. Requests, echoes and plain RoCE data of
	// AF31 share class 3, one priority.
	RequestDSCPINT = 0x1B
	EchoDSCP       = 0x1D // INT-MD and HPCC-block echoes (the block's request: hpcchop.DefaultDSCP)
	EchoProtocol   = 254  // IFA echoes (the request: ifa.DefaultProtocol, 253)
	EchoNamespace  = 2    // IOAM echoes (the request: namespace 1)
)

// SignalBy is the kind of mark a format uses.
type SignalBy uint8

const (
	// SignalDSCP: after UDP, marked by a DSCP (INT-MD, the HPCC hop).
	SignalDSCP SignalBy = iota + 1
	// SignalProtocol: an IP protocol of its own (IFA).
	SignalProtocol
	// SignalHopByHop: an IPv6 Hop-by-Hop options header (IOAM).
	SignalHopByHop
)

// Shown reports whether frame, located as l, shows the signal; false means the
// format's codecs would answer ErrNoTelemetry. The zero Signal is shown by every frame.
func (s Signal) Shown(frame []byte, l *roce.Layout) bool {
	switch s.By {
	case SignalDSCP:
		return l.Proto == ProtoUDP && l.DSCP(frame) == s.Value
	case SignalProtocol:
		return l.Proto == s.Value
	case SignalHopByHop:
		return l.IPv6() && l.Proto == ProtoHopByHop
	}
	return true
}

// Signaller is a codec that says how the frames carrying its telemetry are marked.
type Signaller interface {
	Signal() Signal
}
