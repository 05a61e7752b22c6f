// Package stamp adapts rocelab's telemetry codecs to the switch's stamping hook,
// fabric.Stamper: a switch port calls Stamp at dequeue with the hop its egress model
// measured, and the adapter pushes that hop with whichever codec the lab configured.
package stamp

import (
	"errors"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Stamper satisfies fabric.Stamper for one codec. It is used by one switch goroutine
// at a time (it keeps the hop it builds, so stamping does not allocate).
type Stamper struct {
	codec   telemetry.Codec
	inPlace telemetry.InPlace // the codec, if it edits frames in place
	// detacher is the codec, if its block can travel beside a frame
	// (link.Frame.Detached): a frame that carries one gets its hop there.
	detacher telemetry.Detacher
	// signal is how the codec's frames are marked (telemetry.Signaller; the zero
	// Signal, shown by every frame, for a codec that does not say).
	signal telemetry.Signal
	editor *link.Editor
	hop    telemetry.Hop
	last   telemetry.Status
}

// New returns a Stamper pushing hops with c.
func New(c telemetry.Codec) *Stamper {
	s := &Stamper{codec: c, editor: link.NewEditor()}
	s.inPlace, _ = c.(telemetry.InPlace)
	s.detacher, _ = c.(telemetry.Detacher)
	if sc, ok := c.(telemetry.Signaller); ok {
		s.signal = sc.Signal()
	}
	return s
}

// MayStamp reports whether frame, whose headers l locates, shows the codec's request
// signal (fabric.SignalStamper): Stamp turns away a frame without it as soon as it
// has located it.
func (s *Stamper) MayStamp(frame []byte, l *roce.Layout) bool {
	return l.IPVersion != 0 && s.signal.Shown(frame, l)
}

// Last returns the status of the most recent push (which overflow rule applied).
func (s *Stamper) Last() telemetry.Status { return s.last }

// Stamp pushes hop into f if f requests telemetry in the codec's format. It reports
// true when a hop was recorded (telemetry.Pushed, or telemetry.Wrapped for the HPCC
// ring), false for frames without the format and frames whose budget is exhausted —
// the codec has then set the format's overflow flag. A codec that can
// (telemetry.InPlace) opens its gap by moving the frame's shorter side (link.Editor);
// the others grow the frame into its tailroom, and the adapter tells the frame its
// new length; a frame that carries its block beside it (link.Frame.Detached) gets the
// hop there. An error is a hop the
// codec could not record (malformed telemetry, a rate the format cannot carry, no
// room); the codec has left the frame whole, and the switch forwards it.
func (s *Stamper) Stamp(f *link.Frame, hop hpcc.Hop) (bool, error) {
	if blk := f.Detached(); len(blk) > 0 && f.IPLen != 0 && s.detacher != nil {
		// The switch saw the request signal when the frame arrived, and noted what
		// the hop needs of its headers.
		return s.pushDetached(f, blk, hop, int(f.IPLen), f.TTL)
	}
	b := f.Bytes()
	// Most frames carry no request (a probe-per-RTT flow's data and ACKs): one look at
	// the located headers turns them away before the codec looks at them.
	l, err := telemetry.Locate(b)
	switch {
	case errors.Is(err, telemetry.ErrUnsupported):
		return false, nil // not IP: no format carries telemetry in it
	case err != nil:
		return false, err
	case !s.signal.Shown(b, &l):
		return false, nil
	}
	if blk := f.Detached(); len(blk) > 0 {
		if s.detacher == nil {
			return false, nil // a block of another format: none of this one's in the frame
		}
		return s.pushDetached(f, blk, hop, l.End-l.L3, l.TTL(b))
	}
	s.hop = telemetry.Hop{Hop: hop, IngressPort: uint32(f.InPort)}
	var out []byte
	var st telemetry.Status
	if s.inPlace != nil {
		s.editor.Edit(f)
		out, st, err = s.inPlace.PushWith(b, l, &s.hop, s.editor.Open)
		s.editor.Edit(nil)
	} else {
		s.hop.TTL = l.TTL(b)
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

// pushDetached pushes hop into blk, the block f carries beside its IP packet of
// ipLen bytes (the block not counted) with the given TTL.
func (s *Stamper) pushDetached(f *link.Frame, blk []byte, hop hpcc.Hop, ipLen int, ttl uint8) (bool, error) {
	s.hop = telemetry.Hop{Hop: hop, IngressPort: uint32(f.InPort), TTL: ttl}
	blk, st, err := s.detacher.PushDetached(blk, &s.hop, ipLen+len(blk))
	f.SetDetached(blk)
	if err != nil {
		return false, err
	}
	s.last = st
	return st == telemetry.Pushed || st == telemetry.Wrapped, nil
}
