package perftest

import (
	"math"
	"testing"
	"time"
)

// near compares printed values (two decimals).
func near(a, b float64) bool { return math.Abs(a-b) < 0.005 }

func TestBWReport(t *testing.T) {
	// 4 WRs of 1000 bytes, every second one signalled: tcompleted is set at the WR
	// counts 2 and 4 (indices 1, 3); index 0 stays unset, so the peak search starts
	// from a wrapped-around "infinite" delta, as perftest's unsigned cycles do.
	tm := bwTimes{size: 1000, iters: 4, qps: 1, cqMod: 2,
		tposted: []uint64{1, 101, 201, 301}, tcompleted: []uint64{0, 1001, 0, 3001}}
	r := bwReport(tm, false)
	// The best run: WRs 0-1 in 1000 ns, 500 ns per message. The average: 4000 bytes in
	// 3000 ns. MB/sec is MiB/s.
	if r.Size != 1000 || r.Iters != 4 || !near(r.BWPeak, 1000/500e-9/1048576) || !near(r.BWAvg, 4000/3000e-9/1048576) ||
		!near(r.MsgRate, 4/3000e-9/1e6) {
		t.Errorf("%+v", r)
	}
	if g := bwReport(tm, true); !near(g.BWAvg, 4000*8/3000e-9/1e9) {
		t.Errorf("Gb/s %+v", g)
	}
	// -N: tposted[0] at the start, tcompleted[0] at the end, and no peak.
	np := bwTimes{size: 1000, iters: 4, qps: 2, cqMod: 2, noPeak: true, tposted: []uint64{10}, tcompleted: []uint64{8010}}
	if r := bwReport(np, false); r.BWPeak != 0 || r.Iters != 8 || !near(r.BWAvg, 8000/8000e-9/1048576) {
		t.Errorf("-N, 2 QPs: %+v", r)
	}
	// -D: the count is the sample window's, not multiplied by the QPs.
	d := bwTimes{size: 4096, iters: 300, qps: 2, cqMod: 100, byDuration: true, noPeak: true,
		tposted: []uint64{1e9}, tcompleted: []uint64{3e9}}
	if r := bwReport(d, false); r.Iters != 300 || r.BWPeak != 0 || !near(r.MsgRate, 300/2.0/1e6) {
		t.Errorf("-D %+v", r)
	}
	// A last WR signalled off the moderation (iters not a multiple of cq_mod).
	odd := bwTimes{size: 1000, iters: 3, qps: 1, cqMod: 2,
		tposted: []uint64{1, 11, 21}, tcompleted: []uint64{0, 1001, 1101}}
	if r := bwReport(odd, false); !near(r.BWPeak, 1000/366e-9/1048576) {
		t.Errorf("last WR: peak %v, want WRs 0-2 in 1100 ns, 366 ns each", r.BWPeak)
	}
	both := BWReport{Size: 8, Iters: 10, BWPeak: 1, BWAvg: 2, MsgRate: 3}.sum(BWReport{Size: 8, Iters: 12, BWPeak: 4, BWAvg: 5, MsgRate: 6})
	if both != (BWReport{Size: 8, Iters: 10, BWPeak: 5, BWAvg: 7, MsgRate: 9}) {
		t.Errorf("sum %+v", both)
	}
}

// posts returns post times with the given gaps (ns) between them.
func posts(gaps ...uint64) []uint64 {
	ts := []uint64{1}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1]+g)
	}
	return ts
}

func TestLatReport(t *testing.T) {
	// 7 posts, 6 round trips; the two largest are left out; SEND halves the round trip.
	r, unsorted, sorted := latReport(2, 7, posts(10000, 12000, 11000, 50000, 9000, 13000), 2)
	want := LatReport{Size: 2, Iters: 7, Min: 4.5, Max: 6.5, Typical: 5.25, Avg: 5.25, Stdev: 0, P99: 6.5, P999: 6.5}
	if r != want {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}
	if len(unsorted) != 6 || unsorted[3] != 25 || len(sorted) != 4 || sorted[0] != 4.5 || sorted[3] != 6 {
		t.Errorf("samples %v %v", unsorted, sorted)
	}
	// READ: the whole round trip. Deviations of 1500 µs: perftest's C ints hold them.
	r, _, _ = latReport(8, 7, posts(1e6, 3e6, 2e6, 4e6, 10e6, 20e6), 1)
	if r.Min != 1000 || r.Typical != 2500 || r.Avg != 2500 || !near(r.Stdev, math.Sqrt(5e6/4)) || r.Max != 10000 {
		t.Errorf("READ %+v", r)
	}
	// An odd count after the tail: the middle sample is the median.
	r, _, _ = latReport(8, 8, posts(2000, 4000, 6000, 8000, 10000, 90000, 80000), 2)
	if r.Typical != 3 {
		t.Errorf("median %v, want 3", r.Typical)
	}
	// Deviations beyond 46340 µs square past INT_MAX: perftest's sum goes negative.
	r, _, _ = latReport(8, 7, posts(1e6, 1e6, 200e6, 1e6, 300e6, 400e6), 1)
	if !math.IsNaN(r.Stdev) {
		t.Errorf("stdev %v, want NaN (printed -nan)", r.Stdev)
	}
}

func TestCInt(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int32
	}{{0.75, 0}, {-0.75, 0}, {1500.9, 1500}, {2147483647, 2147483647}, {2147483648, math.MinInt32}, {-2147483649, math.MinInt32}, {math.NaN(), math.MinInt32}} {
		if got := cInt(c.x); got != c.want {
			t.Errorf("cInt(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestLatDurReport(t *testing.T) {
	// 4316 SENDs in a 3 s window: 347.56 µs one way, 1438.67 per second.
	r := latDurReport(2, 4316, 3e9, 2)
	if r.Iters != 4316 || !near(r.Avg, 3e6/2/4316) || !near(r.TPS, 4316/3.0) {
		t.Errorf("%+v", r)
	}
	if r := latDurReport(2, 100, 1e9, 1); r.Avg != 1e4 {
		t.Errorf("READ %+v", r)
	}
}

// TestDurationClock steps perftest's -D state machine by moving its deadlines into
// the past instead of waiting for them.
func TestDurationClock(t *testing.T) {
	var tick uint64
	now := func() uint64 { tick += 10; return tick }
	expire := func(d *durationClock) { d.next = time.Now().Add(-time.Nanosecond) }

	d := newDurationClock(Config{Duration: 4, Margin: 1}, now)
	if d.current() != stateStart {
		t.Fatal("before begin: not START")
	}
	d.begin()
	if d.current() != stateStart || time.Until(d.next) < 900*time.Millisecond {
		t.Fatalf("with a margin the run starts unmeasured: %v, %v", d.current(), d.next)
	}
	expire(d)
	if d.current() != stateSample || d.sampleStart == 0 || time.Until(d.next) < 1900*time.Millisecond {
		t.Fatalf("after the margin: %v, window ends in %v", d.current(), time.Until(d.next))
	}
	expire(d)
	if d.current() != stateStopSample || d.sampleEnd <= d.sampleStart {
		t.Fatalf("after the window: %v", d.current())
	}
	expire(d)
	if d.current() != stateEnd || d.window() != d.sampleEnd-d.sampleStart {
		t.Fatalf("after the trailing margin: %v", d.current())
	}

	// -D 1 has no margin (1/4 of a second rounds down): sampling starts at once and
	// the run ends with the window.
	d = newDurationClock(Config{Duration: 1, Margin: 0}, now)
	d.begin()
	if d.current() != stateSample {
		t.Fatalf("no margin: %v", d.current())
	}
	expire(d)
	if d.current() != stateEnd || d.sampleEnd == 0 {
		t.Fatalf("no margin, window over: %v", d.current())
	}
}
