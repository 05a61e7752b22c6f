package rnic

import (
	"errors"
	"fmt"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
)

// A telemetry format is used twice: as the request the sender adds to a data packet or
// probe, which switches on the forward path push hops into, and as the echo the
// receiver puts in an ACK to carry those hops back. The echo is the same encoding with
// a different signal (DSCP, IP protocol or IOAM namespace), so the switches on the
// reverse path, which serve only the request's signal, leave it alone.

// The signals are telemetry.RequestDSCPINT, telemetry.EchoDSCP, telemetry.EchoProtocol
// and telemetry.EchoNamespace, where decoders find them too.

// codec is one direction of a format: the generic operations, its decoder, and its
// signal: what a frame must show to carry it at all (telemetry.Signal). The Rx
// pipeline reads the signal from the layout it has already located: most frames carry
// no telemetry (a probe-per-RTT flow's data and ACKs), and the decoders would each
// walk the headers again to find that out.
type codec struct {
	telemetry.Codec
	decode func(frame []byte, st *telemetry.Stack) error
	// decodeStrip, if the format has it, is decode then strip in place in one walk of
	// the headers the Rx pipeline has located (the frame unchanged on an error).
	decodeStrip func(frame []byte, l roce.Layout, st *telemetry.Stack, close telemetry.Closer) ([]byte, error)
	signal      telemetry.Signal
	inPlace     telemetry.InPlace    // the codec, if it edits frames in place
	hopsPusher  telemetry.HopsPusher // the codec, if it pushes several hops at once
	// detacher is the codec on a PayloadFree device, if its block can travel beside
	// the frame (link.Frame.Detached): what the device sends then carries it there.
	detacher telemetry.Detacher
}

// telemetryCodecs is a device's format: request and echo codecs and the wrap of the
// counters it carries.
type telemetryCodecs struct {
	format  telemetry.Format
	request codec
	echo    codec
	wrap    hpcc.Wrap
	editor  *link.Editor // for the codecs that edit frames in place
}

// addStack adds c's stack to f holding hops, first to last (none for a sender's
// request; an ACK's echo holds the hops its data packet collected), stopping at the
// first error: beside f where c detaches, else in it. A codec that edits frames in
// place moves the headers in front of the stack, not the payload behind it.
func (t *telemetryCodecs) addStack(c *codec, f *link.Frame, hops []telemetry.Hop) error {
	b := f.Bytes() // its capacity runs to the end of the buffer, as Request expects
	if c.detacher != nil {
		l, err := telemetry.Locate(b)
		if err != nil {
			return err
		}
		blk, err := c.detacher.RequestDetached(b, l, f.Detached())
		if err != nil {
			return err
		}
		for i := range hops {
			if blk, _, err = c.detacher.PushDetached(blk, &hops[i], l.End-l.L3+len(blk)); err != nil {
				break
			}
		}
		f.SetDetached(blk)
		return err
	}
	var out []byte
	var err error
	if c.inPlace == nil {
		out, err = c.Request(b)
	} else {
		t.editor.Edit(f)
		out, err = c.inPlace.RequestWith(b, t.editor.Open, t.editor.Close)
		t.editor.Edit(nil)
	}
	if err != nil {
		return err
	}
	// out's capacity runs to the end of the buffer, as b's did: the hops grow into it.
	if p := c.hopsPusher; p != nil && len(hops) > 0 {
		out, err = p.PushHops(out, hops)
	} else {
		for i := range hops {
			if out, _, err = c.Push(out, &hops[i]); err != nil {
				break
			}
		}
	}
	f.SetLen(len(out))
	return err
}

// decodeStrip decodes c's telemetry in f, whose contents are b and whose headers l
// locates, into st and removes it: in one pass in place where the format can
// (c.decodeStrip), else decode then strip. The packet left is in f's buffer, as strip
// leaves it. A strip that fails after the decode found telemetry is a malformed
// frame whatever its error says (found).
func (t *telemetryCodecs) decodeStrip(c *codec, f *link.Frame, b []byte, l *roce.Layout, st *telemetry.Stack) ([]byte, error) {
	if blk := f.Detached(); len(blk) > 0 {
		if c.detacher == nil {
			return b, telemetry.Malformed("a detached block on a device that does not detach")
		}
		if err := c.detacher.DecodeDetached(blk, st); err != nil {
			return b, err
		}
		if err := c.detacher.StripDetached(b, *l, blk); err != nil {
			return b, err
		}
		f.SetDetached(blk[:0])
		return b, nil
	}
	if c.decodeStrip == nil {
		if err := c.decode(b, st); err != nil {
			return b, err
		}
		nb, err := t.strip(c, f, b)
		if err != nil {
			return b, fmt.Errorf("strip after decode: %v", err)
		}
		return nb, nil
	}
	t.editor.Edit(f)
	defer t.editor.Edit(nil)
	return c.decodeStrip(b, *l, st, t.editor.Close)
}

// strip removes c's telemetry from f, whose contents are b, and returns the packet
// left: in f's buffer, where f.Bytes() has it too if c edits frames in place.
func (t *telemetryCodecs) strip(c *codec, f *link.Frame, b []byte) ([]byte, error) {
	if c.inPlace == nil {
		return c.Strip(b)
	}
	t.editor.Edit(f)
	defer t.editor.Edit(nil)
	return c.inPlace.StripWith(b, t.editor.Close)
}

// Codecs returns the request codec of format as the switches of a lab must be
// configured with it (for fabric/stamp).
func Codecs(format telemetry.Format) (telemetry.Codec, error) {
	c, err := newTelemetryCodecs(format, false)
	if err != nil || c == nil {
		return nil, err
	}
	return c.request.Codec, nil
}

// CheckLineRate returns an error naming the format if a switch stamping format
// cannot record a hop on a link of bps. INT-MD, IOAM and IFA carry the rate in Mb/s
// in 32 bits (0xFFFFFFFF means "not supplied"); the HPCC hop uses the simulator's
// codes or rocelab's rate extension (hpcchop.CheckRate).
func CheckLineRate(format telemetry.Format, bps uint64) error {
	switch format {
	case "":
		return nil
	case telemetry.FormatHPCC:
		if err := hpcchop.CheckRate(bps); err != nil {
			return fmt.Errorf("telemetry %s: %w", format, err)
		}
		return nil
	}
	if bps%1e6 != 0 || bps/1e6 >= 0xFFFFFFFF {
		return fmt.Errorf("telemetry %s: line rate %d bit/s is not a whole number of Mb/s below 2^32-1", format, bps)
	}
	return nil
}

// newTelemetryCodecs returns the codecs of format; with detach, those that can carry
// their blocks beside the frames (telemetry.Detacher) do: a PayloadFree device's.
func newTelemetryCodecs(format telemetry.Format, detach bool) (*telemetryCodecs, error) {
	t, err := formatCodecs(format)
	if t == nil || err != nil {
		return t, err
	}
	if detach {
		t.request.detacher, _ = t.request.Codec.(telemetry.Detacher)
		t.echo.detacher, _ = t.echo.Codec.(telemetry.Detacher)
	}
	t.editor = link.NewEditor()
	for _, c := range []*codec{&t.request, &t.echo} {
		if sc, ok := c.Codec.(telemetry.Signaller); ok {
			c.signal = sc.Signal()
		}
	}
	t.request.inPlace, _ = t.request.Codec.(telemetry.InPlace)
	t.echo.inPlace, _ = t.echo.Codec.(telemetry.InPlace)
	t.echo.hopsPusher, _ = t.echo.Codec.(telemetry.HopsPusher)
	return t, nil
}

// formatCodecs returns the codecs of format.
func formatCodecs(format telemetry.Format) (*telemetryCodecs, error) {
	switch format {
	case "":
		return nil, nil
	case telemetry.FormatINTMD:
		req, echo := intmd.New(), intmd.New()
		req.DSCP, echo.DSCP = telemetry.RequestDSCPINT, telemetry.EchoDSCP
		return &telemetryCodecs{format: format,
			request: codec{Codec: req, decode: func(f []byte, st *telemetry.Stack) error { _, err := req.Decode(f, st); return err },
				decodeStrip: req.DecodeStripIn},
			echo: codec{Codec: echo, decode: func(f []byte, st *telemetry.Stack) error { _, err := echo.Decode(f, st); return err },
				decodeStrip: echo.DecodeStripIn},
		}, nil
	case telemetry.FormatHPCC:
		req, echo := hpcchop.New(), hpcchop.New()
		echo.DSCP = telemetry.EchoDSCP
		return &telemetryCodecs{format: format, wrap: hpcc.CompactWrap(req.Multi),
			request: codec{Codec: req, decode: func(f []byte, st *telemetry.Stack) error { _, err := req.Decode(f, st); return err },
				decodeStrip: req.DecodeStripIn},
			echo: codec{Codec: echo, decode: func(f []byte, st *telemetry.Stack) error { _, err := echo.Decode(f, st); return err },
				decodeStrip: echo.DecodeStripIn},
		}, nil
	case telemetry.FormatIFA:
		req, echo := ifa.New(), ifa.New()
		echo.Protocol = telemetry.EchoProtocol
		return &telemetryCodecs{format: format, wrap: hpcc.Wrap{TxBytes: ifa.TxBytesWrap},
			request: codec{Codec: req, decode: func(f []byte, st *telemetry.Stack) error { _, err := req.Decode(f, st); return err }},
			echo:    codec{Codec: echo, decode: func(f []byte, st *telemetry.Stack) error { _, err := echo.Decode(f, st); return err }},
		}, nil
	case telemetry.FormatIOAM:
		req, echo := ioam.New(), ioam.New()
		echo.Namespace = telemetry.EchoNamespace
		// The IOAM decoder reads any trace; the namespace tells request from echo.
		ns := func(c *ioam.Codec) func(f []byte, st *telemetry.Stack) error {
			return func(f []byte, st *telemetry.Stack) error {
				h, err := c.Decode(f, st)
				if err == nil && h.Namespace != c.Namespace {
					return telemetry.ErrNoTelemetry
				}
				return err
			}
		}
		return &telemetryCodecs{format: format, request: codec{Codec: req, decode: ns(req)}, echo: codec{Codec: echo, decode: ns(echo)}}, nil
	}
	return nil, errorf(ErrNotSupported, "telemetry format %q: want %s, %s, %s or %s", format,
		telemetry.FormatINTMD, telemetry.FormatIOAM, telemetry.FormatIFA, telemetry.FormatHPCC)
}

// found reports whether err says the frame carries the codec's telemetry, and whether
// err is a real problem (malformed telemetry) rather than its absence.
func found(err error) (present bool, malformed bool) {
	if err == nil {
		return true, false
	}
	return false, !errors.Is(err, telemetry.ErrNoTelemetry) && !errors.Is(err, telemetry.ErrUnsupported)
}

// hopsOf copies a decoded stack's HPCC hops into dst (reused, so nothing allocates).
func hopsOf(st *telemetry.Stack, dst []hpcc.Hop) []hpcc.Hop {
	dst = dst[:0]
	for i := range st.N {
		dst = append(dst, st.Hops[i].Hop)
	}
	return dst
}
