package telemetry

import "github.com/rocelab/rocelab/roce"

// What the codecs that stack hops share: Push and PushWith written once over a
// codec's own two steps, and the walk of a stack of hops.

// Finder finds a codec's headers in a frame whose IP header l locates; X is the
// codec's record of where they are. It returns ErrNoTelemetry when the frame does not
// carry the codec's telemetry.
type Finder[X any] func(frame []byte, l roce.Layout) (X, error)

// Pusher pushes hop h into the headers x records, opening the hop's gap with open.
type Pusher[X any] func(frame []byte, x X, h *Hop, open Opener) ([]byte, Status, error)

// Find locates frame and finds the codec's headers in it: ErrUnsupported for a frame
// that is not IP, as Locate says.
func Find[X any](frame []byte, find Finder[X]) (X, error) {
	l, err := Locate(frame)
	if err != nil {
		var none X
		return none, err
	}
	return find(frame, l)
}

// Push is Codec.Push for a codec that finds its headers with find and pushes with
// push, opening the gap with Open.
func Push[X any](frame []byte, h *Hop, find Finder[X], push Pusher[X]) ([]byte, Status, error) {
	x, err := Find(frame, find)
	if err != nil {
		return frame, 0, err
	}
	return push(frame, x, h, Open)
}

// PushWith is InPlace.PushWith for such a codec: the frame's headers are l, located
// by the caller, and the hop's TTL is the frame's, as a switch records it.
func PushWith[X any](frame []byte, l roce.Layout, h *Hop, open Opener, find Finder[X], push Pusher[X]) ([]byte, Status, error) {
	x, err := find(frame, l)
	if err != nil {
		return frame, 0, err
	}
	h.TTL = l.TTL(frame)
	return push(frame, x, h, open)
}

// ReadHops decodes into s the hops of stack, stored newest first as INT, IFA and IOAM
// store them, and leaves them in path order. read decodes the hop at the start of b
// into h and returns the bytes it took, or 0 when b is too short for it. Past MaxHops
// the rest is left unread and s is marked Truncated. A hop cut off is ErrMalformed,
// naming unit (what the format calls a hop); s then holds the hops before it.
func (s *Stack) ReadHops(stack []byte, unit string, read func(b []byte, h *Hop) int) error {
	for len(stack) > 0 {
		hop := s.Slot()
		if hop == nil {
			break
		}
		n := read(stack, hop)
		if n <= 0 {
			return Malformed("%s data cut off after %d %ss", unit, s.N, unit)
		}
		stack = stack[n:]
		s.N++
	}
	s.Reverse()
	return nil
}

// FixedHop adapts a reader of fixed-size hops to ReadHops: it reads b[:size], or
// returns 0 when b is shorter.
func FixedHop(size int, read func(b []byte, h *Hop)) func(b []byte, h *Hop) int {
	return func(b []byte, h *Hop) int {
		if len(b) < size {
			return 0
		}
		read(b[:size], h)
		return size
	}
}

// SetPort records an interface ID as the ingress (FieldIngressPort) or the egress
// (FieldEgressPort) port, unless it is allOnes: formats write all ones for an ID a
// node does not supply, and such a field must not override the same port read from
// another field (INT's L1 and L2 ports, IOAM's short and wide IDs).
func (h *Hop) SetPort(f Field, v, allOnes uint32) {
	if v == allOnes {
		return
	}
	if f == FieldIngressPort {
		h.IngressPort = v
	} else {
		h.PortID = v
	}
	h.Has |= f
}
