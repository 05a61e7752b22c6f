package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sort"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// The mix scenario is the HPCC paper's evaluation workload (§5, Figure 11) as its ns-3
// simulator generates it (traffic_gen.py): every host starts flows as a Poisson
// process whose mean inter-arrival time is mean flow size × 8 / (load × host link
// rate), to a destination drawn uniformly among the other hosts, with a size drawn
// from a flow-size CDF. Each flow is one RDMA WRITE on its own RC QP pair, through a
// leaf-spine or fat-tree of bridge-switches built by lab, in virtual time.
//
// A flow's completion time (FCT) runs from its arrival (the post of its WRITE) to the
// sender's completion. Its ideal FCT is what it would take alone on the network, as
// the simulator's standalone_fct defines it: the base RTT of its path plus its wire
// bytes at the path's slowest line rate. The path's base RTT is, summed over its
// links, twice the propagation delay plus the serialization of one full data frame and
// of one ACK. The wire bytes are the payload plus, per packet, Ethernet, IP, UDP, BTH
// and ICRC (58 bytes with IPv4, 78 with IPv6) and the first packet's RETH (16). A flow
// alone finishes slightly before that ideal (the first frame's serialization counts in
// both terms), so the slowdown FCT/ideal is clamped at 1, as the simulator's
// fct_analysis.py clamps it.

// Mix holds the mix scenario's parameters.
type Mix struct {
	// Topology is "leaf-spine" (Leaves leaves × Spines spines, HostsPerLeaf hosts on
	// each leaf), "fat-tree" (k-ary, K³/4 hosts) or "fat-tree-3tier" (ThreeTier, by
	// default the HPCC paper's 320 hosts).
	Topology                     string
	Leaves, Spines, HostsPerLeaf int
	K                            int
	ThreeTier                    topo.ThreeTier
	// FabricRate is the line rate of switch-to-switch links; 0 means LinkRate, the rate
	// of host links, except on fat-tree-3tier, where 0 means the rate that gives the
	// ToRs Oversubscription (a ToR's host capacity over its uplink capacity).
	FabricRate       uint64
	Oversubscription float64
	// CDF is the flow-size distribution: websearch, fbhadoop or a file in the
	// simulator's format (see ParseCDF).
	CDF string
	// Load is the offered load as a fraction of each host link's capacity, in (0, 1].
	Load float64
	// Duration is the arrival window: flows arrive in (0, Duration]. 0 means no window
	// (then Flows must be set).
	Duration time.Duration
	// Flows, if positive, ends the arrivals after that many flows.
	Flows int
}

// MixDefaults returns the mix scenario at 30% load of WebSearch flows on a leaf-spine
// of 4 leaves and 2 spines with 4 hosts on each leaf, at 100 Gb/s, over a 2 ms window
// (about 70 flows, 110 MB).
func MixDefaults() Config {
	c := Defaults()
	c.Scenario = "mix"
	c.Mix = Mix{Topology: "leaf-spine", Leaves: 4, Spines: 2, HostsPerLeaf: 4, K: 4, ThreeTier: topo.PaperThreeTier,
		Oversubscription: 1, CDF: "websearch", Load: 0.3, Duration: 2 * time.Millisecond}
	c.Sample = time.Microsecond
	c.Limit = time.Second
	return c
}

// MixInfo is what a mix run reports about its network and its arrivals.
type MixInfo struct {
	Topology string // "leaf-spine 4×2×4"
	Hosts    int
	CDF      string
	CDFMean  float64 // bytes
	// Offered is the bytes of all flows; Window the time of the last arrival.
	Offered int64
	Window  time.Duration
	// RTTMin and RTTMax are the shortest and longest paths' base RTTs (the ideal FCT's).
	RTTMin, RTTMax time.Duration
	// Ports is the number of switch egress ports watched; Bottleneck the one with the
	// largest peak queue (ties: the most bytes sent) and BottleneckRate its line rate.
	Ports          int
	Bottleneck     string
	BottleneckRate uint64
	// PortStats has a record per switch egress port, in switch and port order, and
	// PortQueues every port's queue where it changed from the port's previous sample.
	PortStats  []PortRecord
	PortQueues []PortQueueSample
}

// PortRecord is one switch egress port's figures over a mix run.
type PortRecord struct {
	Name        string // "leaf1:p4 (to h1)"
	Rate        uint64
	PeakQueue   int
	MeanQueue   float64 // over the samples until the last completion
	TxBytes     uint64  // sent from the start until the last completion
	Utilization float64 // TxBytes over the capacity from the first arrival to the last completion
}

// PortQueueSample is a switch egress port's queue at a sample where it changed.
type PortQueueSample struct {
	T     clock.Time
	Port  int // index into MixInfo.PortStats
	Bytes int
}

func (c *Config) validateMix() error {
	switch {
	case c.LinkRate == 0:
		return fmt.Errorf("experiment: --link-rate must be positive")
	case !c.MTU.Valid():
		return fmt.Errorf("experiment: --mtu %d: want 256, 512, 1024, 2048 or 4096", c.MTU)
	case c.Sample <= 0:
		return fmt.Errorf("experiment: sample interval must be positive")
	case !(c.Load > 0 && c.Load <= 1):
		return fmt.Errorf("experiment: --load %v: want a fraction of the host link rate in (0, 1]", c.Load)
	case c.Duration < 0 || c.Flows < 0:
		return fmt.Errorf("experiment: --duration %v and --flows %d must not be negative", c.Duration, c.Flows)
	case c.Duration == 0 && c.Flows == 0:
		return fmt.Errorf("experiment: mix needs an arrival window (--duration) or a number of flows (--flows)")
	}
	switch c.Topology {
	case "leaf-spine":
		if c.Leaves < 1 || c.Spines < 1 || c.HostsPerLeaf < 1 || c.Leaves*c.HostsPerLeaf < 2 {
			return fmt.Errorf("experiment: leaf-spine %d×%d with %d hosts per leaf: want at least one leaf, one spine and two hosts",
				c.Leaves, c.Spines, c.HostsPerLeaf)
		}
	case "fat-tree":
		if c.K < 2 || c.K%2 != 0 {
			return fmt.Errorf("experiment: fat-tree --k %d: want an even k of at least 2", c.K)
		}
	case "fat-tree-3tier":
		if err := c.ThreeTier.Validate(); err != nil {
			return fmt.Errorf("experiment: %w", err)
		}
		if c.FabricRate == 0 && !(c.Oversubscription > 0) {
			return fmt.Errorf("experiment: --oversubscription %v: want a positive ratio of host to uplink capacity", c.Oversubscription)
		}
	default:
		return fmt.Errorf("experiment: --topology %q: want leaf-spine, fat-tree or fat-tree-3tier", c.Topology)
	}
	_, err := LoadCDF(c.CDF)
	return err
}

// topologyTelemetry is the topology file's name of a telemetry format.
func topologyTelemetry(f telemetry.Format) (string, error) {
	switch f {
	case telemetry.FormatINTMD:
		return "int", nil
	case telemetry.FormatIOAM:
		return "ioam", nil
	case telemetry.FormatIFA:
		return "ifa", nil
	case telemetry.FormatHPCC:
		return "hpcc", nil
	}
	return "", fmt.Errorf("experiment: --telemetry %q: want int, ioam, ifa or hpcc", f)
}

// mixTopology generates the scenario's topology: links at LinkRate (hosts) and
// FabricRate (switches), LinkDelay each, room for the path MTU plus headers and
// telemetry; RED marking on every switch under DCQCN.
func (c *Config) mixTopology() (*topo.Topology, string, error) {
	p := topo.Params{Rate: c.LinkRate, FabricRate: c.FabricRate, Delay: c.LinkDelay, MTU: c.linkMTU(),
		Buffer: c.Buffer, Telemetry: "none", CongestionControl: "none"}
	switch c.CC {
	case rnic.ModeNone:
	case rnic.ModeDCQCN:
		p.CongestionControl = "dcqcn"
	default:
		name, err := topologyTelemetry(c.Telemetry)
		if err != nil {
			return nil, "", err
		}
		p.Telemetry, p.CongestionControl = name, "hpcc"
	}
	var (
		t    *topo.Topology
		err  error
		desc string
	)
	switch c.Topology {
	case "fat-tree":
		t, err = topo.FatTree(c.K, p)
		desc = fmt.Sprintf("fat-tree k=%d", c.K)
	case "fat-tree-3tier":
		tt := c.ThreeTier
		t, err = topo.FatTree3(tt, p)
		desc = fmt.Sprintf("fat-tree-3tier %d pods, %d ToRs × %d hosts, %d aggregation, %d core, %s/%s links (oversubscription %.3g)",
			tt.Pods, tt.ToRs, tt.HostsPerToR, tt.Aggs, tt.Cores, topo.FormatRate(c.LinkRate), topo.FormatRate(p.FabricRate),
			tt.Oversubscription(c.LinkRate, p.FabricRate))
	default:
		t, err = topo.LeafSpine(c.Leaves, c.Spines, c.HostsPerLeaf, p)
		desc = fmt.Sprintf("leaf-spine %d×%d×%d", c.Leaves, c.Spines, c.HostsPerLeaf)
	}
	if err != nil {
		return nil, "", fmt.Errorf("experiment: %w", err)
	}
	if c.CC == rnic.ModeDCQCN && c.ECN.Enabled {
		for i := range t.Switches {
			t.Switches[i].ECN = &topo.ECN{KMin: c.ECN.KMin, KMax: c.ECN.KMax, PMax: c.ECN.PMax}
		}
	}
	return t, desc, nil
}

// threeTierFabricRate is the fabric links' rate that gives the three-tier fat tree's
// ToRs the configured oversubscription.
func (c *Config) threeTierFabricRate() uint64 {
	tt := c.ThreeTier
	return uint64(math.Round(float64(uint64(tt.HostsPerToR)*c.LinkRate) / (float64(tt.Aggs/tt.Pods) * c.Oversubscription)))
}

// Per-packet header bytes of a WRITE's packets (Ethernet, IP, UDP, BTH, ICRC), its
// first packet's RETH, and an ACK (the same plus AETH, no payload).
func packetHeaders(v6 bool) (data, reth, ack int) {
	ip := 20
	if v6 {
		ip = 40
	}
	data = 14 + ip + 8 + 12 + 4
	return data, 16, data + 4
}

// pathInfo is what the ideal FCT needs of the path between two hosts.
type pathInfo struct {
	rtt  time.Duration // base RTT: 2·delay + one data frame + one ACK, per link
	rate uint64        // the slowest link's rate
}

// hostPaths computes pathInfo for every ordered pair of hosts over a shortest path
// (hosts are never transit; every shortest path of a leaf-spine or fat-tree has the
// same links' rates and delays).
func hostPaths(t *topo.Topology, mtu int, v6 bool) [][]pathInfo {
	index := map[string]int{}
	for i, h := range t.Hosts {
		index[h.Name] = i
	}
	for i, s := range t.Switches {
		index[s.Name] = len(t.Hosts) + i
	}
	type edge struct{ to, link int }
	adj := make([][]edge, len(index))
	for li, l := range t.Links {
		a, b := index[l.Endpoints[0]], index[l.Endpoints[1]]
		adj[a] = append(adj[a], edge{b, li})
		adj[b] = append(adj[b], edge{a, li})
	}
	hdr, _, ackLen := packetHeaders(v6)
	ser := func(n int, rate uint64) time.Duration { return time.Duration(uint64(n) * 8e9 / rate) }
	out := make([][]pathInfo, len(t.Hosts))
	for src := range t.Hosts {
		out[src] = make([]pathInfo, len(t.Hosts))
		via := make([]int, len(index)) // the link a node was reached over
		prev := make([]int, len(index))
		for i := range via {
			via[i] = -1
		}
		via[src] = -2
		queue := []int{src}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			if u != src && u < len(t.Hosts) {
				continue
			}
			for _, e := range adj[u] {
				if via[e.to] == -1 {
					via[e.to], prev[e.to] = e.link, u
					queue = append(queue, e.to)
				}
			}
		}
		for dst := range t.Hosts {
			if dst == src || via[dst] < 0 {
				continue
			}
			var p pathInfo
			for n := dst; n != src; n = prev[n] {
				l := t.Links[via[n]]
				p.rtt += 2*l.Delay + ser(mtu+hdr, l.Rate) + ser(ackLen, l.Rate)
				if p.rate == 0 || l.Rate < p.rate {
					p.rate = l.Rate
				}
			}
			out[src][dst] = p
		}
	}
	return out
}

// idealMixFCT is a flow's completion time alone on its path (see the scenario's
// comment).
func idealMixFCT(size, mtu int, v6 bool, p pathInfo) time.Duration {
	hdr, reth, _ := packetHeaders(v6)
	pkts := max(1, (size+mtu-1)/mtu)
	wire := uint64(size + pkts*hdr + reth)
	return p.rtt + time.Duration(wire*8e9/p.rate)
}

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

// mixPort is one switch egress port the mix watches. It keeps its queue series as the
// samples where the queue changed: samples fall every interval from the first, so the
// series is those changes held until the last sample, in a fraction of the memory
// (a 1,024-host fat tree has 5,120 ports).
type mixPort struct {
	name    string
	rate    uint64
	changes []QueueSample // the first sample and every one that differs from its previous
	last    clock.Time    // the last sample's time
	peak    int
	txBytes uint64 // at the last sample while flows were unfinished
}

// record takes the sample of the queue at t.
func (p *mixPort) record(t clock.Time, qlen int) {
	if n := len(p.changes); n == 0 || p.changes[n-1].Bytes != qlen {
		p.changes = append(p.changes, QueueSample{T: t, Bytes: qlen})
	}
	p.last = t
	p.peak = max(p.peak, qlen)
}

// each calls fn with every sample, in time order, for samples every interval.
func (p *mixPort) each(interval time.Duration, fn func(QueueSample)) {
	for i, c := range p.changes {
		until := p.last
		if i+1 < len(p.changes) {
			until = p.changes[i+1].T - 1
		}
		for t := c.T; t <= until; t = t.Add(interval) {
			fn(QueueSample{T: t, Bytes: c.Bytes})
		}
	}
}

// mixPorts names every switch port as lab.Build numbers them: in link order,
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
				name := fmt.Sprintf("%s:p%d (to %s)", end, len(ports[s]), l.Endpoints[1-i])
				ports[s] = append(ports[s], &mixPort{name: name, rate: l.Rate})
			}
		}
	}
	return ports
}

// runMix runs the mix scenario.
func runMix(cfg Config) (*Result, error) {
	cdf, err := LoadCDF(cfg.CDF)
	if err != nil {
		return nil, err
	}
	if cfg.Topology == "fat-tree-3tier" && cfg.FabricRate == 0 {
		cfg.FabricRate = cfg.threeTierFabricRate()
	}
	t, desc, err := cfg.mixTopology()
	if err != nil {
		return nil, err
	}
	// Flows run over IPv4, or over IPv6 where the telemetry needs it (IOAM).
	v6 := cfg.CC != rnic.ModeDCQCN && cfg.CC != rnic.ModeNone && cfg.Telemetry == telemetry.FormatIOAM
	mtu := int(cfg.MTU)
	paths := hostPaths(t, mtu, v6)
	info := &MixInfo{Topology: desc, Hosts: len(t.Hosts), CDF: cdf.Name, CDFMean: cdf.Mean()}
	for s := range paths {
		for d, p := range paths[s] {
			if s == d {
				continue
			}
			if info.RTTMin == 0 || p.rtt < info.RTTMin {
				info.RTTMin = p.rtt
			}
			info.RTTMax = max(info.RTTMax, p.rtt)
		}
	}
	// HPCC's T is the longest path's base RTT, as the simulator sets it (maxRtt), and
	// W_ai is sized for every other host sending to one receiver.
	T := info.RTTMax
	if cfg.BaseRTT > 0 {
		T = cfg.BaseRTT
	}
	res := &Result{Config: cfg, BaseRTT: T, MixInfo: info}
	flows := mixArrivals(&cfg, cdf, len(t.Hosts))
	if len(flows) == 0 {
		return nil, fmt.Errorf("experiment: no flow arrives within --duration %v at --load %v (mean gap per host %.1f µs): lengthen the window or set --flows",
			cfg.Duration, cfg.Load, cdf.Mean()*8/(cfg.Load*float64(cfg.LinkRate))*1e6)
	}
	v := clock.NewVirtual(cfg.Seed)
	nw, err := lab.Build(t, v, lab.Options{CC: cfg.ccConfigFor(T, max(1, len(t.Hosts)-1)), StaticNeighbours: true,
		PayloadFree: !cfg.Verify})
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	gids := make([]int, len(nw.Hosts))
	for i, h := range nw.Hosts {
		want := h.Config.IPv4
		if v6 {
			want = h.Config.IPv6
		}
		if gids[i], err = gidIndex(h.Device, want); err != nil {
			return nil, err
		}
	}
	for _, f := range flows {
		f.SrcGID, f.DstGID = gids[f.Src], gids[f.Dst]
		info.Offered += int64(f.Size)
		info.Window = f.Start.Duration()
	}

	left := len(flows)
	var last clock.Time
	var active []*flow // started and unfinished, in arrival order
	finish := func(f *flow) {
		left--
		last = max(last, f.Done)
		for i, a := range active {
			if a == f {
				active = append(active[:i], active[i+1:]...)
				break
			}
		}
	}
	onDone := func(f *flow) {
		finish(f)
		if f.Failed == "" {
			if err := f.verify(); err != nil {
				f.Failed = err.Error()
			}
		}
		f.release()
	}
	// start runs on the sender's loop and sets up the receiver's side too: Run drives
	// the virtual clock, whose loops all run on one goroutine.
	start := func(f *flow) {
		src, dst := nw.Hosts[f.Src].Device, nw.Hosts[f.Dst].Device
		if err := f.connect(src, dst, cfg.MTU, onDone); err != nil {
			f.Failed = err.Error()
			finish(f)
			return
		}
		active = append(active, f)
		if err := f.post(); err != nil {
			f.Failed = err.Error()
			finish(f)
		}
	}
	arrivals := v.NewLoop("arrivals")
	next := 0
	var at *clock.Timer
	at = arrivals.NewTimer(func() {
		for next < len(flows) && flows[next].Start <= arrivals.Now() {
			f := flows[next]
			next++
			nw.Hosts[f.Src].Device.Do(func() { start(f) })
		}
		if next < len(flows) {
			at.Reset(flows[next].Start)
		}
	})
	at.Reset(flows[0].Start)

	ports := mixPorts(t)
	var stops []func()
	var tEnd clock.Time
	for i, s := range nw.Switches {
		ps := ports[i]
		if len(ps) != len(s.Switch.Ports()) {
			return nil, fmt.Errorf("experiment: switch %s has %d ports, the topology %d", s.Name, len(s.Switch.Ports()), len(ps))
		}
		stops = append(stops, s.Switch.Sample(cfg.Sample, func(smp fabric.Sample) {
			p := ps[smp.Port]
			p.record(smp.Time, smp.QLen)
			if left > 0 {
				p.txBytes, tEnd = smp.TxBytes, smp.Time
			}
		}))
	}
	mon := v.NewLoop("monitor")
	rateEvery := max(cfg.Sample, T/4)
	var rt *clock.Timer
	rt = mon.NewTimer(func() {
		for _, f := range active {
			r := RateSample{T: mon.Now(), Flow: f.ID}
			r.Rate, r.Window = f.sq.Rate()
			if math.IsInf(r.Rate, 1) {
				r.Rate = float64(cfg.LinkRate)
			}
			if math.IsInf(r.Window, 1) {
				r.Window = 0
			}
			res.Rates = append(res.Rates, r)
		}
		rt.Reset(mon.Now().Add(rateEvery))
	})
	rt.Reset(flows[0].Start)

	cfg.simulate(v, &left, len(flows))
	for _, stop := range stops {
		stop()
	}
	rt.Stop()
	at.Stop()
	res.Events = v.Events()
	for _, h := range nw.Hosts {
		res.Packets += h.Device.Stats().TxFrames
	}

	// The bottleneck: the largest peak queue; among equals, the busiest port.
	var b *mixPort
	first := flows[0].Start
	for _, ps := range ports {
		for _, p := range ps {
			if b == nil || p.peak > b.peak || p.peak == b.peak && p.txBytes > b.txBytes {
				b = p
			}
			rec := PortRecord{Name: p.name, Rate: p.rate, PeakQueue: p.peak, TxBytes: p.txBytes}
			if tEnd > first {
				rec.Utilization = float64(p.txBytes) * 8e9 / float64(p.rate) / float64(tEnd-first)
			}
			for _, q := range p.changes {
				info.PortQueues = append(info.PortQueues, PortQueueSample{T: q.T, Port: info.Ports, Bytes: q.Bytes})
			}
			var n, sum int64
			p.each(cfg.Sample, func(q QueueSample) {
				if q.T <= tEnd {
					sum += int64(q.Bytes)
					n++
				}
			})
			if n > 0 {
				rec.MeanQueue = float64(sum) / float64(n)
			}
			info.PortStats = append(info.PortStats, rec)
			info.Ports++
		}
	}
	sort.SliceStable(info.PortQueues, func(i, j int) bool { return info.PortQueues[i].T < info.PortQueues[j].T })
	info.Bottleneck, info.BottleneckRate = b.name, b.rate
	b.each(cfg.Sample, func(q QueueSample) { res.Queue = append(res.Queue, q) })

	for _, f := range flows {
		rec := FlowRecord{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: f.Size, StartNs: int64(f.Start)}
		ideal := idealMixFCT(f.Size, mtu, v6, paths[f.Src][f.Dst])
		rec.IdealNs = ideal.Nanoseconds()
		switch {
		case f.Failed != "":
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s", f.ID, f.Failed))
		case f.Done == 0:
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d (%d bytes, h%d→h%d, arrived at %v): not finished after %v",
				f.ID, f.Size, f.Src+1, f.Dst+1, f.Start, cfg.Limit))
		}
		if f.Done > 0 && f.Failed == "" {
			rec.FCTNs = f.Done.Sub(f.Start).Nanoseconds()
			rec.Slowdown = max(1, float64(rec.FCTNs)/float64(ideal))
		}
		res.Flows = append(res.Flows, rec)
	}
	for _, h := range nw.Hosts {
		if s := h.Device.Stats(); s.RxMalformed+s.RxBadICRC > 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("%s: %d malformed frames, %d with a bad ICRC", h.Name, s.RxMalformed, s.RxBadICRC))
		}
	}
	res.Metrics = measure(res, last)
	if tEnd > first {
		res.Metrics.Utilization = float64(b.txBytes) * 8e9 / float64(b.rate) / float64(tEnd-first)
	}
	return res, nil
}

// sizeBucket is one group of flows of similar size: the HPCC paper's Figure 11 sorts
// the flows by size and cuts them into groups of equal count (5% of the flows each),
// labelled by the largest size in the group.
type sizeBucket struct {
	From, To      float64 // percentiles of the flows by size, e.g. 0 and 5
	MinSize, Size int     // smallest and largest size in the bucket
	N             int
	P50, P95, P99 float64 // slowdown quantiles
}

// sizeBuckets groups the finished flows, sorted by size (stably: ties keep arrival
// order), between consecutive percentile edges of their count; a range holding no
// flow is left out.
func sizeBuckets(flows []FlowRecord, edges []float64) []sizeBucket {
	var done []FlowRecord
	for _, f := range flows {
		if f.FCTNs > 0 {
			done = append(done, f)
		}
	}
	sort.SliceStable(done, func(i, j int) bool { return done[i].Size < done[j].Size })
	n := len(done)
	var out []sizeBucket
	for k := 1; k < len(edges); k++ {
		lo, hi := edges[k-1], edges[k]
		a, b := int(lo*float64(n)/100), int(hi*float64(n)/100)
		if b <= a {
			continue
		}
		sd := make([]float64, 0, b-a)
		for _, f := range done[a:b] {
			sd = append(sd, f.Slowdown)
		}
		sort.Float64s(sd)
		out = append(out, sizeBucket{From: lo, To: hi, MinSize: done[a].Size, Size: done[b-1].Size, N: b - a,
			P50: quantile(sd, 0.5), P95: quantile(sd, 0.95), P99: quantile(sd, 0.99)})
	}
	return out
}

// percentSteps returns the edges 0, step, 2·step, …, 100.
func percentSteps(step float64) []float64 {
	var e []float64
	for p := 0.0; p < 100; p += step {
		e = append(e, p)
	}
	return append(e, 100)
}
