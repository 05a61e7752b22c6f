package experiment

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"sync"
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
	// FlowFile, if set, replays the flows of a flow file in the HPCC simulator's
	// format (ParseSimFlows) instead of drawing arrivals; CDF, Load, Duration and
	// Flows are then unused.
	FlowFile string
	// TopologyFile, if set, is the network instead of Topology's generator: rocelab's
	// YAML or the simulator's format (topo.ParseNS3). Its links' rates and delays
	// apply; the experiment sets the MTU, telemetry, congestion control and marking.
	TopologyFile string
	// Threads, if positive, runs the mix on the parallel driver (clock.Parallel) on
	// that many threads, the network partitioned by pod (partitionTopology); 0 runs
	// it on the sequential driver (clock.Virtual). MixDefaults takes the parallel
	// driver on one thread: it costs less CPU than the sequential driver (a window
	// runs a pod's events together, and each pod's heap is a fraction of the one
	// heap), and a second thread pays only when a core is free for it, since the
	// threads spin between windows. The parallel driver's output is the same on any
	// number of threads; it is not the sequential driver's output byte for byte,
	// since events due at one instant may run in another order.
	Threads int
}

// MixDefaults returns the mix scenario at 30% load of WebSearch flows on a leaf-spine
// of 4 leaves and 2 spines with 4 hosts on each leaf, at 100 Gb/s, over a 2 ms window
// (about 70 flows, 110 MB).
func MixDefaults() Config {
	c := Defaults()
	c.Scenario = "mix"
	c.Mix = Mix{Topology: "leaf-spine", Leaves: 4, Spines: 2, HostsPerLeaf: 4, K: 4, ThreeTier: topo.PaperThreeTier,
		Oversubscription: 1, CDF: "websearch", Load: 0.3, Duration: 2 * time.Millisecond, Threads: 1}
	c.Sample = time.Microsecond
	c.Limit = time.Second
	return c
}

// MixInfo is what a mix run reports about its network and its arrivals.
type MixInfo struct {
	Topology string // "leaf-spine 4×2×4"
	Hosts    int
	// Partitions is the parallel driver's number of partitions (Mix.Threads), or 0;
	// Windows the rounds it ran.
	Partitions int
	Windows    uint64
	// Workload says where the flows come from: "websearch flow sizes (mean 1.71 MB)
	// at load 0.30" or "the flows of flows.txt (mean 1.71 MB)".
	Workload string
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
	// PortStats has a record per switch egress port, in switch and port order
	// (EachPortQueue gives their queues).
	PortStats []PortRecord
	ports     []*portSeries // PortStats' ports' samples
}

// PortRecord is one switch egress port's figures over a mix run: the peak over the
// whole run, the others over the run's window (Metrics.Window).
type PortRecord struct {
	Name        string // "leaf1:p4 (to h1)"
	Rate        uint64
	PeakQueue   int
	MeanQueue   float64
	TxBytes     uint64  // sent in the window, headers and telemetry included
	Utilization float64 // TxBytes over the port's capacity in the window
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
	case c.Threads < 0:
		return fmt.Errorf("experiment: --threads %d: want 0 (the sequential driver) or more", c.Threads)
	case c.FlowFile != "":
	case !(c.Load > 0 && c.Load <= 1):
		return fmt.Errorf("experiment: --load %v: want a fraction of the host link rate in (0, 1]", c.Load)
	case c.Duration < 0 || c.Flows < 0:
		return fmt.Errorf("experiment: --duration %v and --flows %d must not be negative", c.Duration, c.Flows)
	case c.Duration == 0 && c.Flows == 0:
		return fmt.Errorf("experiment: mix needs an arrival window (--duration) or a number of flows (--flows)")
	}
	if c.TopologyFile != "" {
		return nil
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
	if c.FlowFile != "" {
		return nil
	}
	_, err := LoadCDF(c.CDF)
	return err
}

// threeTierFabricRate is the fabric links' rate that gives the three-tier fat tree's
// ToRs the configured oversubscription.
func (c *Config) threeTierFabricRate() uint64 {
	tt := c.ThreeTier
	return uint64(math.Round(float64(uint64(tt.HostsPerToR)*c.LinkRate) / (float64(tt.Aggs/tt.Pods) * c.Oversubscription)))
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

// mixTopology is the scenario's network: generated (links at LinkRate for hosts and
// FabricRate between switches, LinkDelay each) or read from TopologyFile; room on
// every link for the path MTU plus headers and telemetry; RED marking on every switch
// under DCQCN. It returns a description and the map from a flow file's node IDs to
// host indexes (for a generated topology the host's position, from 0).
func (c *Config) mixTopology() (*topo.Topology, string, func(int) (int, bool), error) {
	p, err := c.topoParams()
	if err != nil {
		return nil, "", nil, err
	}
	var (
		t      *topo.Topology
		desc   string
		hostOf func(int) (int, bool)
	)
	switch {
	case c.TopologyFile != "":
		if t, hostOf, err = loadTopologyFile(c.TopologyFile, p); err != nil {
			return nil, "", nil, err
		}
		desc = filepath.Base(c.TopologyFile)
		t.Telemetry, t.CongestionControl = p.Telemetry, p.CongestionControl
		for i := range t.Links {
			t.Links[i].MTU = p.MTU
		}
		for i := range t.Switches {
			t.Switches[i].Buffer = p.Buffer
		}
		// The hosts' line rate (HPCC's, the load's) is the file's fastest host link.
		c.LinkRate = hostLinkRate(t)
	case c.Topology == "fat-tree":
		t, err = topo.FatTree(c.K, p)
		desc = fmt.Sprintf("fat-tree k=%d", c.K)
	case c.Topology == "fat-tree-3tier":
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
		return nil, "", nil, fmt.Errorf("experiment: %w", err)
	}
	if hostOf == nil {
		hostOf = func(n int) (int, bool) { return n, n >= 0 && n < len(t.Hosts) }
	}
	c.markECN(t)
	return t, desc, hostOf, nil
}

// hostLinkRate is the fastest rate of a link with a host at one end.
func hostLinkRate(t *topo.Topology) uint64 {
	hosts := map[string]bool{}
	for _, h := range t.Hosts {
		hosts[h.Name] = true
	}
	var r uint64
	for _, l := range t.Links {
		if hosts[l.Endpoints[0]] || hosts[l.Endpoints[1]] {
			r = max(r, l.Rate)
		}
	}
	return r
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
	rtt    time.Duration // base RTT: 2·delay + one data frame + one ACK, per link
	simRTT time.Duration // the HPCC simulator's base RTT (simRTT)
	rate   uint64        // the slowest link's rate
}

// baseRTT is the path's base RTT under cfg's preset.
func (p pathInfo) baseRTT(cfg *Config) time.Duration {
	if cfg.Preset == PresetNS3 {
		return p.simRTT
	}
	return p.rtt
}

// hostPaths computes pathInfo for every ordered pair of hosts over a shortest path
// (hosts are never transit; every shortest path of a leaf-spine or fat-tree has the
// same links' rates and delays) for full packets of seg payload bytes.
func hostPaths(t *topo.Topology, seg int, v6 bool) [][]pathInfo {
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
			var links []pathLink
			for n := dst; n != src; n = prev[n] {
				l := t.Links[via[n]]
				p.rtt += 2*l.Delay + ser(seg+hdr, l.Rate) + ser(ackLen, l.Rate)
				links = append(links, pathLink{l.Delay, l.Rate})
				if p.rate == 0 || l.Rate < p.rate {
					p.rate = l.Rate
				}
			}
			p.simRTT = simRTT(seg, links)
			out[src][dst] = p
		}
	}
	return out
}

// idealMixFCT is a flow's completion time alone on its path (see the scenario's
// comment); with a HeaderOverhead, the bytes at line rate count that per packet and
// no RETH, as the simulator's standalone_fct counts its 48-byte headers.
func (c *Config) idealMixFCT(size int, v6 bool, p pathInfo) time.Duration {
	hdr, reth, _ := packetHeaders(v6)
	seg := c.segment()
	pkts := max(1, (size+seg-1)/seg)
	wire := uint64(size + pkts*hdr + reth)
	if c.HeaderOverhead > 0 {
		wire = uint64(size + pkts*c.HeaderOverhead)
	}
	return p.baseRTT(c) + time.Duration(wire*8e9/p.rate)
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
	paths [][]pathInfo
	info  *MixInfo
	res   *Result
	flows []*flow

	clk clock.Clock
	seq *clock.Virtual  // the sequential driver, or
	par *clock.Parallel // the parallel one (Mix.Threads)
	nw  *lab.Network
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
	for s := range m.paths {
		for d, p := range m.paths[s] {
			if s == d {
				continue
			}
			rtt := p.baseRTT(cfg)
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
	nw, err := lab.Build(m.topo, m.clk, lab.Options{CC: m.cfg.ccConfigFor(m.res.BaseRTT, max(1, len(m.topo.Hosts)-1)), StaticNeighbours: true,
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
			m.res.rates.add(f.rateSample(now, m.cfg.LinkRate))
			delivered += f.deliveredBytes()
		}
		m.res.addDelivered(now, delivered)
		m.res.links.record(now)
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
			in := p.series.samples(w.from, w.to)
			if first, last, n := ends(in); n >= 2 {
				rec.MeanQueue = meanQueue(in)
				rec.TxBytes = last.TxBytes - first.TxBytes
				rec.Utilization = wireRate(in) / float64(p.rate)
			}
			info.ports = append(info.ports, &p.series)
			info.PortStats = append(info.PortStats, rec)
			info.Ports++
		}
	}
}

// EachPortQueue calls fn with every port's queue at each sample where it changed from
// the port's sample before (port_queues.csv's rows), in time order and, at one
// instant, in port order. The rows are merged from the ports' change points as they
// are read: held as rows they were 24 bytes each, a gigabyte and more for the
// 1,024-host fat tree's 10 ms.
func (x *MixInfo) EachPortQueue(fn func(PortQueueSample)) {
	h := make(queueHeap, 0, len(x.ports))
	for i, p := range x.ports {
		q := &queueCursor{changeCursor: p.changes.cursor(), port: i, prev: -1}
		if q.skip(); q.ahead {
			h = append(h, q)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		q := h[0]
		fn(PortQueueSample{T: q.next.T, Port: q.port, Bytes: q.next.Bytes})
		q.prev = q.next.Bytes
		q.step()
		if q.skip(); q.ahead {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
}

// queueCursor walks one port's change points, stopping at those where its queue
// changed (prev is the queue before).
type queueCursor struct {
	changeCursor
	port, prev int
}

// skip steps past the change points that left the queue as it was.
func (q *queueCursor) skip() {
	for q.ahead && q.next.Bytes == q.prev {
		q.step()
	}
}

// queueHeap orders ports' cursors by their next queue change's instant, then port.
type queueHeap []*queueCursor

func (h queueHeap) Len() int { return len(h) }
func (h queueHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.next.T < b.next.T || a.next.T == b.next.T && a.port < b.port
}
func (h queueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *queueHeap) Push(x any)   { *h = append(*h, x.(*queueCursor)) }
func (h *queueHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}

// flowRecords records every flow's outcome and the errors of those that failed or
// did not finish.
func (m *mixRun) flowRecords() {
	res := m.res
	for _, f := range m.flows {
		rec := FlowRecord{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: f.Size, StartNs: int64(f.Start)}
		ideal := m.cfg.idealMixFCT(f.Size, m.v6, m.paths[f.Src][f.Dst])
		rec.IdealNs = ideal.Nanoseconds()
		switch {
		case f.Failed != "":
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s", f.ID, f.Failed))
		case f.Done == 0:
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d (%d bytes, h%d→h%d, arrived at %v): not finished after %v",
				f.ID, f.Size, f.Src+1, f.Dst+1, f.Start, m.cfg.Limit))
		}
		if f.Done > 0 && f.Failed == "" {
			rec.Finished = true
			rec.FCTNs = f.Done.Sub(f.Start).Nanoseconds()
			rec.Slowdown = max(1, float64(rec.FCTNs)/float64(ideal))
		}
		res.Flows = append(res.Flows, rec)
	}
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
		if f.Finished {
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
