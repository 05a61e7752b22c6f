package experiment

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
)

// queueSeries is a bottleneck sampled every µs: queue[i] bytes and tx[i] bytes sent by
// the i-th µs.
func queueSeries(queue []int, tx []uint64) []QueueSample {
	out := make([]QueueSample, len(queue))
	for i := range queue {
		out[i] = QueueSample{T: clock.Time(i * 1000), Bytes: queue[i], TxBytes: tx[i]}
	}
	return out
}

// TestMeasureWindowAfterDrain: the window starts at the first drain after the peak.
// By hand: queue 0, 5000, 9000, 4000, 500, 700, 300 at 0…6 µs with a 1100-byte drain
// level drains at 4 µs; to the last completion at 6 µs the window holds 500, 700, 300:
// mean 500, p99 700. The port sent 1100 bytes each µs from 1 µs on (wire 8.8 Gb/s)
// while the receivers got 1000 bytes of payload per µs (goodput 8 Gb/s):
// telemetry and header bytes count in the wire rate, not in the goodput.
func TestMeasureWindowAfterDrain(t *testing.T) {
	res := &Result{Queue: queueSeries([]int{0, 5000, 9000, 4000, 500, 700, 300}, []uint64{0, 1100, 2200, 3300, 4400, 5500, 6600}),
		Flows: []FlowRecord{{Size: 6000, Finished: true, FCTNs: 6000}}}
	for i := range 7 {
		res.Delivered = append(res.Delivered, DeliveredSample{T: clock.Time(i * 1000), Bytes: uint64(i * 1000)})
	}
	last := clock.Time(6000)
	drain := firstDrain(res.QueueSamples(), 1100, last)
	if drain != 4000 {
		t.Fatalf("first drain at %d ns, want 4000", drain)
	}
	m := measure(res, []span{{drain, last, "after the first drain"}}, 10e9)
	if m.Window.StartNs != 4000 || m.Window.EndNs != 6000 || m.MeanQueue != 500 || m.QueueP99 != 700 || m.PeakQueue != 9000 {
		t.Errorf("window %v, mean %v, p99 %d, peak %d: want 4000–6000 ns, 500, 700, 9000", m.Window, m.MeanQueue, m.QueueP99, m.PeakQueue)
	}
	if m.WireRate != 8.8e9 || m.Goodput != 8e9 || m.Utilization != 0.88 {
		t.Errorf("wire %v, goodput %v, utilization %v: want 8.8e9, 8e9, 0.88", m.WireRate, m.Goodput, m.Utilization)
	}
	if m.FlowsFinished != 1 || m.FlowsTotal != 1 || m.Jain != 1 {
		t.Errorf("%d of %d finished, Jain %v: want 1 of 1, 1", m.FlowsFinished, m.FlowsTotal, m.Jain)
	}
}

// TestMeanQueueFromArea: samples that carry the port's queue area (a lab's) give the
// time-averaged queue between the first and the last, whatever the point samples
// read. By hand: the queue reads 0 at every sample of 0…4 µs, but the area grew by
// 8,000,000 byte·ns over the 4 µs (2000 B on average, say a queue that fills and
// empties between samples); without areas, the mean of the samples is 0.
func TestMeanQueueFromArea(t *testing.T) {
	q := queueSeries([]int{0, 0, 0, 0, 0}, make([]uint64, 5))
	if got := meanQueue(slices.Values(q)); got != 0 {
		t.Errorf("point samples: mean queue %v, want 0", got)
	}
	for i := range q {
		q[i].Area = 5_000_000 + uint64(i)*2_000_000
	}
	if got := meanQueue(slices.Values(q)); got != 2000 {
		t.Errorf("with areas: mean queue %v, want 2000", got)
	}
}

// TestFirstDrainToStandingQueue: with more flows than the path's bandwidth-delay
// product has packets, every flow at HPCC's minimum window, the queue settles at a
// standing level above one packet and never drains to it while the flows run. By
// hand: queue 0, 9000, 5000, 2300, 2400, 1200, 2400, 0 at 0…7 µs, the first flow done
// at 6 µs: from the peak to 6 µs the queue holds 9000, 5000, 2300, 2400, 1200, 2400,
// lower quartile (the second of six) 2300, first reached at 3 µs — not the 0 at 7 µs, after the
// flows finished, that a 1100-byte level waits for. A queue that empties while the
// flows run keeps the 1100-byte level: 0, 9000, 4000, 0, 0 drains at 3 µs.
func TestFirstDrainToStandingQueue(t *testing.T) {
	q := queueSeries([]int{0, 9000, 5000, 2300, 2400, 1200, 2400, 0}, make([]uint64, 8))
	if got := firstDrain(slices.Values(q), 1100, 6000); got != 3000 {
		t.Errorf("first drain at %d ns, want 3000 (the standing 2300 B)", got)
	}
	q = queueSeries([]int{0, 9000, 4000, 0, 0}, make([]uint64, 5))
	if got := firstDrain(slices.Values(q), 1100, 4000); got != 3000 {
		t.Errorf("first drain at %d ns, want 3000 (the queue's 0)", got)
	}
	// A queue that peaks after the first completion has no settled level: the
	// 1100-byte level alone (by hand: peak 9000 at 1 µs, first completion at 0).
	if got := firstDrain(slices.Values(q), 1100, 0); got != 3000 {
		t.Errorf("peak after the first completion: first drain at %d ns, want 3000", got)
	}
	// A higher peak after the first completion (a lab's stall in the flows' tail)
	// does not move the drain of the initial burst: by hand, 0, 9000, 4000, 0, 0,
	// 20000, 0 with the first completion at 4 µs drains at 3 µs, not at 6 µs.
	late := queueSeries([]int{0, 9000, 4000, 0, 0, 20000, 0}, make([]uint64, 7))
	if got := firstDrain(slices.Values(late), 1100, 4000); got != 3000 {
		t.Errorf("a higher peak after the first completion: first drain at %d ns, want 3000", got)
	}
	// A queue that oscillates while the flows run (DCQCN's, sampled every
	// millisecond in a lab) peaks highest after the initial burst; the window still
	// starts at the burst's drain. By hand: 0, 9000, 4000, 0, 5000, 12000, 0, 3000 with
	// the first completion at 7 µs: half the highest peak (12000 at 5 µs) is first
	// reached at 1 µs, and the burst's top is that 9000 (the 4000 after it is below
	// half); from there the lower quartile (the second of seven) is 0, so the level
	// stays 1100, first reached at 3 µs, not the 6 µs after the highest peak.
	dcqcn := queueSeries([]int{0, 9000, 4000, 0, 5000, 12000, 0, 3000}, make([]uint64, 8))
	if got := firstDrain(slices.Values(dcqcn), 1100, 7000); got != 3000 {
		t.Errorf("an oscillating queue: first drain at %d ns, want 3000 (after the initial burst)", got)
	}
	if got := firstDrain(slices.Values(q[:1]), 1100, 6000); got != -1 {
		t.Errorf("a queue that never exceeds the level drains at %d, want -1", got)
	}
}

// TestMeasureEmptyWindowFallsBack: a candidate holding fewer than two samples is
// skipped for the next one, and with none left the metrics say so instead of
// printing zeros as if measured. By hand: the arrivals all at 2 µs make the window
// "while flows arrive" empty (2–2 µs), so the window runs from the first arrival at
// 2 µs to the last completion at 5 µs: queues 3000, 1000, 0, 2000, mean 1500.
func TestMeasureEmptyWindowFallsBack(t *testing.T) {
	res := &Result{Queue: queueSeries([]int{0, 0, 3000, 1000, 0, 2000}, []uint64{0, 0, 0, 1000, 2000, 3000})}
	m := measure(res, []span{{2000, 2000, "while flows arrive"}, {2000, 5000, "from the first arrival to the last completion"}}, 1e9)
	if m.Window.What != "from the first arrival to the last completion" || m.MeanQueue != 1500 {
		t.Errorf("window %v, mean %v: want the fallback, 1500", m.Window, m.MeanQueue)
	}
	if got := m.Window.String(); got != "2.0–5.0 µs (from the first arrival to the last completion)" {
		t.Errorf("window printed as %q", got)
	}
	m = measure(&Result{}, []span{{0, 0, "while flows arrive"}}, 1e9)
	if m.Window.EndNs != 0 || !strings.HasPrefix(m.Window.String(), "none: ") {
		t.Errorf("no traffic: window %v, want none", m.Window)
	}
}

// TestUnfinishedFlowsReported: 2 senders of 2 MB at 100 Gb/s need at least 320 µs;
// stopped at 50 µs neither finishes. Each flow is reported unfinished with no FCT and
// no slowdown (not −start, not negative), the summary says "0 of 2 finished" and
// gives no slowdown quantiles, the window runs to the end of the run, and the CSV's
// fct_ns and slowdown cells are empty.
func TestUnfinishedFlowsReported(t *testing.T) {
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize, cfg.Limit = 2, 2_000_000, 50*time.Microsecond
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Flows {
		if f.Finished || f.FCTNs != 0 || f.Slowdown != 0 {
			t.Errorf("flow %d: finished %v, FCT %d ns, slowdown %v: want unfinished, 0, 0", f.ID, f.Finished, f.FCTNs, f.Slowdown)
		}
	}
	m := res.Metrics
	if m.FlowsFinished != 0 || m.FlowsTotal != 2 || m.Window.EndNs < 49_000 || m.WireRate < 90e9 || m.Goodput <= 0 {
		t.Errorf("metrics %+v: want 0 of 2 finished, a window to the end of the run with traffic", m)
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	for _, want := range []string{"0 of 2 finished", "2 flows unfinished", "FCT slowdown      none: no flow finished"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary without %q:\n%s", want, sum.String())
		}
	}
	if strings.Contains(sum.String(), " -") {
		t.Errorf("a negative number in the summary:\n%s", sum.String())
	}
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"flows.csv", "queue.csv", "rates.csv"} {
		for _, row := range readCSV(t, filepath.Join(dir, name)) {
			for _, cell := range row {
				if strings.HasPrefix(cell, "-") {
					t.Errorf("%s: negative cell in %v", name, row)
				}
			}
		}
	}
	rows := readCSV(t, filepath.Join(dir, "flows.csv"))
	if got := strings.Join(rows[1], ","); !strings.HasPrefix(got, "0,0,2,2000000,0,false,,") || !strings.HasSuffix(got, ",") {
		t.Errorf("flows.csv row %q: want finished false and empty fct_ns and slowdown", got)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestGoodputBelowWireRate: one 2 MB flow through the switch, measured at the
// bottleneck (wire rate) and at the receiver (goodput). By hand:
//   - without congestion control, each 1024-byte payload travels in a frame of
//     1024 + 58 bytes (Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4; the first
//     packet's 16-byte RETH is one in 1954), so in any window the goodput is
//     1024/1082 = 0.9464 of the wire rate, which is the line rate while the flow sends;
//   - under the ns-3 preset (HPCC, 1000-byte payloads, and in every data frame the
//     44-byte HPCC block: a 4-byte shim and the simulator's five 8-byte hop slots)
//     the frame is 1000 + 58 + 44 bytes, so telemetry and
//     headers take the goodput to 1000/1102 = 0.9074 of the wire rate, which HPCC
//     holds near η = 0.95 of the line rate (a lone flow: at least 90 Gb/s).
//
// Both ratios hold within 1 %.
func TestGoodputBelowWireRate(t *testing.T) {
	none := Defaults()
	none.Senders, none.FlowSize, none.CC = 1, 2_000_000, rnic.ModeNone
	ns3 := NS3(Defaults())
	ns3.Senders, ns3.FlowSize = 1, 2_000_000
	for _, tc := range []struct {
		name       string
		cfg        Config
		ratio, min float64
	}{
		{"none", none, 1024.0 / 1082, 95e9},
		{"ns3 HPCC", ns3, 1000.0 / 1102, 90e9},
	} {
		res := runOK(t, tc.cfg)
		m := res.Metrics
		ratio := m.Goodput / m.WireRate
		t.Logf("%s: window %v: wire %.2f Gb/s, goodput %.2f Gb/s, ratio %.4f", tc.name, m.Window, m.WireRate/1e9, m.Goodput/1e9, ratio)
		if math.Abs(ratio/tc.ratio-1) > 0.01 {
			t.Errorf("%s: goodput / wire rate %.4f, want %.4f ± 1%%", tc.name, ratio, tc.ratio)
		}
		if m.WireRate < tc.min {
			t.Errorf("%s: wire rate %.2f Gb/s of a lone flow, want ≥ %.0f", tc.name, m.WireRate/1e9, tc.min/1e9)
		}
	}
}

// TestLoopLatenessSummary: a real-time run's loop lateness is summarized from the
// clock's buckets and printed, with a warning once 1% of the timers ran at least the
// loops' MaxLag late (up to it a loop runs its events at their own times), or, for
// loops at real time (several loops, MaxLag 1 ns), later than the base RTT; a
// virtual-time run has none and prints none.
func TestLoopLatenessSummary(t *testing.T) {
	var x clock.Lateness
	x.Buckets[0], x.Buckets[5], x.Buckets[8] = 980, 15, 5 // < 1 µs; 16–32 µs; 128–256 µs
	x.Sum = 980*500 + 15*20_000 + 5*200_000
	x.MaxLag = 2 * time.Millisecond
	l := NewLoopLateness(x)
	if *l != (LoopLateness{Timers: 1000, MeanUS: 1.79, P50US: 1, P99US: 32, MaxLagUS: 2000}) {
		t.Errorf("NewLoopLateness = %+v, want 1000 timers, mean 1.79 µs, p50 < 1 µs, p99 < 32 µs, max lag 2000 µs", *l)
	}
	for _, c := range []struct {
		maxLagUS float64
		p99      float64
		warn     bool
	}{
		{2000, 32, false},
		{2000, 256, false}, // 128 µs or more late: behind, but its events at their own times
		{2000, 4096, true}, // 2,048 µs or more: beyond MaxLag
		{0.001, 32, false}, // a loop at real time (several loops): within the base RTT
		{0.001, 256, true}, // 128 µs or more late: beyond the base RTT
	} {
		res := &Result{Config: Defaults(), BaseRTT: 60 * time.Microsecond}
		lc := *l
		lc.P99US, lc.MaxLagUS = c.p99, c.maxLagUS
		res.Metrics.LoopLateness = &lc
		var sum bytes.Buffer
		res.WriteSummary(&sum)
		if !strings.Contains(sum.String(), fmt.Sprintf("loop lateness     mean 1.8 µs, p50 < 1 µs, p99 < %g µs over 1000 timers", c.p99)) {
			t.Errorf("summary without the loop lateness:\n%s", sum.String())
		}
		if got := strings.Contains(sum.String(), "WARNING"); got != c.warn {
			t.Errorf("max lag %g µs, p99 < %g µs: warning %v, want %v:\n%s", c.maxLagUS, c.p99, got, c.warn, sum.String())
		}
	}
	// A lab run's samples: asked every 1 ms, a 3 ms gap passes, a 52 ms one warns.
	for _, c := range []struct {
		gapUS float64
		warn  bool
	}{{3000, false}, {52000, true}} {
		res := &Result{Config: Defaults()}
		res.Config.Sample = time.Millisecond
		res.Metrics.LongestSampleGapUS = c.gapUS
		var sum bytes.Buffer
		res.WriteSummary(&sum)
		if got := strings.Contains(sum.String(), "the lab answered its samples up to"); got != c.warn {
			t.Errorf("samples up to %g µs apart, every 1 ms asked: warning %v, want %v:\n%s", c.gapUS, got, c.warn, sum.String())
		}
	}
	res := &Result{Config: Defaults()}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	if strings.Contains(sum.String(), "loop lateness") {
		t.Errorf("a virtual-time summary with loop lateness:\n%s", sum.String())
	}
}
