package experiment

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/internal/clock"
)

// RunRealTime runs an incast or fairness experiment as a lab runs: the same devices,
// switch and flows as Run, driven by the real-time clock, one loop per node, each on
// its own thread. It is Run's twin for comparing real and virtual time: the same
// Result, files and metrics. cfg.TxLookahead should be set (a lab uses 20 µs), and
// cfg.Sample is a real sampling interval (tens of µs: every sample wakes the switch's
// loop). cfg.Limit bounds the wall-clock time. Results vary with the machine's load.
//
// As in Run, the devices move payload bytes only with cfg.Verify. Without it a run
// spends its one loop thread's CPU on packets rather than on copying payload out of
// flow-sized memory regions, which at 10 Gb/s cost that thread a fifth of its time
// and the HPCC cells 2–13 points of the link (docs/rnic.md); with it every byte is
// checked at its receiver. Every frame of the run is got and released on that one
// thread, so its frames come from a serial pool (link.NewSerialPool).
func RunRealTime(cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := clock.NewReal(clock.RealOptions{Seed: cfg.Seed, GrowProcs: true})
	// One loop thread for the nodes and the monitor's timers (flow starts, rate
	// samples, the limit): a monitor loop of its own, woken every 20 µs, spun a second
	// thread, and two spinning threads on two cores lost the nodes' loop for a
	// scheduler time slice (about 4 ms) whenever anything else ran.
	nodes := r.NewLoop("nodes")
	st, err := buildStar(oneLoop{nodes}, cfg.Senders+1, &cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, BaseRTT: cfg.baseRTT()}
	flows := makeFlows(&cfg)
	var left atomic.Int32
	left.Store(int32(len(flows)))
	done := make(chan struct{})
	for _, f := range flows {
		err := f.connect(st.hosts[f.Src], st.hosts[f.Dst], &cfg, func(*flow) {
			if left.Add(-1) == 0 {
				close(done)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	mon := nodes
	for _, f := range flows {
		f := f
		mon.NewTimer(func() {
			src := st.hosts[f.Src]
			src.Do(func() {
				f.Start = src.Now()
				if err := f.post(); err != nil {
					f.Failed = err.Error()
				}
			})
		}).Reset(f.Start)
	}
	// The samplers run on the switch's and the senders' loops; what they record is
	// read once the clock has stopped.
	// Only the bottleneck's samples are kept, so only the bottleneck is sampled: the
	// loop that samples is the one that moves every frame.
	bottleneck := st.sw.Ports()[cfg.Senders]
	stopQ := st.sw.Sample(cfg.Sample, func(s fabric.Sample) {
		res.Queue = append(res.Queue, QueueSample{T: s.Time, Bytes: s.QLen, TxBytes: s.TxBytes})
	}, bottleneck.Index())
	// A flow's rate sample is its pacing rate and window, read on its sender's loop;
	// the payload delivered, all flows together, is read on the receiver's. (A flow's
	// own delivered rate, RateSample.Measured, would need both: a real-time run
	// leaves it out.)
	recv := st.hosts[cfg.Senders]
	rates := make([][]RateSample, len(flows))
	rateEvery := max(cfg.Sample, res.BaseRTT/4)
	var rt *clock.Timer
	rt = mon.NewTimer(func() {
		for i, f := range flows {
			src := st.hosts[f.Src]
			src.Do(func() {
				s := RateSample{T: src.Now(), Flow: f.ID}
				if f.Done == 0 && s.T >= f.Start {
					s.Rate, s.Window = f.sq.Rate()
					if math.IsInf(s.Rate, 1) {
						s.Rate = float64(cfg.LinkRate)
					}
					if math.IsInf(s.Window, 1) {
						s.Window = 0
					}
				}
				rates[i] = append(rates[i], s)
			})
		}
		recv.Do(func() {
			var d uint64
			for _, f := range flows {
				d += f.receivedBytes()
			}
			res.Delivered = append(res.Delivered, DeliveredSample{T: recv.Now(), Bytes: d})
		})
		rt.Reset(mon.Now().Add(rateEvery))
	})
	rt.Reset(0)
	timeout := make(chan struct{})
	mon.NewTimer(func() { close(timeout) }).Reset(clock.Time(cfg.Limit))
	if err := r.Start(); err != nil {
		return nil, err
	}
	select {
	case <-done:
	case <-timeout:
	}
	r.Close() // stops every loop: their state may be read from here on
	stopQ()
	var last clock.Time
	for _, f := range flows {
		last = max(last, f.Done)
	}
	unfinished := int(left.Load())
	for k := range rates[0] {
		for i := range rates {
			if k < len(rates[i]) {
				res.Rates = append(res.Rates, rates[i][k])
			}
		}
	}
	finish(res, flows, last, unfinished)
	var late clock.Lateness
	for _, x := range r.Lateness() {
		late.Add(x)
	}
	res.Metrics.LoopLateness = NewLoopLateness(late)
	return res, nil
}

// RealTimeDefaults adapts cfg to a real-time run: the lab's 20 µs transmit lookahead,
// a 20 µs sampling interval and a 60 s wall-clock limit.
func RealTimeDefaults(cfg Config) Config {
	cfg.TxLookahead, cfg.Sample, cfg.Limit = 20*time.Microsecond, 20*time.Microsecond, 60*time.Second
	return cfg
}

// oneLoop is a clock whose nodes all share one loop thread, as a lab's nodes do on a
// machine of few cores (lab.DefaultThreads): with a thread per node, the spinning loops
// of a switch and its hosts outnumber two cores and starve each other.
type oneLoop struct{ loop clock.Loop }

func (o oneLoop) NewLoop(string) clock.Loop { return o.loop }
