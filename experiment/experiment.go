// Package experiment runs rocelab's congestion-control experiments in virtual time:
// soft-RNICs (package rnic) around bridge-switches (package fabric), flows of RDMA
// WRITEs between them, and the measurements the HPCC paper plots — the bottleneck
// queue, per-flow rates and windows, flow completion times and their slowdown.
//
// For the same Config (seed included) every output is identical, bit for bit: the
// virtual clock orders every event deterministically and nothing reads the wall clock.
package experiment

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
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
	// ECN is the switches' RED marking for DCQCN (fabric.SimECN scales the simulator's with
	// the link rate).
	ECN fabric.ECN
	// Preset "ns3" (PresetNS3) parameterizes HPCC as the HPCC authors' ns-3 simulator
	// does (hpcc.SimParams, with T the longest path's base RTT as its third.cc derives
	// it) and computes the ideal FCT as its standalone_fct; "" is rocelab's own (the
	// draft's parameters, T and ideal FCT from the frames' real sizes).
	Preset string
	// Payload, if positive, is the payload of every data packet but a message's last,
	// below the path MTU (the simulator's PACKET_PAYLOAD_SIZE 1000); 0 means the MTU.
	Payload int
	// HeaderOverhead, if positive, is the header bytes per packet the ideal FCT counts
	// (the simulator's 48: Ethernet 14, IPv4 20, UDP 8, its 6-byte sequence header);
	// 0 counts the frames' own headers.
	HeaderOverhead int
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
	// FiguresOnly keeps of a virtual-time run only what its figures need (Metrics,
	// Flows, Errors): it takes no rate samples and no links table, and keeps the
	// queue series of the bottleneck only in the incast and fairness scenarios, all of
	// which only the data files and plots read. WriteData and WritePlots then fail.
	// Every figure is the same (TestFiguresOnlySameFigures). `experiment --json` sets
	// it when it writes no files, and so does a sweep that keeps none.
	FiguresOnly bool
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
		ECN:    fabric.SimECN(100e9),
		Buffer: 32 << 20, Seed: 1, Sample: 100 * time.Nanosecond, Limit: 100 * time.Millisecond}
}

// PresetNS3 is the Preset of the HPCC simulator's settings.
const PresetNS3 = "ns3"

// Presets are the values of Config.Preset besides "".
var Presets = []string{PresetNS3}

// The HPCC simulator's PACKET_PAYLOAD_SIZE and the header bytes its standalone_fct
// counts per packet (Ethernet 14, IPv4 20, UDP 8 and its 6-byte sequence header:
// CustomHeader::GetStaticWholeHeaderSize without the INT header).
const (
	NS3Payload = 1000
	NS3Headers = 48
)

// NS3 returns c under the HPCC simulator's settings (Preset PresetNS3): HPCC over 8-byte
// hops (telemetry hpcc, the simulator's IntHop) with max stage 0 (MI_THRESH 0), its
// payload and header sizes, and its RED marking at c's link rate.
func NS3(c Config) Config {
	c.Preset = PresetNS3
	c.Telemetry = telemetry.FormatHPCC
	c.MaxStage = 0
	c.Payload, c.HeaderOverhead = NS3Payload, NS3Headers
	c.ECN = fabric.SimECN(c.LinkRate)
	return c
}

func (c *Config) linkMTU() int { return int(c.MTU) + 400 } // room for headers and telemetry

// segment is the payload of a full data packet.
func (c *Config) segment() int {
	if c.Payload > 0 {
		return min(c.Payload, int(c.MTU))
	}
	return int(c.MTU)
}

// simRTT is the HPCC simulator's base RTT of a path (third.cc, CalculateRoute): twice
// the links' propagation delays plus one payload's serialization on each link.
func simRTT(payload int, links []pathLink) time.Duration {
	var rtt time.Duration
	for _, l := range links {
		rtt += 2*l.delay + time.Duration(uint64(payload)*8e9/l.rate)
	}
	return rtt
}

// pathLink is what a base RTT needs of one link of a path.
type pathLink struct {
	delay time.Duration
	rate  uint64
}

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
	if c.Preset == PresetNS3 {
		cc.AckEvery = 1 // L2_ACK_INTERVAL 1: the simulator acks every packet, under DCQCN too
	}
	if c.CC == rnic.ModeDCQCN || c.CC == rnic.ModeNone {
		return cc
	}
	cc.Telemetry = c.Telemetry
	p := hpcc.DraftParams(float64(c.LinkRate), t, flows)
	if c.Preset == PresetNS3 {
		p = hpcc.SimParams(float64(c.LinkRate), t)
	}
	if c.Eta > 0 {
		p.Eta = c.Eta
	}
	p.MaxStage = c.MaxStage
	if c.WAI > 0 || c.Preset != PresetNS3 {
		p.WAI = c.WAI
	}
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
	if c.CC != rnic.ModeDCQCN && c.CC != rnic.ModeNone {
		if err := rnic.CheckLineRate(c.Telemetry, c.LinkRate); err != nil {
			return fmt.Errorf("experiment: --link-rate: %w", err)
		}
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

// validateCC checks the congestion-control, preset and packet parameters every
// scenario shares: numbers that are not numbers (NaN, ±Inf) or out of range are
// refused, never taken as "unset".
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
	case c.Preset != "" && c.Preset != PresetNS3:
		return fmt.Errorf("experiment: --preset %q: want %s", c.Preset, PresetNS3)
	case c.Payload < 0 || c.Payload > int(c.MTU):
		return fmt.Errorf("experiment: --payload %d: want 0 (the MTU) up to the MTU %d", c.Payload, c.MTU)
	case c.HeaderOverhead < 0:
		return fmt.Errorf("experiment: --header-overhead %d: must not be negative", c.HeaderOverhead)
	}
	return nil
}

// FlowRecord is one flow's outcome. FCTNs and Slowdown are those of a finished flow;
// an unfinished or failed one has Finished false and both 0.
type FlowRecord struct {
	ID       int     `json:"id"`
	Src      int     `json:"src"`
	Dst      int     `json:"dst"`
	Size     int     `json:"size_bytes"`
	StartNs  int64   `json:"start_ns"`
	Finished bool    `json:"finished"`
	FCTNs    int64   `json:"fct_ns"`
	IdealNs  int64   `json:"ideal_fct_ns"`
	Slowdown float64 `json:"slowdown"`
}

// QueueSample is the bottleneck port's queue and the bytes it has sent at one instant.
type QueueSample struct {
	T       clock.Time
	Bytes   int
	TxBytes uint64
	// Area is ∫ queue dt in byte·ns since the port started, where the sampler reads it
	// (a lab's samples: lab.PortCounters.QueueArea), and 0 where it does not.
	Area uint64
}

// RateSample is one flow's pacing rate, window, bytes in flight and HPCC++'s U at one
// instant, and the rate its payload delivered to its receiver grew at since the
// flow's previous sample.
type RateSample struct {
	T            clock.Time
	Flow         int
	Rate, Window float64 // paced bit/s and bytes; 0 for a finished flow
	Measured     float64 // bit/s of payload delivered since the previous sample
	InFlight     uint64  // payload sent and not yet acknowledged
	// U is HPCC++'s normalized inflight of the most loaded hop when HasU: the flow
	// runs an HPCC mode and is under way.
	U    float64
	HasU bool
}

// Result is what an experiment measured.
type Result struct {
	Config  Config
	BaseRTT time.Duration
	Flows   []FlowRecord
	// Queue is a lab or real-time run's bottleneck queue samples; a virtual-time run
	// keeps its own as the port's change points (queue). QueueSamples gives both.
	Queue []QueueSample
	// Rates is a lab or real-time run's rate samples; a virtual-time run keeps its
	// own out of memory (rateLog). EachRate gives both.
	Rates []RateSample
	// Delivered is a lab or real-time run's payload delivered to the receivers, all
	// flows together, at each rate sample; a virtual-time run keeps its own in
	// delivered. DeliveredSamples gives both.
	Delivered []DeliveredSample
	Metrics   Metrics
	// Errors lists data verification failures and unfinished flows; empty on success.
	Errors []string
	Events uint64
	// Packets is the frames the hosts sent: data, ACKs, and any probes or CNPs.
	Packets uint64
	// MixInfo describes the mix scenario's network and arrivals; nil for the others.
	MixInfo *MixInfo
	// Topology is the network the run built, as a lab would (topology.yaml).
	Topology *topo.Topology
	// links is every switch egress port's queue and bytes sent at each rate sample
	// (Links).
	links     linkTable
	rates     rateLog     // a virtual-time run's rate samples (EachRate)
	queue     *portSeries // a virtual-time run's bottleneck queue samples (QueueSamples)
	delivered changeLog   // a virtual-time run's delivered bytes (T, TxBytes)
	// spill holds a virtual-time run's series that grow with simulated time (the
	// ports' change points, the delivered bytes, the links table's instants).
	spill *scratch
}

// newVirtualResult returns the Result of a virtual-time run, its series spilling to
// a scratch file as they grow.
func newVirtualResult(r *Result) *Result {
	r.spill = new(scratch)
	r.links.spill, r.delivered.spill = r.spill, r.spill
	return r
}

// addDelivered records the payload delivered by t.
func (r *Result) addDelivered(t clock.Time, bytes uint64) {
	r.delivered.add(QueueSample{T: t, TxBytes: bytes})
}

// DeliveredSamples walks the payload delivered at each rate sample in time order:
// those of Delivered, which a lab or real-time run fills, then a virtual-time run's.
func (r *Result) DeliveredSamples() iter.Seq[DeliveredSample] {
	return func(yield func(DeliveredSample) bool) {
		for _, d := range r.Delivered {
			if !yield(d) {
				return
			}
		}
		for c := r.delivered.cursor(); c.ahead; c.step() {
			if !yield(DeliveredSample{T: c.next.T, Bytes: c.next.TxBytes}) {
				return
			}
		}
	}
}

// Close frees the scratch files of a virtual-time run's series now rather than when
// the Result is collected; the series cannot be read after it. A sweep closes each
// run's once its figures are taken.
func (r *Result) Close() error {
	var errs []error
	if r.rates.file != nil {
		errs = append(errs, r.rates.file.Close())
		r.rates.err = errClosed
	}
	if r.spill != nil {
		errs = append(errs, r.spill.close())
	}
	return errors.Join(errs...)
}

// errClosed is the error of reading a closed Result's series.
var errClosed = errors.New("the Result was closed")

// seriesErr is the error, if any, of reading or writing the run's scratch file.
func (r *Result) seriesErr() error {
	if r.spill == nil {
		return nil
	}
	return r.spill.Err()
}

// QueueSamples walks the bottleneck queue's samples in time order (queue.csv's
// rows): those of Queue, which a lab or real-time run fills, or a virtual-time run's,
// decoded from the port's change points as they are walked.
func (r *Result) QueueSamples() iter.Seq[QueueSample] {
	if r.queue != nil {
		return r.queue.all()
	}
	return slices.Values(r.Queue)
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
	t, err := cfg.starTopology()
	if err != nil {
		return nil, err
	}
	res := newVirtualResult(&Result{Config: cfg, BaseRTT: cfg.baseRTT(), Topology: t})
	flows := makeFlows(&cfg)
	left := len(flows)
	var last clock.Time
	for _, f := range flows {
		err := f.connect(st.hosts[f.Src], st.hosts[f.Dst], &cfg, func(f *flow) {
			left--
			last = max(last, f.Done)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, f := range flows {
		t := v.NewLoop("start").NewTimer(func() {
			st.hosts[f.Src].Do(func() {
				if err := f.post(); err != nil {
					f.Failed = err.Error()
				}
			})
		})
		t.Reset(f.Start)
	}
	ports := make([]portSeries, n)
	var sampled sampling
	for i, name := range starPorts(n) {
		ports[i] = newPortSeries(cfg.Sample, &sampled, res.spill)
		res.links.add(name, 0, &ports[i])
	}
	stopQ := st.sw.SampleChanges(cfg.Sample, sampled.tick, func(s fabric.Sample) {
		if int(s.Port) < len(ports) && (!cfg.FiguresOnly || int(s.Port) == cfg.Senders) {
			ports[s.Port].record(s)
		}
	})
	mon := v.NewLoop("monitor")
	rateEvery := max(cfg.Sample, res.BaseRTT/4)
	var rt *clock.Timer
	rt = mon.NewTimer(func() {
		now := mon.Now()
		var delivered uint64
		for _, f := range flows {
			if !cfg.FiguresOnly {
				r := RateSample{T: now, Flow: f.ID}
				if f.Done == 0 && now >= f.Start {
					r = f.rateSample(now, cfg.LinkRate)
				}
				res.rates.add(r)
			}
			delivered += f.deliveredBytes()
		}
		res.addDelivered(now, delivered)
		if !cfg.FiguresOnly {
			res.links.record(now)
		}
		rt.Reset(now.Add(rateEvery))
	})
	rt.Reset(0)
	cfg.simulate(v, &left, len(flows))
	stopQ()
	rt.Stop()

	res.Events = v.Events()
	for _, h := range st.hosts {
		res.Packets += h.Stats().TxFrames
	}
	res.queue = &ports[cfg.Senders] // the receiver's port, the bottleneck
	finish(res, flows, last, left)
	if err := res.seriesErr(); err != nil {
		return nil, err
	}
	return res, nil
}

// finish records the flows' outcomes and the metrics once the run is over: last is the
// last completion and unfinished the flows still running.
func finish(res *Result, flows []*flow, last clock.Time, unfinished int) {
	cfg := &res.Config
	for _, f := range flows {
		rec := FlowRecord{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: f.Size, StartNs: int64(f.Start),
			IdealNs: IdealFCT(cfg, f.Size).Nanoseconds()}
		switch {
		case f.Failed != "":
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s", f.ID, f.Failed))
		case f.Done == 0:
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: not finished after %v", f.ID, cfg.Limit))
		default:
			if err := f.verify(); err != nil {
				res.Errors = append(res.Errors, err.Error())
			}
			rec.Finished = true
			rec.FCTNs = f.Done.Sub(f.Start).Nanoseconds()
			rec.Slowdown = float64(rec.FCTNs) / float64(rec.IdealNs)
		}
		res.Flows = append(res.Flows, rec)
	}
	res.Measure(last, unfinished)
}

// Measure computes the metrics from the queue samples (with the bottleneck's bytes)
// and the flow records: last is the last completion, unfinished the flows still
// running. A lab run (rocelab experiment --lab) fills samples and records itself and
// calls it, so that both report the same figures.
func (r *Result) Measure(last clock.Time, unfinished int) {
	r.Metrics = measure(r, starWindows(r, &r.Config, last, unfinished), r.Config.LinkRate)
}

func starWindows(res *Result, cfg *Config, last clock.Time, unfinished int) []span {
	end, until := runEnd(res, last, unfinished)
	var spans []span
	first := clock.Never
	for _, f := range res.Flows {
		if f.Finished {
			first = min(first, clock.Time(f.StartNs+f.FCTNs))
		}
	}
	queue := res.QueueSamples()
	if t := firstDrain(queue, cfg.segment()+100, first); t >= 0 {
		spans = append(spans, span{t, end, "after the first drain of the bottleneck queue to " + until})
	}
	for s := range queue {
		if s.TxBytes > 0 {
			spans = append(spans, span{s.T, end, "from the bottleneck's first byte to " + until})
			break
		}
	}
	return spans
}

// makeFlows lays out the scenario's flows.
func makeFlows(cfg *Config) []*flow {
	var flows []*flow
	for i := range cfg.Senders {
		f := &flow{ID: i, Src: i, Dst: cfg.Senders, Size: cfg.FlowSize}
		if cfg.Scenario == "fairness" {
			f.Start = clock.Time(time.Duration(i) * cfg.Stagger)
		}
		flows = append(flows, f)
	}
	return flows
}

// IdealFCT is a flow's completion time alone on an idle network: one base RTT plus its
// bytes (with per-packet headers) at line rate.
func IdealFCT(cfg *Config, size int) time.Duration {
	seg := cfg.segment()
	pkts := (size + seg - 1) / seg
	hdr := 14 + 20 + 8 + 12 + 16 + 4
	if cfg.HeaderOverhead > 0 {
		hdr = cfg.HeaderOverhead
	}
	wire := size + pkts*hdr
	return baseRTT(cfg) + time.Duration(float64(wire)*8e9/float64(cfg.LinkRate))
}
