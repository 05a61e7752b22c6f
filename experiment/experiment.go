// Package experiment runs rocelab's congestion-control experiments in virtual time:
// soft-RNICs (package rnic) around bridge-switches (package fabric), flows of RDMA
// WRITEs between them, and the measurements the HPCC paper plots — the bottleneck
// queue, per-flow rates and windows, flow completion times and their slowdown.
//
// For the same Config (seed included) every output is identical, bit for bit: the
// virtual clock orders every event deterministically and nothing reads the wall clock.
package experiment

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Config describes an experiment.
type Config struct {
	// Scenario is "incast" (Senders → one receiver), "fairness" (Senders long flows
	// to one receiver, joining one by one every Stagger and leaving in reverse order)
	// or "mix" (Poisson arrivals of flows with sizes from a CDF, between random hosts
	// of a leaf-spine or fat-tree: see mix.go).
	Scenario string
	Senders  int
	FlowSize int // bytes per flow
	// Stagger separates the flows' starts (fairness).
	Stagger   time.Duration
	LinkRate  uint64        // bit/s of every link
	LinkDelay time.Duration // one-way propagation delay of every link
	MTU       roce.MTU      // path MTU
	CC        rnic.Mode
	Telemetry telemetry.Format
	EveryN    int
	// HPCC parameters; zero values take the draft's defaults (eta 0.95, max stage 5,
	// W_ai by the rule of thumb for Senders flows, base RTT from the topology).
	Eta      float64
	MaxStage int
	WAI      float64
	BaseRTT  time.Duration
	// ECN is the switch's RED marking for DCQCN.
	ECN fabric.ECN
	// Buffer is the switch's shared buffer in bytes.
	Buffer int
	Seed   uint64
	// Sample is the interval of the time series.
	Sample time.Duration
	// Limit stops the run if flows have not finished by then.
	Limit time.Duration
	// TxLookahead is passed to every device (real-time runs).
	TxLookahead time.Duration
	// Verify moves real payload bytes and checks every byte of every flow at its
	// receiver. Without it the devices are payload-free (rnic.Config.PayloadFree):
	// frames carry headers, lengths and PSNs but no data, no ICRC is computed, and a
	// flow's memory regions are lengths. Every other output is the same either way.
	Verify bool
	// Progress, if set, is called every ProgressEvery simulated events while flows
	// are unfinished: a terminal's progress line (the caller owns the wall clock).
	Progress func(Progress)

	Mix // the mix scenario's parameters
}

// Defaults returns the incast experiment of the HPCC paper's Figure 9 style at 100 Gb/s:
// 16 senders of 500 KB each through one switch with 1 µs links.
func Defaults() Config {
	return Config{Scenario: "incast", Senders: 16, FlowSize: 500_000, Stagger: 100 * time.Microsecond,
		LinkRate: 100e9, LinkDelay: time.Microsecond, MTU: roce.MTU1024,
		CC: rnic.ModeHPCC, Telemetry: telemetry.FormatINTMD, MaxStage: hpcc.DefaultMaxStage,
		ECN:    fabric.ECN{Enabled: true, KMin: 100_000, KMax: 400_000, PMax: 0.2},
		Buffer: 32 << 20, Seed: 1, Sample: 100 * time.Nanosecond, Limit: 100 * time.Millisecond}
}

func (c *Config) linkMTU() int { return int(c.MTU) + 400 } // room for headers and telemetry

func (c *Config) baseRTT() time.Duration {
	if c.BaseRTT > 0 {
		return c.BaseRTT
	}
	return baseRTT(c)
}

// ccConfig is the devices' congestion control.
func (c *Config) ccConfig() rnic.CC { return c.ccConfigFor(c.baseRTT(), c.Senders) }

// ccConfigFor is the devices' congestion control with HPCC's base RTT T and the flows
// N its rule-of-thumb W_ai is sized for.
func (c *Config) ccConfigFor(t time.Duration, flows int) rnic.CC {
	cc := rnic.CC{Mode: c.CC, EveryN: c.EveryN}
	if c.CC == rnic.ModeDCQCN || c.CC == rnic.ModeNone {
		return cc
	}
	cc.Telemetry = c.Telemetry
	p := hpcc.DraftParams(float64(c.LinkRate), t, flows)
	if c.Eta > 0 {
		p.Eta = c.Eta
	}
	p.MaxStage = c.MaxStage
	p.WAI = c.WAI
	if c.Telemetry == telemetry.FormatHPCC {
		p.Wrap = hpcc.CompactWrap(1)
	}
	cc.HPCC = p
	return cc
}

func (c *Config) validate() error {
	if err := c.validateCC(); err != nil {
		return err
	}
	if c.Scenario == "mix" {
		return c.validateMix()
	}
	switch {
	case c.Senders < 1 || c.Senders > MaxSenders:
		return fmt.Errorf("experiment: --senders %d: want 1 to %d (one switch port each)", c.Senders, MaxSenders)
	case c.FlowSize < 1:
		return fmt.Errorf("experiment: --flow-size %d: need at least one byte", c.FlowSize)
	case c.LinkRate == 0:
		return fmt.Errorf("experiment: --link-rate must be positive")
	case !c.MTU.Valid():
		return fmt.Errorf("experiment: --mtu %d: want 256, 512, 1024, 2048 or 4096", c.MTU)
	case c.Sample <= 0:
		return fmt.Errorf("experiment: sample interval must be positive")
	}
	switch c.Scenario {
	case "incast", "fairness":
	default:
		return fmt.Errorf("experiment: unknown scenario %q: want incast, fairness or mix", c.Scenario)
	}
	return nil
}

// Progress is how far a run has got.
type Progress struct {
	Now         clock.Time // simulated time
	Done, Flows int        // flows finished, of all
	Events      uint64     // simulated events so far
}

// ProgressEvery is how many events pass between Config.Progress calls.
const ProgressEvery = 1 << 20

// simulate steps v until no flow is left (left counts them down) or the time limit,
// reporting progress on the way.
func (c *Config) simulate(v *clock.Virtual, left *int, flows int) {
	limit := clock.Time(c.Limit)
	for n := 0; *left > 0 && v.Now() < limit && v.Step(); n++ {
		if c.Progress != nil && n%ProgressEvery == ProgressEvery-1 {
			c.Progress(Progress{Now: v.Now(), Done: flows - *left, Flows: flows, Events: v.Events()})
		}
	}
}

// MaxSenders bounds the incast and fairness scenarios: one switch with a port per
// sender. (A thousand senders of 500 KB already hold half a gigabyte of flow buffers
// when payloads are verified.)
const MaxSenders = 1024

// validateCC checks the congestion-control parameters every scenario shares: numbers
// that are not numbers (NaN, ±Inf) or out of range are refused, never taken as "unset".
func (c *Config) validateCC() error {
	switch {
	case c.Eta != 0 && !(c.Eta > 0 && c.Eta <= 1):
		return fmt.Errorf("experiment: --eta %v: want a target utilization in (0, 1]", c.Eta)
	case c.EveryN < 0: // 0 is rnic's default (4)
		return fmt.Errorf("experiment: --every-n %d: want at least 1", c.EveryN)
	case c.MaxStage < 0:
		return fmt.Errorf("experiment: --max-stage %d: want 0 or more", c.MaxStage)
	case !(c.WAI >= 0 && c.WAI <= math.MaxFloat32): // NaN fails too
		return fmt.Errorf("experiment: --wai %v: want a non-negative number of bytes", c.WAI)
	case c.ECN.Enabled && !(c.ECN.PMax >= 0 && c.ECN.PMax <= 1):
		return fmt.Errorf("experiment: ECN marking probability %v: want [0, 1]", c.ECN.PMax)
	case c.ECN.Enabled && (c.ECN.KMin < 0 || c.ECN.KMin > c.ECN.KMax):
		return fmt.Errorf("experiment: ECN thresholds %d..%d bytes: want 0 ≤ Kmin ≤ Kmax", c.ECN.KMin, c.ECN.KMax)
	}
	return nil
}

// FlowRecord is one flow's outcome.
type FlowRecord struct {
	ID       int     `json:"id"`
	Src      int     `json:"src"`
	Dst      int     `json:"dst"`
	Size     int     `json:"size_bytes"`
	StartNs  int64   `json:"start_ns"`
	FCTNs    int64   `json:"fct_ns"`
	IdealNs  int64   `json:"ideal_fct_ns"`
	Slowdown float64 `json:"slowdown"`
}

// QueueSample is the bottleneck port's queue at one instant.
type QueueSample struct {
	T     clock.Time
	Bytes int
}

// RateSample is one flow's pacing rate and window at one instant.
type RateSample struct {
	T            clock.Time
	Flow         int
	Rate, Window float64 // bit/s and bytes; 0 for a finished flow
}

// Result is what an experiment measured.
type Result struct {
	Config  Config
	BaseRTT time.Duration
	Flows   []FlowRecord
	Queue   []QueueSample
	Rates   []RateSample
	Metrics Metrics
	// Errors lists data verification failures and unfinished flows; empty on success.
	Errors []string
	Events uint64
	// Packets is the frames the hosts sent: data, ACKs, and any probes or CNPs.
	Packets uint64
	// MixInfo describes the mix scenario's network and arrivals; nil for the others.
	MixInfo *MixInfo
}

// Metrics are the summary figures (the --json keys).
type Metrics struct {
	PeakQueue     int     `json:"bottleneck_peak_queue_bytes"`
	QueueP99      int     `json:"bottleneck_queue_p99_bytes"`
	MeanQueueLast float64 `json:"bottleneck_mean_queue_bytes_last_half"`
	Utilization   float64 `json:"bottleneck_utilization"`
	Jain          float64 `json:"jain_fairness"`
}

// Run runs the experiment in virtual time.
func Run(cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Scenario == "mix" {
		return runMix(cfg)
	}
	v := clock.NewVirtual(cfg.Seed)
	n := cfg.Senders + 1
	st, err := buildStar(v, n, &cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, BaseRTT: cfg.baseRTT()}
	flows, err := makeFlows(&cfg, st)
	if err != nil {
		return nil, err
	}
	left := len(flows)
	var last clock.Time
	for _, f := range flows {
		err := f.connect(st.hosts[f.Src], st.hosts[f.Dst], cfg.MTU, func(f *flow) {
			left--
			last = max(last, f.Done)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, f := range flows {
		f := f
		t := v.NewLoop("start").NewTimer(func() {
			st.hosts[f.Src].Do(func() {
				if err := f.post(); err != nil {
					f.Failed = err.Error()
				}
			})
		})
		t.Reset(f.Start)
	}
	bottleneck := st.sw.Ports()[cfg.Senders]
	var txStart, txEnd uint64
	var first clock.Time = -1
	stopQ := st.sw.Sample(cfg.Sample, func(s fabric.Sample) {
		res.Queue = append(res.Queue, QueueSample{T: s.Time, Bytes: s.QLen})
		if first < 0 && s.TxBytes > 0 {
			first, txStart = s.Time, s.TxBytes
		}
		if left > 0 {
			txEnd = s.TxBytes
		}
	}, bottleneck.Index())
	mon := v.NewLoop("monitor")
	rateEvery := max(cfg.Sample, res.BaseRTT/4)
	var rt *clock.Timer
	rt = mon.NewTimer(func() {
		for _, f := range flows {
			r := RateSample{T: mon.Now(), Flow: f.ID}
			if f.Done == 0 && mon.Now() >= f.Start {
				r.Rate, r.Window = f.sq.Rate()
				if math.IsInf(r.Rate, 1) {
					r.Rate = float64(cfg.LinkRate)
				}
				if math.IsInf(r.Window, 1) {
					r.Window = 0
				}
			}
			res.Rates = append(res.Rates, r)
		}
		rt.Reset(mon.Now().Add(rateEvery))
	})
	rt.Reset(0)
	cfg.simulate(v, &left, len(flows))
	stopQ()
	rt.Stop()

	res.Events = v.Events()
	for _, h := range st.hosts {
		res.Packets += h.Stats().TxFrames
	}
	for _, f := range flows {
		switch {
		case f.Failed != "":
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s", f.ID, f.Failed))
		case f.Done == 0:
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: not finished after %v", f.ID, cfg.Limit))
		default:
			if err := f.verify(); err != nil {
				res.Errors = append(res.Errors, err.Error())
			}
		}
		fct := f.Done.Sub(f.Start)
		ideal := idealFCT(&cfg, f.Size)
		res.Flows = append(res.Flows, FlowRecord{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: f.Size, StartNs: int64(f.Start),
			FCTNs: fct.Nanoseconds(), IdealNs: ideal.Nanoseconds(), Slowdown: float64(fct) / float64(ideal)})
	}
	res.Metrics = measure(res, last)
	if first >= 0 && last > first {
		res.Metrics.Utilization = float64(txEnd-txStart) * 8e9 / float64(cfg.LinkRate) / float64(last-first)
	}
	return res, nil
}

// makeFlows lays out the scenario's flows.
func makeFlows(cfg *Config, st *star) ([]*flow, error) {
	var flows []*flow
	for i := range cfg.Senders {
		f := &flow{ID: i, Src: i, Dst: cfg.Senders, Size: cfg.FlowSize}
		if cfg.Scenario == "fairness" {
			f.Start = clock.Time(time.Duration(i) * cfg.Stagger)
		}
		flows = append(flows, f)
	}
	return flows, nil
}

// idealFCT is a flow's completion time alone on an idle network: one base RTT plus its
// bytes (with per-packet headers) at line rate.
func idealFCT(cfg *Config, size int) time.Duration {
	pkts := (size + int(cfg.MTU) - 1) / int(cfg.MTU)
	wire := size + pkts*(14+20+8+12+16+4)
	return baseRTT(cfg) + time.Duration(float64(wire)*8e9/float64(cfg.LinkRate))
}

// measure computes the queue metrics from res.Queue up to the last completion at
// last, and Jain's index over the flows; the caller computes the utilization.
func measure(res *Result, last clock.Time) Metrics {
	var m Metrics
	var after []int
	var sumLast float64
	var nLast int
	half := last / 2
	for _, s := range res.Queue {
		m.PeakQueue = max(m.PeakQueue, s.Bytes)
		if s.T <= last && s.T >= clock.Time(res.BaseRTT) {
			after = append(after, s.Bytes)
		}
		if s.T >= half && s.T <= last {
			sumLast += float64(s.Bytes)
			nLast++
		}
	}
	if len(after) > 0 {
		sort.Ints(after)
		m.QueueP99 = after[(len(after)*99)/100]
	}
	if nLast > 0 {
		m.MeanQueueLast = sumLast / float64(nLast)
	}
	// Jain's index over the flows' mean throughputs.
	var s, s2 float64
	for _, f := range res.Flows {
		if f.FCTNs <= 0 {
			continue
		}
		x := float64(f.Size) / float64(f.FCTNs)
		s += x
		s2 += x * x
	}
	if s2 > 0 {
		m.Jain = s * s / (float64(len(res.Flows)) * s2)
	}
	return m
}
