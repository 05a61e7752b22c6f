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
// does; the frame's bytes before off keep their offsets from its start, and so do its
// headers. A switch stamping a pooled frame opens the gap by moving whichever side of
// it is shorter into the buffer's room before or after the frame (fabric/stamp, with
// link.Frame.Grow): a hop goes in a few dozen bytes after the frame's start, so it
// moves the headers, not the payload.
type Opener func(frame []byte, off, n int) ([]byte, error)

// PushOpener is a Codec that pushes a hop as a switch does, with one walk of the
// headers: PushWith sets h.TTL to the TTL (or hop limit) of the frame's IP header
// and opens the hop's gap with open; otherwise it is Push.
type PushOpener interface {
	PushWith(frame []byte, h *Hop, open Opener) ([]byte, Status, error)
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
