package experiment

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/rocelab/rocelab/fabric/topo"
)

// threeTierFabricRate is the fabric links' rate that gives the three-tier fat tree's
// ToRs the configured oversubscription.
func (c *Config) threeTierFabricRate() uint64 {
	tt := c.ThreeTier
	return uint64(math.Round(float64(uint64(tt.HostsPerToR)*c.LinkRate) / (float64(tt.Aggs/tt.Pods) * c.Oversubscription)))
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
