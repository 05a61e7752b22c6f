package experiment

import (
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
)

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

// paths is the pathInfo of every ordered pair of hosts, kept as an index per pair into
// the few distinct pathInfos a network has (a fat tree's paths differ only in their
// number of links): a pathInfo per pair was 24 bytes times hosts², half a gigabyte
// on a 4,394-host fat tree.
type paths struct {
	distinct []pathInfo
	index    [][]uint16 // [src][dst]
}

// of returns the path from src to dst.
func (ps *paths) of(src, dst int) pathInfo { return ps.distinct[ps.index[src][dst]] }

// add records p as the path from src to dst.
func (ps *paths) add(src, dst int, p pathInfo, seen map[pathInfo]uint16) {
	i, ok := seen[p]
	if !ok {
		i = uint16(len(ps.distinct))
		if int(i) != len(ps.distinct) {
			panic("experiment: more than 65,536 distinct host paths")
		}
		seen[p] = i
		ps.distinct = append(ps.distinct, p)
	}
	ps.index[src][dst] = i
}

// hostPaths computes pathInfo for every ordered pair of hosts over a shortest path
// (hosts are never transit; every shortest path of a leaf-spine or fat-tree has the
// same links' rates and delays) for full packets of seg payload bytes. The index of
// a pair without a path, a host to itself included, is that of the zero pathInfo.
func hostPaths(t *topo.Topology, seg int, v6 bool) *paths {
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
	out := &paths{distinct: []pathInfo{{}}, index: make([][]uint16, len(t.Hosts))}
	seen := map[pathInfo]uint16{{}: 0}
	var links []pathLink
	for src := range t.Hosts {
		out.index[src] = make([]uint16, len(t.Hosts))
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
			links = links[:0]
			for n := dst; n != src; n = prev[n] {
				l := t.Links[via[n]]
				p.rtt += 2*l.Delay + ser(seg+hdr, l.Rate) + ser(ackLen, l.Rate)
				links = append(links, pathLink{l.Delay, l.Rate})
				if p.rate == 0 || l.Rate < p.rate {
					p.rate = l.Rate
				}
			}
			p.simRTT = simRTT(seg, links)
			out.add(src, dst, p, seen)
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
