package stamp

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// fuzzCodecs are the stampers a switch can run, one per telemetry format and variant
// (INT-MX, the IOAM incremental trace), plus none.
var fuzzCodecs = []func() telemetry.Codec{
	func() telemetry.Codec { return intmd.New() },
	func() telemetry.Codec { c := intmd.New(); c.MX = true; return c },
	func() telemetry.Codec { return ioam.New() },
	func() telemetry.Codec { c := ioam.New(); c.Incremental = true; return c },
	func() telemetry.Codec { return ifa.New() },
	func() telemetry.Codec { return hpcchop.New() },
	nil,
}

// sink counts what reaches a host.
type sink struct{ n int }

func (s *sink) Receive(frames []*link.Frame) {
	for _, f := range frames {
		s.n++
		f.Release()
	}
}

// FuzzSwitchPort sends an arbitrary frame from a host into a switch port, through the
// link as in a lab, with each telemetry format's stamper on (the frame is flooded or
// forwarded to the other port, where it is stamped at dequeue), and runs the switch
// until it is done. No handler or stamper may panic (a contained panic counts as a
// failure here), and the frame is accounted for: received or rejected, then forwarded,
// dropped or its stamping refused.
func FuzzSwitchPort(f *testing.F) {
	for _, ipv6 := range []bool{false, true} {
		// Untagged and QinQ-tagged (802.1ad over 802.1Q), each plain and requesting
		// every format.
		for _, plain := range [][]byte{telemetrytest.RoCEFrame(ipv6), telemetrytest.Tagged(telemetrytest.RoCEFrame(ipv6), 0xA064, 0x6064)} {
			f.Add(plain)
			for _, mk := range fuzzCodecs[:len(fuzzCodecs)-1] {
				if req, err := mk().Request(append(make([]byte, 0, telemetrytest.BufSize), plain...)); err == nil {
					f.Add(req)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range fuzzCodecs {
			v := clock.NewVirtual(1)
			pool := link.NewPool(9000 + 18)
			var panicked string
			cfg := fabric.Config{ID: 1, Buffer: 1 << 20, Pool: pool,
				OnPanic: func(v any, stack []byte) { panicked = fmt.Sprintf("%v\n%s", v, stack) }}
			if mk != nil {
				cfg.Stamper = New(mk())
			}
			sw, err := fabric.New(v.NewLoop("s1"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var ends [2]link.Endpoint
			var sinks [2]sink
			for i := range ends {
				a, b, err := link.New(link.Config{Rate: 100e9, Delay: time.Microsecond, MTU: 9000})
				if err != nil {
					t.Fatal(err)
				}
				sw.AddPort(b, fabric.MAC{2, 0xff, 0, 0, 0, byte(i)})
				a.Attach(v.NewLoop("h"), &sinks[i])
				ends[i] = a
			}
			fr := pool.Get()
			if fr.SetBytes(b) != nil {
				fr.Release()
				return
			}
			ends[0].Send([]*link.Frame{fr})
			v.Run()
			in, out := sw.Ports()[0].Stats(), sw.Ports()[1].Stats()
			if in.Panics+out.Panics != 0 {
				t.Fatalf("stamper %T: the switch contained %d panics, the first: %s", cfg.Stamper, in.Panics+out.Panics, panicked)
			}
			if in.RxFrames == 0 && in.RxErrors == 0 { // a control frame counts in both
				t.Fatalf("frame neither received nor rejected: %+v", in)
			}
			if in.RxFrames == 1 && uint64(sinks[1].n)+uint64(sinks[0].n)+out.Drops+out.StampErrors+in.Filtered+in.PauseRcvd+in.RxErrors == 0 && out.QLen == 0 {
				t.Fatalf("frame lost without a count: in %+v, out %+v", in, out)
			}
		}
	})
}

// FuzzMayStamp holds MayStamp to its contract (fabric.SignalStamper): for any frame
// that locates, MayStamp false means Stamp turns the frame away, untouched and
// without an error, so the switch may skip Stamp for it.
func FuzzMayStamp(f *testing.F) {
	for _, ipv6 := range []bool{false, true} {
		plain := telemetrytest.RoCEFrame(ipv6)
		f.Add(plain)
		for _, mk := range fuzzCodecs[:len(fuzzCodecs)-1] {
			if req, err := mk().Request(append(make([]byte, 0, telemetrytest.BufSize), plain...)); err == nil {
				f.Add(req)
			}
		}
	}
	pool := link.NewPool(telemetrytest.BufSize)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := roce.Locate(b)
		if err != nil {
			return
		}
		for _, mk := range fuzzCodecs[:len(fuzzCodecs)-1] {
			st := New(mk())
			if st.MayStamp(b, &l) {
				continue
			}
			fr := pool.Get()
			if fr.SetBytes(b) != nil {
				fr.Release()
				return
			}
			ok, err := st.Stamp(fr, telemetrytest.Hop(1).Hop)
			if ok || err != nil || !bytes.Equal(fr.Bytes(), b) {
				t.Fatalf("%T: MayStamp false, then Stamp %v, %v (frame changed: %v)", mk(), ok, err, !bytes.Equal(fr.Bytes(), b))
			}
			fr.Release()
		}
	})
}
