package experiment

import (
	"fmt"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
)

// The mix scenario is the HPCC paper's evaluation workload (§5, Figure 11) as its ns-3
// simulator generates it (traffic_gen.py): every host starts flows as a Poisson
// process whose mean inter-arrival time is mean flow size × 8 / (load × host link
// rate), to a destination drawn uniformly among the other hosts, with a size drawn
// from a flow-size CDF. Each flow is one RDMA WRITE on its own RC QP pair, through a
// leaf-spine or fat-tree of bridge-switches built by package network, in virtual time.
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
