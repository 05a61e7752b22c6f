package topo

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
)

// Params are what the generators give every link and the lab as a whole.
type Params struct {
	Rate              uint64 // host links; fabric links too unless FabricRate is set
	FabricRate        uint64 // switch-to-switch links (0: Rate)
	Delay             time.Duration
	MTU               int
	Buffer            int // per switch, shared; 0 unlimited
	Telemetry         string
	CongestionControl string
}

func (p Params) withDefaults() Params {
	if p.Rate == 0 {
		p.Rate = 100e9
	}
	if p.FabricRate == 0 {
		p.FabricRate = p.Rate
	}
	if p.MTU == 0 {
		p.MTU = 1500
	}
	if p.Telemetry == "" {
		p.Telemetry = "hpcc"
	}
	if p.CongestionControl == "" {
		p.CongestionControl = "hpcc"
	}
	return p
}

type builder struct {
	t *Topology
	p Params
}

func newBuilder(p Params) *builder {
	p = p.withDefaults()
	return &builder{p: p, t: &Topology{Telemetry: p.Telemetry, CongestionControl: p.CongestionControl}}
}

func (b *builder) host(name string) string {
	n := len(b.t.Hosts) + 1
	b.t.Hosts = append(b.t.Hosts, Host{Name: name,
		IPv4: netip.AddrFrom4([4]byte{10, 0, byte(n >> 8), byte(n)}),
		IPv6: netip.MustParseAddr(fmt.Sprintf("fd00::%x", n))})
	return name
}

func (b *builder) sw(name string) string {
	b.t.Switches = append(b.t.Switches, Switch{Name: name, Buffer: b.p.Buffer})
	return name
}

func (b *builder) link(x, y string, rate uint64) {
	b.t.Links = append(b.t.Links, Link{Endpoints: [2]string{x, y}, Rate: rate, Delay: b.p.Delay, MTU: b.p.MTU})
}

func (b *builder) done() (*Topology, error) {
	if err := b.t.Validate(); err != nil {
		return nil, err
	}
	return b.t, nil
}

// Star returns n senders h1…hn and one receiver h(n+1) on one switch: the incast.
func Star(n int, p Params) (*Topology, error) {
	if n < 1 {
		return nil, fmt.Errorf("topo: star needs at least one sender")
	}
	b := newBuilder(p)
	s := b.sw("s1")
	for i := 1; i <= n+1; i++ {
		b.link(b.host(fmt.Sprintf("h%d", i)), s, b.p.Rate)
	}
	return b.done()
}

// Dumbbell returns n hosts on each of two switches joined by one bottleneck link at
// FabricRate: left hosts h1…hn on s1, right hosts h(n+1)…h2n on s2.
func Dumbbell(n int, p Params) (*Topology, error) {
	if n < 1 {
		return nil, fmt.Errorf("topo: dumbbell needs at least one host per side")
	}
	b := newBuilder(p)
	s1, s2 := b.sw("s1"), b.sw("s2")
	b.link(s1, s2, b.p.FabricRate)
	for i := 1; i <= 2*n; i++ {
		s := s1
		if i > n {
			s = s2
		}
		b.link(b.host(fmt.Sprintf("h%d", i)), s, b.p.Rate)
	}
	return b.done()
}

// LeafSpine returns a two-tier Clos: every leaf connects to every spine, and each leaf
// has hostsPerLeaf hosts.
func LeafSpine(leaves, spines, hostsPerLeaf int, p Params) (*Topology, error) {
	if leaves < 1 || spines < 1 || hostsPerLeaf < 1 {
		return nil, fmt.Errorf("topo: leaf-spine needs leaves, spines and hosts")
	}
	b := newBuilder(p)
	for s := 1; s <= spines; s++ {
		b.sw(fmt.Sprintf("spine%d", s))
	}
	for l := 1; l <= leaves; l++ {
		leaf := b.sw(fmt.Sprintf("leaf%d", l))
		for s := 1; s <= spines; s++ {
			b.link(leaf, fmt.Sprintf("spine%d", s), b.p.FabricRate)
		}
		for h := 1; h <= hostsPerLeaf; h++ {
			b.link(b.host(fmt.Sprintf("h%d", (l-1)*hostsPerLeaf+h)), leaf, b.p.Rate)
		}
	}
	return b.done()
}

// FatTree returns the k-ary fat-tree of Al-Fares et al. (k even): k pods of k/2 edge and
// k/2 aggregation switches, (k/2)² core switches, k³/4 hosts.
func FatTree(k int, p Params) (*Topology, error) {
	if k < 2 || k%2 != 0 {
		return nil, fmt.Errorf("topo: fat-tree k must be even and at least 2, not %d", k)
	}
	b := newBuilder(p)
	half := k / 2
	for c := 1; c <= half*half; c++ {
		b.sw(fmt.Sprintf("core%d", c))
	}
	host := 0
	for pod := 1; pod <= k; pod++ {
		for a := 1; a <= half; a++ {
			agg := b.sw(fmt.Sprintf("agg%d-%d", pod, a))
			for c := 1; c <= half; c++ {
				b.link(agg, fmt.Sprintf("core%d", (a-1)*half+c), b.p.FabricRate)
			}
		}
		for e := 1; e <= half; e++ {
			edge := b.sw(fmt.Sprintf("edge%d-%d", pod, e))
			for a := 1; a <= half; a++ {
				b.link(edge, fmt.Sprintf("agg%d-%d", pod, a), b.p.FabricRate)
			}
			for range half {
				host++
				b.link(b.host(fmt.Sprintf("h%d", host)), edge, b.p.Rate)
			}
		}
	}
	return b.done()
}

// ThreeTier describes the three-tier fat tree of the HPCC paper's evaluation (§5.1):
// ToRs with their hosts, aggregation switches and core switches, grouped in pods.
// Each ToR links to every aggregation switch of its pod; the a-th aggregation switch
// of every pod links to the a-th group of Cores/(Aggs/Pods) core switches, so every
// core switch reaches every pod once.
type ThreeTier struct {
	Pods, ToRs, Aggs, Cores, HostsPerToR int
}

// PaperThreeTier is the HPCC paper's topology: 320 hosts, 16 on each of 20 ToRs, 20
// aggregation and 16 core switches in 5 pods (with 100 Gb/s host links and 400 Gb/s
// fabric links it is not oversubscribed).
var PaperThreeTier = ThreeTier{Pods: 5, ToRs: 20, Aggs: 20, Cores: 16, HostsPerToR: 16}

// Validate says what is wrong with the counts, if anything.
func (c ThreeTier) Validate() error {
	switch {
	case c.Pods < 1 || c.ToRs < 1 || c.Aggs < 1 || c.Cores < 1 || c.HostsPerToR < 1:
		return fmt.Errorf("topo: three-tier %+v: every count must be at least 1", c)
	case c.ToRs%c.Pods != 0 || c.Aggs%c.Pods != 0:
		return fmt.Errorf("topo: three-tier: %d ToRs and %d aggregation switches do not divide into %d pods", c.ToRs, c.Aggs, c.Pods)
	case c.Cores%(c.Aggs/c.Pods) != 0:
		return fmt.Errorf("topo: three-tier: %d core switches do not divide among the %d aggregation switches of a pod", c.Cores, c.Aggs/c.Pods)
	case c.ToRs*c.HostsPerToR < 2:
		return fmt.Errorf("topo: three-tier: want at least two hosts")
	}
	return nil
}

// Oversubscription is a ToR's host capacity over its uplink capacity at the given host
// and fabric rates (1: full bisection).
func (c ThreeTier) Oversubscription(rate, fabricRate uint64) float64 {
	return float64(uint64(c.HostsPerToR)*rate) / float64(uint64(c.Aggs/c.Pods)*fabricRate)
}

// FatTree3 generates the three-tier fat tree c: hosts at Rate, ToR–aggregation and
// aggregation–core links at FabricRate. Hosts are numbered ToR by ToR.
func FatTree3(c ThreeTier, p Params) (*Topology, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := newBuilder(p)
	torsPerPod, aggsPerPod := c.ToRs/c.Pods, c.Aggs/c.Pods
	coresPerAgg := c.Cores / aggsPerPod
	for k := 1; k <= c.Cores; k++ {
		b.sw(fmt.Sprintf("core%d", k))
	}
	host := 0
	for pod := 1; pod <= c.Pods; pod++ {
		for a := 1; a <= aggsPerPod; a++ {
			agg := b.sw(fmt.Sprintf("agg%d-%d", pod, a))
			for k := 1; k <= coresPerAgg; k++ {
				b.link(agg, fmt.Sprintf("core%d", (a-1)*coresPerAgg+k), b.p.FabricRate)
			}
		}
		for t := 1; t <= torsPerPod; t++ {
			tor := b.sw(fmt.Sprintf("tor%d-%d", pod, t))
			for a := 1; a <= aggsPerPod; a++ {
				b.link(tor, fmt.Sprintf("agg%d-%d", pod, a), b.p.FabricRate)
			}
			for range c.HostsPerToR {
				host++
				b.link(b.host(fmt.Sprintf("h%d", host)), tor, b.p.Rate)
			}
		}
	}
	return b.done()
}

// YAML formats t as a topology file that Parse reads back to the same topology.
func (t *Topology) YAML() []byte {
	var w strings.Builder
	fmt.Fprintf(&w, "telemetry: %s\ncongestion_control: %s\n\nhosts:\n", t.Telemetry, t.CongestionControl)
	for _, h := range t.Hosts {
		fmt.Fprintf(&w, "  - {name: %s", h.Name)
		if h.IPv4.IsValid() {
			fmt.Fprintf(&w, ", ipv4: %s", h.IPv4)
		}
		if h.IPv6.IsValid() {
			fmt.Fprintf(&w, ", ipv6: %q", h.IPv6.String())
		}
		fmt.Fprintf(&w, ", mac: %q", h.MAC.String())
		if h.External != "" {
			fmt.Fprintf(&w, ", external: %s", h.External)
		}
		if h.Bridge != "" {
			fmt.Fprintf(&w, ", bridge: %s", h.Bridge)
		}
		w.WriteString("}\n")
	}
	w.WriteString("\nswitches:\n")
	for _, s := range t.Switches {
		fmt.Fprintf(&w, "  - name: %s\n", s.Name)
		if s.Buffer > 0 {
			fmt.Fprintf(&w, "    buffer: %d\n", s.Buffer)
		}
		if e := s.ECN; e != nil {
			fmt.Fprintf(&w, "    ecn: {kmin: %d, kmax: %d, pmax: %v}\n", e.KMin, e.KMax, e.PMax)
		}
		if p := s.PFC; p != nil {
			fmt.Fprintf(&w, "    pfc: {priorities: %s, xoff: %d, xon: %d, headroom: %d}\n",
				strings.ReplaceAll(fmt.Sprint(p.Priorities), " ", ", "), p.XOff, p.XOn, p.Headroom)
		}
	}
	w.WriteString("\nlinks:\n")
	for _, l := range t.Links {
		fmt.Fprintf(&w, "  - {endpoints: [%s, %s], rate: %s, delay: %s, mtu: %d", l.Endpoints[0], l.Endpoints[1],
			FormatRate(l.Rate), l.Delay, l.MTU)
		if l.Buffer > 0 {
			fmt.Fprintf(&w, ", buffer: %d", l.Buffer)
		}
		if f := l.Faults; f != (link.Faults{}) {
			fmt.Fprintf(&w, ",\n     faults: {loss: %v, duplicate: %v, corrupt: %v, reorder: %v, reorder_delay: %s, jitter: %s, jitter_prob: %v",
				f.Loss, f.Duplicate, f.Corrupt, f.Reorder, f.ReorderDelay, f.Jitter, f.JitterProb)
			fmt.Fprintf(&w, ",\n              flap: {start: %s, period: %s, down: %s}}", f.Flap.Start, f.Flap.Period, f.Flap.Down)
		}
		w.WriteString("}\n")
	}
	return []byte(w.String())
}
