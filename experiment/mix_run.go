package experiment

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// mixArrivals draws the flows: per host a Poisson process of rate load × host link
// rate / (8 × mean size), each arrival with a uniformly random other host as its
// destination and a size from the CDF. Each host draws from its own stream, seeded by
// the seed and the host's index, in the order inter-arrival, destination, size; the
// arrivals are merged in time order (ties: lower source first) until Duration passes or
// Flows have arrived. IDs follow arrival order.
func mixArrivals(cfg *Config, cdf *CDF, hosts int) []*flow {
	meanGap := cdf.Mean() * 8 / (cfg.Load * float64(cfg.LinkRate)) * 1e9 // ns
	type source struct {
		r    *rand.Rand
		next float64
		done bool
	}
	src := make([]source, hosts)
	for h := range src {
		src[h].r = rand.New(rand.NewPCG(cfg.Seed, 0x6d6978<<32|uint64(h)))
		src[h].next = src[h].r.ExpFloat64() * meanGap
	}
	var flows []*flow
	for cfg.Flows == 0 || len(flows) < cfg.Flows {
		h := -1
		for i := range src {
			if !src[i].done && (h < 0 || src[i].next < src[h].next) {
				h = i
			}
		}
		if h < 0 {
			break
		}
		s := &src[h]
		if cfg.Duration > 0 && s.next > float64(cfg.Duration) {
			s.done = true
			continue
		}
		dst := s.r.IntN(hosts - 1)
		if dst >= h {
			dst++
		}
		size := cdf.Sample(s.r)
		flows = append(flows, &flow{ID: len(flows), Src: h, Dst: dst, Size: size, Start: clock.Time(s.next)})
		s.next += s.r.ExpFloat64() * meanGap
	}
	return flows
}

// gidIndex returns the index of addr in the device's GID table.
func gidIndex(d *rnic.Device, addr netip.Addr) (int, error) {
	for i := 0; ; i++ {
		g, err := d.QueryGID(i)
		if err != nil {
			return 0, fmt.Errorf("experiment: %s has no GID for %v", d.Name(), addr)
		}
		if g.Addr() == addr.Unmap() {
			return i, nil
		}
	}
}

// mixPort is one switch egress port the mix watches.
type mixPort struct {
	id     string // s1:p0
	name   string // s1:p0 (to h1)
	rate   uint64
	series portSeries
	peak   int
}

// sent is the bytes the port sent during the run.
func (p *mixPort) sent() uint64 { return p.series.latest.TxBytes }

// mixPorts names every switch port as network.Build numbers them: in link order,
// per switch.
func mixPorts(t *topo.Topology) [][]*mixPort {
	sw := map[string]int{}
	for i, s := range t.Switches {
		sw[s.Name] = i
	}
	ports := make([][]*mixPort, len(t.Switches))
	for _, l := range t.Links {
		for i, end := range l.Endpoints {
			if s, ok := sw[end]; ok {
				id := fmt.Sprintf("%s:p%d", end, len(ports[s]))
				ports[s] = append(ports[s], &mixPort{id: id, name: id + " (to " + l.Endpoints[1-i] + ")", rate: l.Rate})
			}
		}
	}
	return ports
}

// mixRun is one run of the mix scenario: its network, its flows and what it watches.
type mixRun struct {
	cfg   *Config
	topo  *topo.Topology
	v6    bool // flows run over IPv6 (where the telemetry needs it: IOAM)
	paths *paths
	info  *MixInfo
	res   *Result
	flows []*flow

	clk clock.Clock
	seq *clock.Virtual  // the sequential driver, or
	par *clock.Parallel // the parallel one (Mix.Threads)
	nw  *network.Network
	// completed holds, on the parallel driver, the flows that completed during a
	// window, for the coordinator to account for at the barrier (settle).
	mu        sync.Mutex
	completed []*flow

	left     int        // flows not finished
	last     clock.Time // the last completion
	active   []*flow    // started and unfinished, in arrival order
	finished uint64     // the payload of the flows finished
	ports    [][]*mixPort
}

// runMix runs the mix scenario.
func runMix(cfg Config) (*Result, error) {
	if cfg.Topology == "fat-tree-3tier" && cfg.FabricRate == 0 && cfg.TopologyFile == "" {
		cfg.FabricRate = cfg.threeTierFabricRate()
	}
	t, desc, hostOf, err := cfg.mixTopology()
	if err != nil {
		return nil, err
	}
	m := newMixRun(&cfg, t, &MixInfo{Topology: desc, Hosts: len(t.Hosts)})
	if err := m.arrivals(hostOf); err != nil {
		return nil, err
	}
	if err := m.build(); err != nil {
		return nil, err
	}
	arrivals := m.scheduleArrivals()
	stops, err := m.watchPorts()
	if err != nil {
		return nil, err
	}
	rates := m.sampleRates()

	if m.par != nil {
		m.simulateParallel()
		m.par.Close()
		m.info.Windows = m.par.Rounds()
		m.res.Events = m.par.Events()
	} else {
		cfg.simulate(m.seq, &m.left, len(m.flows))
		m.res.Events = m.seq.Events()
	}
	for _, stop := range stops {
		stop()
	}
	rates.Stop()
	arrivals.Stop()
	for _, h := range m.nw.Hosts {
		m.res.Packets += h.Device.Stats().TxFrames
	}
	res := m.results()
	if err := res.seriesErr(); err != nil {
		return nil, err
	}
	return res, nil
}

// newMixRun computes every host pair's path and the range of base RTTs. HPCC's T is
// the longest path's base RTT, as the simulator sets it (maxRtt), unless --base-rtt
// gives it.
func newMixRun(cfg *Config, t *topo.Topology, info *MixInfo) *mixRun {
	m := &mixRun{cfg: cfg, topo: t, info: info,
		v6: cfg.CC != rnic.ModeDCQCN && cfg.CC != rnic.ModeNone && cfg.Telemetry == telemetry.FormatIOAM}
	m.paths = hostPaths(t, cfg.segment(), m.v6)
	for s, row := range m.paths.index {
		for d, i := range row {
			if s == d {
				continue
			}
			rtt := m.paths.distinct[i].baseRTT(cfg)
			if info.RTTMin == 0 || rtt < info.RTTMin {
				info.RTTMin = rtt
			}
			info.RTTMax = max(info.RTTMax, rtt)
		}
	}
	T := info.RTTMax
	if cfg.BaseRTT > 0 {
		T = cfg.BaseRTT
	}
	m.res = newVirtualResult(&Result{Config: *cfg, BaseRTT: T, MixInfo: info, Topology: t})
	return m
}

// arrivals draws the flows, or reads them from the flow file.
func (m *mixRun) arrivals(hostOf func(int) (int, bool)) error {
	cfg := m.cfg
	if cfg.FlowFile != "" {
		flows, err := loadSimFlows(cfg.FlowFile, hostOf)
		if err != nil {
			return err
		}
		var sum float64
		for _, f := range flows {
			sum += float64(f.Size)
		}
		m.flows = flows
		m.info.Workload = fmt.Sprintf("the flows of %s (mean %s)", filepath.Base(cfg.FlowFile), bytesString(sum/float64(len(flows))))
		return nil
	}
	cdf, err := LoadCDF(cfg.CDF)
	if err != nil {
		return err
	}
	m.info.Workload = fmt.Sprintf("%s flow sizes (mean %s) at load %.2f", cdf.Name, bytesString(cdf.Mean()), cfg.Load)
	m.flows = mixArrivals(cfg, cdf, len(m.topo.Hosts))
	if len(m.flows) == 0 {
		return fmt.Errorf("experiment: no flow arrives within --duration %v at --load %v (mean gap per host %.1f µs): lengthen the window or set --flows",
			cfg.Duration, cfg.Load, cdf.Mean()*8/(cfg.Load*float64(cfg.LinkRate))*1e6)
	}
	return nil
}

// build builds the network in virtual time, with HPCC's W_ai sized for every other
// host sending to one receiver, and gives each flow the GIDs of its ends.
func (m *mixRun) build() error {
	if m.cfg.Threads > 0 {
		p := partitionTopology(m.topo)
		par, err := clock.NewParallel(clock.ParallelOptions{Seed: m.cfg.Seed, Partitions: p.n, PartitionOf: p.partition,
			Lookahead: p.lookahead, Threads: m.cfg.Threads})
		if err != nil {
			return fmt.Errorf("experiment: --threads: %w", err)
		}
		m.par, m.clk = par, par
		m.info.Partitions = p.n
	} else {
		m.seq = clock.NewVirtual(m.cfg.Seed)
		m.clk = m.seq
	}
	nw, err := network.Build(m.topo, m.clk, network.Options{CC: m.cfg.ccConfigFor(m.res.BaseRTT, max(1, len(m.topo.Hosts)-1)), StaticNeighbours: true,
		PayloadFree: !m.cfg.Verify})
	if err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	m.nw = nw
	gids := make([]int, len(nw.Hosts))
	for i, h := range nw.Hosts {
		want := h.Config.IPv4
		if m.v6 {
			want = h.Config.IPv6
		}
		if gids[i], err = gidIndex(h.Device, want); err != nil {
			return err
		}
	}
	for _, f := range m.flows {
		f.SrcGID, f.DstGID = gids[f.Src], gids[f.Dst]
		m.info.Offered += int64(f.Size)
		m.info.Window = f.Start.Duration()
	}
	m.left = len(m.flows)
	return nil
}

// finish accounts for a flow that completed or failed.
func (m *mixRun) finish(f *flow) {
	m.left--
	m.last = max(m.last, f.Done)
	for i, a := range m.active {
		if a == f {
			m.active = append(m.active[:i], m.active[i+1:]...)
			break
		}
	}
}

// done is a flow's completion: its data is checked and its resources released.
func (m *mixRun) done(f *flow) {
	m.finish(f)
	if f.Failed == "" {
		if err := f.verify(); err != nil {
			f.Failed = err.Error()
		}
	}
	if f.Failed == "" {
		m.finished += uint64(f.Size)
	}
	f.release()
}

// start runs on the sender's loop and sets up the receiver's side too: Run drives the
// virtual clock, whose loops all run on one goroutine.
func (m *mixRun) start(f *flow) {
	if !m.connect(f, m.done) {
		return
	}
	if err := f.post(); err != nil {
		f.Failed = err.Error()
		m.finish(f)
	}
}

// startParallel is start on the parallel driver: the coordinator, between windows,
// connects both ends (nothing else runs then), and the sender posts at the flow's
// start on its own loop. Its completion waits for the barrier (complete, settle).
func (m *mixRun) startParallel(f *flow) {
	if !m.connect(f, m.complete) {
		return
	}
	m.nw.Hosts[f.Src].Device.Do(func() {
		if err := f.post(); err != nil {
			f.Failed = err.Error()
			m.complete(f)
		}
	})
}

// connect sets up f's QPs on both devices, with onDone as its completion, and makes
// it active; if it cannot, f has failed and is finished.
func (m *mixRun) connect(f *flow, onDone func(*flow)) bool {
	if err := f.connect(m.nw.Hosts[f.Src].Device, m.nw.Hosts[f.Dst].Device, m.cfg, onDone); err != nil {
		f.Failed = err.Error()
		m.finish(f)
		return false
	}
	m.active = append(m.active, f)
	return true
}

// complete is a flow's completion on the parallel driver, on its sender's loop: the
// coordinator accounts for it at the barrier.
func (m *mixRun) complete(f *flow) {
	m.mu.Lock()
	m.completed = append(m.completed, f)
	m.mu.Unlock()
}

// settle accounts, at a barrier, for the flows completed during the window, in the
// order of their completion times (then IDs), whichever thread ran them.
func (m *mixRun) settle() {
	m.mu.Lock()
	done := m.completed
	m.completed = nil
	m.mu.Unlock()
	slices.SortFunc(done, func(a, b *flow) int { return cmp.Or(cmp.Compare(a.Done, b.Done), cmp.Compare(a.ID, b.ID)) })
	for _, f := range done {
		m.done(f)
	}
}

// simulateParallel runs the parallel driver round by round until every flow has
// finished or the limit, settling completions at each barrier.
func (m *mixRun) simulateParallel() {
	c := m.cfg
	limit := clock.Time(c.Limit)
	flows := len(m.flows)
	var reported uint64
	for m.left > 0 && m.par.Now() < limit && m.par.Round() {
		m.settle()
		if ev := m.par.Events(); c.Progress != nil && ev-reported >= ProgressEvery {
			reported = ev
			c.Progress(Progress{Now: m.par.Now(), Done: flows - m.left, Flows: flows, Events: ev})
		}
	}
}

// scheduleArrivals starts each flow at its arrival time on its sender's loop.
func (m *mixRun) scheduleArrivals() *clock.Timer {
	arrivals := m.clk.NewLoop("arrivals")
	next := 0
	var at *clock.Timer
	at = arrivals.NewTimer(func() {
		for next < len(m.flows) && m.flows[next].Start <= arrivals.Now() {
			f := m.flows[next]
			next++
			if m.par != nil {
				m.startParallel(f)
				continue
			}
			m.nw.Hosts[f.Src].Device.Do(func() { m.start(f) })
		}
		if next < len(m.flows) {
			at.Reset(m.flows[next].Start)
		}
	})
	at.Reset(m.flows[0].Start)
	return at
}

// watchPorts samples every switch egress port's queue and bytes sent; it returns the
// functions that stop the sampling.
func (m *mixRun) watchPorts() ([]func(), error) {
	m.ports = mixPorts(m.topo)
	var stops []func()
	samplings := make([]sampling, len(m.nw.Switches))
	for i, s := range m.nw.Switches {
		ps := m.ports[i]
		if len(ps) != len(s.Switch.Ports()) {
			return nil, fmt.Errorf("experiment: switch %s has %d ports, the topology %d", s.Name, len(s.Switch.Ports()), len(ps))
		}
		for _, p := range ps {
			p.series = newPortSeries(m.cfg.Sample, &samplings[i], m.res.spill)
			m.res.links.add(p.id, i, &p.series)
		}
		stops = append(stops, s.Switch.SampleChanges(m.cfg.Sample, samplings[i].tick, func(smp fabric.Sample) {
			p := ps[smp.Port]
			p.series.record(smp)
			p.peak = max(p.peak, smp.QLen)
		}))
	}
	return stops, nil
}

// sampleRates records the active flows' rates and windows, and every flow's
// payload delivered, every quarter of T.
func (m *mixRun) sampleRates() *clock.Timer {
	mon := m.clk.NewLoop("monitor")
	every := max(m.cfg.Sample, m.res.BaseRTT/4)
	var rt *clock.Timer
	rt = mon.NewTimer(func() {
		now := mon.Now()
		delivered := m.finished
		for _, f := range m.active {
			if !m.cfg.FiguresOnly {
				m.res.rates.add(f.rateSample(now, m.cfg.LinkRate))
			}
			delivered += f.deliveredBytes()
		}
		m.res.addDelivered(now, delivered)
		if !m.cfg.FiguresOnly {
			m.res.links.record(now)
		}
		rt.Reset(now.Add(every))
	})
	rt.Reset(m.flows[0].Start)
	return rt
}

// results assembles the Result once the run is over.
func (m *mixRun) results() *Result {
	res := m.res
	b := m.bottleneck()
	res.queue = &b.series
	m.flowRecords()
	for _, h := range m.nw.Hosts {
		if s := h.Device.Stats(); s.RxMalformed+s.RxBadICRC > 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %d malformed frames, %d with a bad ICRC", h.Name, s.RxMalformed, s.RxBadICRC))
		}
	}
	res.Metrics = measure(res, m.windows(), b.rate)
	m.summarizePorts()
	return res
}

// windows are the mix's candidate windows: while flows arrive (the first to the last
// arrival), else from the first arrival, to the end (runEnd).
func (m *mixRun) windows() []span {
	end, until := runEnd(m.res, m.last, m.left)
	first, last := m.flows[0].Start, m.flows[len(m.flows)-1].Start
	return []span{
		{first, min(last, end), "while flows arrive, from the first to the last arrival"},
		{first, end, "from the first arrival to " + until},
	}
}

// bottleneck names the port with the largest peak queue (among equals, the one that
// sent the most) in MixInfo and returns it.
func (m *mixRun) bottleneck() *mixPort {
	var b *mixPort
	for _, ps := range m.ports {
		for _, p := range ps {
			if b == nil || p.peak > b.peak || p.peak == b.peak && p.sent() > b.sent() {
				b = p
			}
		}
	}
	m.info.Bottleneck, m.info.BottleneckRate = b.name, b.rate
	return b
}

// summarizePorts fills MixInfo's port records over the metrics' window, and every
// port's queue changes.
func (m *mixRun) summarizePorts() {
	info := m.info
	mw := m.res.Metrics.Window
	w := span{clock.Time(mw.StartNs), clock.Time(mw.EndNs), mw.What}
	for _, ps := range m.ports {
		for _, p := range ps {
			rec := PortRecord{Name: p.name, Rate: p.rate, PeakQueue: p.peak}
			if st := statsOf(p.series.samples(w.from, w.to), false); st.n >= 2 {
				rec.MeanQueue = st.meanQueue()
				rec.TxBytes = st.last.TxBytes - st.first.TxBytes
				rec.Utilization = st.wireRate() / float64(p.rate)
			}
			info.ports = append(info.ports, &p.series)
			info.PortStats = append(info.PortStats, rec)
			info.Ports++
		}
	}
}
