// Package stamp adapts rocelab's telemetry codecs to the switch's stamping hook,
// fabric.Stamper: a switch port calls Stamp at dequeue with the hop its egress model
// measured, and the adapter pushes that hop with whichever codec the lab configured.
package stamp

import (
	"errors"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Stamper satisfies fabric.Stamper for one codec. It is used by one switch goroutine
// at a time (it keeps the hop it builds, so stamping does not allocate).
type Stamper struct {
	codec  telemetry.Codec
	opener telemetry.PushOpener // the codec, if it can open its gaps with grow
	grows  telemetry.Opener     // grow, bound once
	frame  *link.Frame          // the frame being stamped, for grow
	hop    telemetry.Hop
	last   telemetry.Status
}

// New returns a Stamper pushing hops with c.
func New(c telemetry.Codec) *Stamper {
	s := &Stamper{codec: c}
	s.opener, _ = c.(telemetry.PushOpener)
	s.grows = s.grow
	return s
}

// grow opens a hop's gap in the frame being stamped by moving its shorter side, the
// headers before the gap rather than the payload after it (link.Frame.Grow), and
// clears it as telemetry.Open does.
func (s *Stamper) grow(_ []byte, off, n int) ([]byte, error) {
	f := s.frame
	gap, err := f.Grow(off, n)
	if err != nil {
		return f.Bytes(), telemetry.ErrNoRoom
	}
	clear(gap)
	return f.Bytes(), nil // its capacity runs to the end of the buffer, as Push expects
}

// Last returns the status of the most recent push (which overflow rule applied).
func (s *Stamper) Last() telemetry.Status { return s.last }

// Stamp pushes hop into f if f requests telemetry in the codec's format. It reports
// true when a hop was recorded (telemetry.Pushed, or telemetry.Wrapped for the HPCC
// ring), false for frames without the format and frames whose budget is exhausted —
// the codec has then set the format's overflow flag. A codec that can
// (telemetry.PushOpener) opens its gap by moving the frame's shorter side (Grow);
// the others grow the frame into its tailroom, and the adapter tells the frame its
// new length. An error is a hop the
// codec could not record (malformed telemetry, a rate the format cannot carry, no
// room); the codec has left the frame whole, and the switch forwards it.
func (s *Stamper) Stamp(f *link.Frame, hop hpcc.Hop) (bool, error) {
	b := f.Bytes()
	s.hop = telemetry.Hop{Hop: hop, IngressPort: uint32(f.InPort)}
	var out []byte
	var st telemetry.Status
	var err error
	if s.opener != nil {
		s.frame = f
		out, st, err = s.opener.PushWith(b, &s.hop, s.grows)
		s.frame = nil
	} else {
		if l, err := telemetry.Locate(b); err == nil {
			s.hop.TTL = l.TTL(b)
		}
		out, st, err = s.codec.Push(b, &s.hop)
	}
	switch {
	case errors.Is(err, telemetry.ErrNoTelemetry), errors.Is(err, telemetry.ErrUnsupported):
		return false, nil
	case err != nil:
		return false, err
	}
	s.last = st
	if len(out) != f.Len() { // a codec that grew the frame in its tailroom (telemetry.Open)
		if _, err := f.SetLen(len(out)); err != nil {
			return false, err
		}
	}
	return st == telemetry.Pushed || st == telemetry.Wrapped, nil
}
