package experiment

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/rnic"
)

// needRealTime skips a real-time test under -short or the race detector, which slow
// the loops below real time whatever the machine.
func needRealTime(t *testing.T) {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("real-time run: not under -short or the race detector, which slow the loops below real time")
	}
}

// keptUp skips the running cell, saying why, when its run shows the machine did not
// keep up (Metrics.KeptUp), in CI as anywhere: the figures then measure the machine's
// other work, not rocelab. A run that kept up is judged, so a quiet machine judges
// every cell.
func keptUp(t *testing.T, m Metrics) {
	t.Helper()
	if m.LoopLateness == nil {
		t.Fatal("the real-time run reports no loop lateness: whether the machine kept up is unknown")
	}
	ok, why := m.KeptUp()
	if !ok {
		t.Skip(why + "; not judged")
	}
	t.Log(why + ": judged")
}

// incastConfig is the real-time incast of issue 21: n senders into one receiver over
// 10 µs links at rate, about 40 ms of data at line rate in all, DCQCN's marking scaled
// to rate.
func incastConfig(rate uint64, mode rnic.Mode, n int) Config {
	cfg := RealTimeDefaults(Defaults())
	cfg.Senders, cfg.LinkRate, cfg.CC = n, rate, mode
	cfg.LinkDelay = 10 * cfg.LinkDelay
	cfg.FlowSize = int(rate/8) * 40 / 1000 / n
	cfg.ECN = fabric.SimECN(rate) // as the CLI scales it with --link-rate
	return cfg
}

// gbps converts rates in bytes/ns to Gb/s.
func gbps(rates []float64) []float64 {
	out := make([]float64, len(rates))
	for i, r := range rates {
		out[i] = 8 * r
	}
	return out
}

// flowRates returns each flow's mean rate in bytes/ns (= GB/s) and their mean.
func flowRates(res *Result) (rates []float64, mean float64) {
	for _, f := range res.Flows {
		r := float64(f.Size) / float64(f.FCTNs)
		rates = append(rates, r)
		mean += r / float64(len(res.Flows))
	}
	return rates, mean
}

// TestIncastRealTime runs N:1 incasts (N = 2, 4, 8) under the real-time driver,
// in-process as a lab runs them, at 1 and 10 Gb/s, for every congestion control a
// lab offers — HPCC with a probe per RTT, per-ACK INT and Rx-HPCC, and DCQCN — and
// holds each to the targets of issue 21: every flow completes, the bottleneck is at
// least 90% utilized, the queue averaged after the first drain is at most a few
// packets and every flow's rate within ±10% of the fair share (DCQCN: its own
// targets, the queue below its marking threshold K_max). Like a virtual-time run
// it moves no payload bytes (Config.Verify, docs/rnic.md); TestIncastQueueBoundRealTime
// checks real payload in real time.
//
// These are real-time figures: on a machine whose cores are taken by other work the
// loops fall behind and utilization drops. The race detector slows the loops too far
// below real time, so `make unit` runs this test a second time without it (go test
// -run RealTime).
func TestIncastRealTime(t *testing.T) {
	// Its 10 Gb/s incasts have 1 KiB packets, for which one loop thread lacks the CPU
	// under HPCC on the project's 2-core machines (0.71–0.93 of the link,
	// docs/rnic.md); the lab's tests (cmd/rocelab, TestLabRealTimeIncastTargets) hold
	// 10 Gb/s with jumbo frames to the targets in make test. This one is run by hand.
	if os.Getenv("ROCELAB_REALTIME_TARGETS") == "" {
		t.Skip("10 Gb/s with 1 KiB packets is beyond one loop's CPU on 2 cores: set ROCELAB_REALTIME_TARGETS=1 to run it on a quiet machine")
	}
	needRealTime(t)
	for _, rate := range []uint64{1e9, 10e9} {
		for _, mode := range []rnic.Mode{rnic.ModeHPCCProbe, rnic.ModeHPCC, rnic.ModeRxHPCC, rnic.ModeDCQCN} {
			for _, n := range []int{2, 4, 8} {
				t.Run(fmt.Sprintf("%dGbps/%s/%d", rate/1e9, mode, n), func(t *testing.T) { incastRealTime(t, rate, mode, n) })
			}
		}
	}
}

// virtualGaps are the incasts whose virtual-time run (the same config on the
// virtual clock) misses issue 21's utilization target, with that run's utilization:
// DCQCN at 10 Gb/s with two senders cuts both flows at once often enough that the
// queue empties between cuts (seed 1; seeds 2–4 give 90.5–91.5%; docs/rnic.md).
// (HPCC with a probe per RTT at 1 Gb/s 2:1 was one, at 88.6%, until requests ahead of
// the loop's time had to fit their window whole: 91.5% now.)
var virtualGaps = map[string]struct {
	util float64
	what string
}{
	"TestIncastRealTime/10Gbps/dcqcn/2": {0.891, "89.2% utilization"},
}

func incastRealTime(t *testing.T, rate uint64, mode rnic.Mode, n int) {
	cfg := incastConfig(rate, mode, n)
	res, err := RunRealTime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keptUp(t, res.Metrics)
	gap, ok := virtualGaps[t.Name()]
	if ok {
		// The virtual-time run misses the target too: real time is held to the twin.
		t.Logf("issue 21's target is not met in virtual time either (%s): checking utilization within 10%% of it", gap.what)
		gap.util *= 0.9
	}
	checkIncastTargets(t, cfg, res, gap.util)
}

// TestIncastRealTimeTargetsVirtual runs the incasts of TestIncastRealTime on the virtual
// clock, with the same lookahead and sampling, and holds them to the same targets:
// what the congestion control reaches when no loop is ever late, the reference the
// real-time runs are compared with. Where virtual time misses a target
// (virtualGaps), it must reach the figure recorded there. Deterministic; it runs in
// make test's pass without the race detector (-run RealTime), which would take it
// from seconds to minutes.
func TestIncastRealTimeTargetsVirtual(t *testing.T) {
	if raceEnabled {
		t.Skip("24 incasts of 40 ms: run without the race detector (make unit's -run RealTime pass)")
	}
	for _, rate := range []uint64{1e9, 10e9} {
		for _, mode := range []rnic.Mode{rnic.ModeHPCCProbe, rnic.ModeHPCC, rnic.ModeRxHPCC, rnic.ModeDCQCN} {
			for _, n := range []int{2, 4, 8} {
				name := fmt.Sprintf("%dGbps/%s/%d", rate/1e9, mode, n)
				t.Run(name, func(t *testing.T) {
					cfg := incastConfig(rate, mode, n)
					res, err := Run(cfg)
					if err != nil {
						t.Fatal(err)
					}
					checkIncastTargets(t, cfg, res, virtualGaps["TestIncastRealTime/"+name].util)
				})
			}
		}
	}
}

// checkIncastTargets holds an incast to issue 21's targets: every flow completes; the
// bottleneck is at least 90% utilized (minUtil instead, when given); the queue
// averaged after the first drain is at most four packets (DCQCN: below K_max); every
// flow's rate is within ±10% of the fair share (not DCQCN's: see below).
func checkIncastTargets(t *testing.T, cfg Config, res *Result, minUtil float64) {
	t.Helper()
	for _, e := range res.Errors {
		t.Error(e)
	}
	m := res.Metrics
	pkt := float64(int(cfg.MTU) + frameOverhead(cfg.Telemetry))
	rates, fair := flowRates(res)
	t.Logf("utilization %.3f, mean queue %.0f bytes = %.1f packets (window %v), peak %d, Jain %.4f",
		m.Utilization, m.MeanQueue, m.MeanQueue/pkt, m.Window, m.PeakQueue, m.Jain)
	if minUtil == 0 {
		minUtil = 0.9
	}
	if m.Utilization < minUtil {
		t.Errorf("bottleneck utilization %.3f, want at least %.3f", m.Utilization, minUtil)
	}
	if cfg.CC == rnic.ModeDCQCN {
		if m.MeanQueue > float64(cfg.ECN.KMax) {
			t.Errorf("mean queue %.0f bytes above DCQCN's K_max %d", m.MeanQueue, cfg.ECN.KMax)
		}
		// DCQCN's own targets are utilization and a queue held below K_max; its
		// per-flow rates over a 40 ms incast depend on which flows RED marks (in
		// virtual time, seeds 1–4: the worst flow 3–65% off its fair share at 1 Gb/s
		// 4:1), so they are reported, not held to ±10%.
		t.Logf("per-flow rates %.3v Gb/s, fair share %.3f Gb/s", gbps(rates), 8*fair)
		return
	}
	if limit := 4 * pkt; m.MeanQueue > limit {
		t.Errorf("mean queue %.0f bytes, want at most 4 packets (%.0f bytes)", m.MeanQueue, limit)
	}
	for i, r := range rates {
		if math.Abs(r/fair-1) > 0.1 {
			t.Errorf("flow %d: %.3f Gb/s, fair share %.3f Gb/s: off by more than 10%%", i, 8*r, 8*fair)
		}
	}
}

// TestIncastTwinRealTime runs the same 2:1 and 4:1 incasts at 1 Gb/s (HPCC, per-ACK
// INT) in real time and in virtual time: utilization, the queue averaged after the
// first drain and every flow's rate agree within 10% (the queue, a few hundred bytes,
// within 10% or one packet, whichever is larger).
func TestIncastTwinRealTime(t *testing.T) {
	needRealTime(t)
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cfg := incastConfig(1e9, rnic.ModeHPCC, n)
			real, err := RunRealTime(cfg)
			if err != nil {
				t.Fatal(err)
			}
			keptUp(t, real.Metrics)
			vcfg := cfg
			vcfg.Sample = Defaults().Sample
			virt, err := Run(vcfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range append(real.Errors, virt.Errors...) {
				t.Error(e)
			}
			rm, vm := real.Metrics, virt.Metrics
			t.Logf("real: utilization %.3f, mean queue %.0f B, Jain %.4f; virtual: %.3f, %.0f B, %.4f",
				rm.Utilization, rm.MeanQueue, rm.Jain, vm.Utilization, vm.MeanQueue, vm.Jain)
			if math.Abs(rm.Utilization/vm.Utilization-1) > 0.1 {
				t.Errorf("utilization %.3f real, %.3f virtual: more than 10%% apart", rm.Utilization, vm.Utilization)
			}
			pkt := float64(int(cfg.MTU) + frameOverhead(cfg.Telemetry))
			if d := math.Abs(rm.MeanQueue - vm.MeanQueue); d > max(0.1*vm.MeanQueue, pkt) {
				t.Errorf("mean queue %.0f B real, %.0f B virtual: further apart than 10%% or a packet", rm.MeanQueue, vm.MeanQueue)
			}
			rr, _ := flowRates(real)
			vr, _ := flowRates(virt)
			for i := range rr {
				if math.Abs(rr[i]/vr[i]-1) > 0.1 {
					t.Errorf("flow %d: %.3f Gb/s real, %.3f Gb/s virtual: more than 10%% apart", i, 8*rr[i], 8*vr[i])
				}
			}
		})
	}
}
