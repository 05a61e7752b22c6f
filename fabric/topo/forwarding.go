package topo

import (
	"net"
	"slices"
)

// Tables are one switch's forwarding tables.
type Tables struct {
	// Routes maps a host's MAC to the switch ports on its shortest paths (the ECMP
	// set), in port order.
	Routes map[string][]uint16
	// Flood lists the ports on the spanning tree, in port order.
	Flood []uint16
}

// Forwarding computes every switch's tables, keyed by switch name: shortest paths (in
// hops) to every host with all equal-cost next hops, and a spanning tree (breadth first
// from the first switch) to flood along. Port numbers follow the file's link order.
func (t *Topology) Forwarding() map[string]*Tables {
	g := t.graph()
	tables := map[string]*Tables{}
	for _, s := range t.Switches {
		tables[s.Name] = &Tables{Routes: map[string][]uint16{}}
	}
	for _, h := range t.Hosts {
		dist := g.distances(g.index[h.Name])
		mac := h.MAC.String()
		for _, s := range t.Switches {
			u := g.index[s.Name]
			for _, e := range g.edges[u] {
				if dist[e.to] == dist[u]-1 {
					tables[s.Name].Routes[mac] = append(tables[s.Name].Routes[mac], e.port)
				}
			}
		}
	}
	if len(t.Switches) > 0 {
		root := g.index[t.Switches[0].Name]
		seen := map[int]bool{root: true}
		queue := []int{root}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, e := range g.edges[u] {
				if seen[e.to] {
					continue
				}
				seen[e.to] = true
				queue = append(queue, e.to)
				if tb := tables[g.names[u]]; tb != nil {
					tb.Flood = append(tb.Flood, e.port)
				}
				if tb := tables[g.names[e.to]]; tb != nil {
					tb.Flood = append(tb.Flood, e.backPort)
				}
			}
		}
		for _, tb := range tables {
			slices.Sort(tb.Flood)
		}
	}
	return tables
}

// MAC6 returns the host's MAC as a fixed-size array.
func (h *Host) MAC6() [6]byte {
	var m [6]byte
	copy(m[:], net.HardwareAddr(h.MAC))
	return m
}

type edge struct {
	to             int
	port, backPort uint16 // the port at this end and at the far end
}

type graph struct {
	names []string
	index map[string]int
	edges [][]edge
}

func (t *Topology) graph() *graph {
	g := &graph{index: map[string]int{}}
	add := func(name string) {
		g.index[name] = len(g.names)
		g.names = append(g.names, name)
		g.edges = append(g.edges, nil)
	}
	for _, h := range t.Hosts {
		add(h.Name)
	}
	for _, s := range t.Switches {
		add(s.Name)
	}
	for _, l := range t.Links {
		a, b := g.index[l.Endpoints[0]], g.index[l.Endpoints[1]]
		pa, pb := uint16(len(g.edges[a])), uint16(len(g.edges[b]))
		g.edges[a] = append(g.edges[a], edge{to: b, port: pa, backPort: pb})
		g.edges[b] = append(g.edges[b], edge{to: a, port: pb, backPort: pa})
	}
	return g
}

// distances returns hop counts from src (-1 unreachable). Paths do not transit hosts.
func (g *graph) distances(src int) []int {
	dist := make([]int, len(g.names))
	for i := range dist {
		dist[i] = -1
	}
	dist[src] = 0
	queue := []int{src}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if u != src && len(g.edges[u]) == 1 {
			continue // a host: a leaf, never transit
		}
		for _, e := range g.edges[u] {
			if dist[e.to] < 0 {
				dist[e.to] = dist[u] + 1
				queue = append(queue, e.to)
			}
		}
	}
	return dist
}

func (g *graph) reach(src int) []int {
	var out []int
	for i, d := range g.distances(src) {
		if d >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// Diameter returns the number of links on the longest shortest path between two hosts
// (2 for hosts on one switch); 0 with fewer than two connected hosts.
func (t *Topology) Diameter() int {
	g := t.graph()
	d := 0
	for _, h := range t.Hosts {
		dist := g.distances(g.index[h.Name])
		for _, o := range t.Hosts {
			d = max(d, dist[g.index[o.Name]])
		}
	}
	return d
}
