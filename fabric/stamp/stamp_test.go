package stamp

import (
	"bytes"
	"testing"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// Every codec stamps through the switch's interface, untagged, 802.1Q-tagged and
// QinQ-tagged (802.1ad outer tag, as the switch forwards them): the frame grows in
// its pooled buffer, decodes with the hop the switch measured, and strips back to the
// original RoCEv2 frame with a valid ICRC.
func TestStampThroughFabricInterface(t *testing.T) {
	cases := []struct {
		name   string
		codec  telemetry.Codec
		ipv6   bool
		decode func([]byte, *telemetry.Stack) error
	}{
		{"int-md", intmd.New(), false, func(b []byte, s *telemetry.Stack) error { _, err := intmd.New().Decode(b, s); return err }},
		{"ioam", ioam.New(), true, func(b []byte, s *telemetry.Stack) error { _, err := ioam.New().Decode(b, s); return err }},
		{"ifa", ifa.New(), false, func(b []byte, s *telemetry.Stack) error { _, err := ifa.New().Decode(b, s); return err }},
		{"hpcc", hpcchop.New(), false, func(b []byte, s *telemetry.Stack) error { _, err := hpcchop.New().Decode(b, s); return err }},
	}
	tags := []struct {
		name string
		tcis []uint16
	}{{"untagged", nil}, {"802.1Q", []uint16{3<<13 | 100}}, {"QinQ", []uint16{5<<13 | 200, 3<<13 | 100}}}
	pool := link.NewPool(2048)
	for _, c := range cases {
		for _, tag := range tags {
			name := c.name + " " + tag.name
			var st fabric.Stamper = New(c.codec)
			orig := telemetrytest.Tagged(telemetrytest.RoCEFrame(c.ipv6), tag.tcis...)
			if err := telemetrytest.Valid(orig); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			req, err := c.codec.Request(append(make([]byte, 0, telemetrytest.BufSize), orig...))
			if err != nil {
				t.Fatalf("%s: request: %v", name, err)
			}
			f := pool.Get()
			if err := f.SetBytes(req); err != nil {
				t.Fatal(err)
			}
			f.InPort = 3
			want := telemetrytest.Hop(1)
			ok, err := st.Stamp(f, want.Hop)
			if err != nil || !ok {
				t.Fatalf("%s: stamp %v %v", name, ok, err)
			}
			var s telemetry.Stack
			if err := c.decode(f.Bytes(), &s); err != nil || s.N != 1 {
				t.Fatalf("%s: decode %d hops: %v", name, s.N, err)
			}
			want.IngressPort = 3
			want.TTL = 64
			got := s.Hops[0]
			got.Has &^= telemetry.FieldHopLatency | telemetry.FieldIngressTS | telemetry.FieldQueueID // the switch hook supplies none
			if err := telemetrytest.CheckFields(&got, &want); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			stripped, err := c.codec.Strip(append([]byte(nil), f.Bytes()...))
			if err != nil || !bytes.Equal(stripped, orig) {
				t.Errorf("%s: strip did not restore the frame: %v", name, err)
			}
			// A frame without telemetry is left alone.
			f.SetBytes(orig)
			if ok, err := st.Stamp(f, want.Hop); ok || err != nil || !bytes.Equal(f.Bytes(), orig) {
				t.Errorf("%s: plain frame stamped: %v %v", name, ok, err)
			}
			f.Release()
		}
	}
}

// The codecs' FuzzPush targets give frames the spare capacity a switch's frames have.
func TestFuzzTailroom(t *testing.T) {
	if telemetrytest.Tailroom != link.Tailroom {
		t.Fatalf("telemetrytest.Tailroom %d, link.Tailroom %d", telemetrytest.Tailroom, link.Tailroom)
	}
}

// The HPCC hop at a lab rate (10 Gb/s, no simulator code) grows the frame by the
// extension's rate table and decodes with its rate; a rate the extension cannot say
// either is refused with the frame's length unchanged and the E flag set.
func TestStampHPCCLabRates(t *testing.T) {
	pool := link.NewPool(2048)
	c := hpcchop.New()
	st := New(c)
	req, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	f := pool.Get()
	defer f.Release()
	if err := f.SetBytes(req); err != nil {
		t.Fatal(err)
	}
	hop := telemetrytest.Hop(1)
	hop.Rate = 10e9
	if ok, err := st.Stamp(f, hop.Hop); !ok || err != nil || f.Len() != len(req)+hpcchop.RateTableSize {
		t.Fatalf("10G stamp: %v %v, %d bytes", ok, err, f.Len())
	}
	var s telemetry.Stack
	if _, err := c.Decode(f.Bytes(), &s); err != nil || s.N != 1 || s.Hops[0].Rate != 10e9 {
		t.Fatalf("decode: %+v %v", s.HopList(), err)
	}
	n := f.Len()
	hop.Rate = 1.5e6
	ok, err := st.Stamp(f, hop.Hop)
	hd, derr := c.Decode(f.Bytes(), &s)
	if ok || err == nil || f.Len() != n || derr != nil || !hd.Error || s.N != 1 {
		t.Fatalf("1.5 Mb/s stamp: %v %v, %d bytes; decode %+v %v", ok, err, f.Len(), hd, derr)
	}
}

// A codec that edits frames in place (INT-MD, IFA) stamps a pooled frame by
// moving the headers in front of the gap into the headroom, leaving the payload where
// it is, and gives byte for byte the frames its Push gives; a frame without headroom
// left grows into its tailroom instead.
func TestStampMovesHeaders(t *testing.T) {
	pool := link.NewPool(2048)
	for _, c := range []telemetry.Codec{intmd.New(), ifa.New()} {
		if _, ok := c.(telemetry.InPlace); !ok {
			t.Fatalf("%T does not edit frames in place", c)
		}
		st := New(c)
		req, err := c.Request(append(make([]byte, 0, telemetrytest.BufSize), telemetrytest.RoCEFrame(false)...))
		if err != nil {
			t.Fatal(err)
		}
		for _, headroom := range []int{link.Headroom, 0} {
			f := pool.Get()
			if headroom == 0 {
				f.Grow(0, link.Headroom) // an empty frame grows at its head: it starts where the buffer does
			}
			b, _ := f.SetLen(len(req))
			copy(b, req)
			want := append(make([]byte, 0, telemetrytest.BufSize), req...)
			for i := range 8 {
				// What the switch hook supplies of a hop: its HPCC fields, the ingress
				// port and the TTL it read.
				hop := telemetry.Hop{Hop: telemetrytest.Hop(i + 1).Hop, IngressPort: uint32(f.InPort), TTL: 64}
				room, tail := f.Headroom(), f.Tailroom()
				ok, err := st.Stamp(f, hop.Hop)
				if !ok || err != nil {
					t.Fatalf("%T, hop %d: stamp %v %v", c, i, ok, err)
				}
				if want, _, err = c.Push(want, &hop); err != nil {
					t.Fatal(err)
				}
				switch {
				case !bytes.Equal(f.Bytes(), want):
					t.Fatalf("%T, hop %d, headroom %d: the stamped frame differs from Push's\n%x\n%x", c, i, headroom, f.Bytes(), want)
				case room >= len(want)-len(b) && (f.Tailroom() != tail || f.Headroom() >= room):
					t.Errorf("%T, hop %d: headroom %d → %d, tailroom %d → %d: the payload moved", c, i, room, f.Headroom(), tail, f.Tailroom())
				case room < len(want)-len(b) && f.Headroom() != room:
					t.Errorf("%T, hop %d: grew into a headroom of %d bytes", c, i, room)
				}
				b = f.Bytes()
			}
			f.Release()
		}
	}
}

// TestStampSkipsUnsignalled: a frame without the codec's signal (a probe-per-RTT
// flow's data and ACKs) is turned away on its located headers, untouched, without
// allocating, for every codec (TestStampThroughFabricInterface stamps the requests).
func TestStampSkipsUnsignalled(t *testing.T) {
	pool := link.NewPool(2048)
	for _, c := range []telemetry.Codec{intmd.New(), ifa.New(), hpcchop.New(), ioam.New()} {
		st := New(c)
		plain := telemetrytest.RoCEFrame(false)
		f := pool.Get()
		if err := f.SetBytes(plain); err != nil {
			t.Fatal(err)
		}
		hop := telemetrytest.Hop(1).Hop
		if allocs := testing.AllocsPerRun(100, func() {
			if ok, err := st.Stamp(f, hop); ok || err != nil {
				t.Fatalf("%T: a plain frame stamped %v %v", c, ok, err)
			}
		}); allocs != 0 {
			t.Errorf("%T: %v allocations per unsignalled frame", c, allocs)
		}
		if !bytes.Equal(f.Bytes(), plain) {
			t.Errorf("%T: the plain frame changed", c)
		}
		f.Release()
	}
}

// TestStampDetachedNoted: a frame that carries its block beside it (link.Frame.Detached)
// gets the same hops, statuses and block whether the switch noted its IP length and
// TTL when it arrived (link.Frame.IPLen) or the stamper reads them from the headers,
// up to and past the format's hop limit.
func TestStampDetachedNoted(t *testing.T) {
	pool := link.NewPool(2048)
	mtuBound := intmd.New()
	mtuBound.MTU = 200 // a hop fits; later ones exceed it
	for _, c := range []telemetry.Detacher{mtuBound, hpcchop.New()} {
		frames := [2]*link.Frame{pool.Get(), pool.Get()}
		for i, f := range frames {
			if err := f.SetBytes(telemetrytest.RoCEFrame(false)); err != nil {
				t.Fatal(err)
			}
			b := f.Bytes()
			l, err := telemetry.Locate(b)
			if err != nil {
				t.Fatal(err)
			}
			blk, err := c.RequestDetached(b, l, f.Detached()[:0])
			if err != nil {
				t.Fatalf("%T: %v", c, err)
			}
			f.SetDetached(blk)
			if i == 1 {
				f.IPLen, f.TTL = uint16(l.End-l.L3), l.TTL(b)
			}
		}
		st := [2]*Stamper{New(c.(telemetry.Codec)), New(c.(telemetry.Codec))}
		for hop := range 12 {
			h := telemetrytest.Hop(hop + 1).Hop
			ok0, err0 := st[0].Stamp(frames[0], h)
			ok1, err1 := st[1].Stamp(frames[1], h)
			if ok0 != ok1 || (err0 == nil) != (err1 == nil) || st[0].Last() != st[1].Last() {
				t.Fatalf("%T hop %d: read %v %v %v, noted %v %v %v", c, hop, ok0, err0, st[0].Last(), ok1, err1, st[1].Last())
			}
			if !bytes.Equal(frames[0].Detached(), frames[1].Detached()) {
				t.Fatalf("%T hop %d: blocks differ:\n%x\n%x", c, hop, frames[0].Detached(), frames[1].Detached())
			}
		}
		if len(frames[0].Detached()) == 0 {
			t.Errorf("%T: no block", c)
		}
		t.Logf("%T: %d-byte block, last status %v", c, len(frames[0].Detached()), st[0].Last())
		frames[0].Release()
		frames[1].Release()
	}
}
