package experiment

import (
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
)

// partitioning places a topology's nodes for the parallel driver (clock.Parallel):
// the pods, the connected parts of the network once its top tier of switches is
// taken away (a fat tree's pods, a leaf-spine's leaves with their hosts), each a
// partition, and the top tier's switches dealt round-robin among them. A network of
// fewer than minPartitions pods is cut a tier lower, down to the first tier of
// switches (the 320-host three-tier tree's 5 pods become its 20 ToRs with their
// hosts, the aggregation and core switches dealt among them). The lookahead is the
// least delay of a link between partitions. A single-tier network (a star) is one
// partition.
//
// The partitioning depends on the topology only, never on the number of threads,
// which is what keeps a parallel run the same on any number of them.
type partitioning struct {
	of        map[string]int // node name → partition
	n         int
	lookahead time.Duration
}

// partition returns the partition of a loop by its node's name, -1 for a loop that
// is not a node's (the experiment's arrivals and monitor: the coordinator's).
func (p *partitioning) partition(name string) int {
	if i, ok := p.of[name]; ok {
		return i
	}
	return -1
}

func partitionTopology(t *topo.Topology) partitioning {
	adj := map[string][]string{}
	for _, l := range t.Links {
		a, b := l.Endpoints[0], l.Endpoints[1]
		adj[a] = append(adj[a], b)
		adj[b] = append(adj[b], a)
	}
	// tier: a switch's hops from the nearest host.
	tier := map[string]int{}
	var frontier []string
	for _, h := range t.Hosts {
		tier[h.Name] = 0
		frontier = append(frontier, h.Name)
	}
	top := 0
	for len(frontier) > 0 {
		var next []string
		for _, n := range frontier {
			for _, m := range adj[n] {
				if _, seen := tier[m]; !seen {
					tier[m] = tier[n] + 1
					top = max(top, tier[m])
					next = append(next, m)
				}
			}
		}
		frontier = next
	}
	if top < 2 {
		return onePartition(t)
	}
	p := pods(t, adj, tier, top)
	for cut := top - 1; p.n < minPartitions && cut >= 2; cut-- {
		p = pods(t, adj, tier, cut)
	}
	k := 0
	for _, s := range t.Switches {
		if _, placed := p.of[s.Name]; !placed {
			p.of[s.Name] = k % p.n
			k++
		}
	}
	p.lookahead = maxWindow
	for _, l := range t.Links {
		if p.of[l.Endpoints[0]] != p.of[l.Endpoints[1]] {
			p.lookahead = min(p.lookahead, l.Delay)
		}
	}
	if p.lookahead <= 0 {
		// A frame can cross between pods in no time: no window is safe, and the
		// network runs as one partition.
		return onePartition(t)
	}
	return p
}

// pods places the hosts and the switches below tier cut (hops from the nearest
// host) in partitions, one per connected part, numbered in the order of their first
// host.
func pods(t *topo.Topology, adj map[string][]string, tier map[string]int, cut int) partitioning {
	p := partitioning{of: map[string]int{}}
	for _, h := range t.Hosts {
		if _, done := p.of[h.Name]; done {
			continue
		}
		stack := []string{h.Name}
		p.of[h.Name] = p.n
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, m := range adj[n] {
				if _, done := p.of[m]; !done && tier[m] < cut {
					p.of[m] = p.n
					stack = append(stack, m)
				}
			}
		}
		p.n++
	}
	return p
}

// minPartitions is the fewest partitions partitionTopology leaves a network of
// several tiers, where a lower cut can give more: a window lasts as long as its
// busiest thread's partitions, and 5 pods on 2 threads leave one thread 3 of them
// (the 320-host tree ran 10% faster on two threads as 20 partitions than as 5, and
// the same on one).
const minPartitions = 8

// onePartition places every node in one partition.
func onePartition(t *topo.Topology) partitioning {
	p := partitioning{of: map[string]int{}, n: 1, lookahead: maxWindow} // nothing crosses: any positive window does
	for _, h := range t.Hosts {
		p.of[h.Name] = 0
	}
	for _, s := range t.Switches {
		p.of[s.Name] = 0
	}
	return p
}

// maxWindow bounds the parallel driver's window whatever the links' delays: a link
// between partitions holds a window's frames in its ring until the window ends (the
// ring grows to hold them: link.New), so the window bounds that memory; and a
// microsecond is already thousands of events per window on the fat trees (5,300 on
// the 320-host one), enough to amortize the barrier between windows.
const maxWindow = time.Microsecond
