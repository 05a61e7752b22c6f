package topo

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"go.yaml.in/yaml/v3"

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

// host adds host number n (1-based) with 10.0.0.0/8 and fd00::/64 addresses from n:
// 10.0.0.5 and fd00::5 for the fifth, 10.1.0.1 and fd00::1:1 for the 65,537th.
func (b *builder) host(name string) string {
	n := len(b.t.Hosts) + 1
	b.t.Hosts = append(b.t.Hosts, Host{Name: name,
		IPv4: netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}),
		IPv6: netip.AddrFrom16([16]byte{0: 0xfd, 12: byte(n >> 24), 13: byte(n >> 16), 14: byte(n >> 8), 15: byte(n)})})
	return name
}

// checkSize refuses, before anything is built, a generated topology larger than a
// topology may be.
func checkSize(kind string, hosts, switches int) error {
	if hosts > MaxHosts || switches > MaxSwitches {
		return fmt.Errorf("topo: %s with %d hosts and %d switches: at most %d hosts and %d switches", kind, hosts, switches, MaxHosts, MaxSwitches)
	}
	return nil
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
	if leaves > MaxSwitches || spines > MaxSwitches || hostsPerLeaf > MaxHosts {
		return nil, checkSize("leaf-spine", hostsPerLeaf, leaves+spines)
	}
	if err := checkSize("leaf-spine", leaves*hostsPerLeaf, leaves+spines); err != nil {
		return nil, err
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
	if k > MaxSwitches { // k³/4 would overflow long before
		return nil, checkSize(fmt.Sprintf("fat-tree k=%d", k), MaxHosts+1, k)
	}
	if err := checkSize(fmt.Sprintf("fat-tree k=%d", k), k*k*k/4, k*k*5/4); err != nil {
		return nil, err
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

// YAML formats t as a topology file that Parse reads back to the same topology: one
// line per host and per link (flow style), a block per switch. yaml.v3 quotes what
// needs quoting (names with ": " or "#", addresses with colons).
func (t *Topology) YAML() []byte {
	hosts := yamlSeq(0)
	for _, h := range t.Hosts {
		n := yamlMap(yaml.FlowStyle, "name", yamlStr(h.Name))
		if h.IPv4.IsValid() {
			yamlAdd(n, "ipv4", yamlStr(h.IPv4.String()))
		}
		if h.IPv6.IsValid() {
			yamlAdd(n, "ipv6", yamlStr(h.IPv6.String()))
		}
		yamlAdd(n, "mac", yamlStr(h.MAC.String()))
		if h.External != "" {
			yamlAdd(n, "external", yamlStr(h.External))
		}
		if h.Bridge != "" {
			yamlAdd(n, "bridge", yamlStr(h.Bridge))
		}
		if h.Machine != "" {
			yamlAdd(n, "machine", yamlStr(h.Machine))
		}
		hosts.Content = append(hosts.Content, n)
	}
	switches := yamlSeq(0)
	for _, s := range t.Switches {
		n := yamlMap(0, "name", yamlStr(s.Name))
		if s.Buffer > 0 {
			yamlAdd(n, "buffer", yamlNum(s.Buffer))
		}
		if e := s.ECN; e != nil {
			yamlAdd(n, "ecn", yamlMap(yaml.FlowStyle, "kmin", yamlNum(e.KMin), "kmax", yamlNum(e.KMax), "pmax", yamlNum(e.PMax)))
		}
		if p := s.PFC; p != nil {
			prios := yamlSeq(yaml.FlowStyle)
			for _, prio := range p.Priorities {
				prios.Content = append(prios.Content, yamlNum(prio))
			}
			yamlAdd(n, "pfc", yamlMap(yaml.FlowStyle, "priorities", prios, "xoff", yamlNum(p.XOff), "xon", yamlNum(p.XOn), "headroom", yamlNum(p.Headroom)))
		}
		if s.Machine != "" {
			yamlAdd(n, "machine", yamlStr(s.Machine))
		}
		switches.Content = append(switches.Content, n)
	}
	links := yamlSeq(0)
	for _, l := range t.Links {
		ends := yamlSeq(yaml.FlowStyle)
		ends.Content = []*yaml.Node{yamlStr(l.Endpoints[0]), yamlStr(l.Endpoints[1])}
		n := yamlMap(yaml.FlowStyle, "endpoints", ends, "rate", yamlStr(FormatRate(l.Rate)), "delay", yamlStr(l.Delay.String()), "mtu", yamlNum(l.MTU))
		if l.Buffer > 0 {
			yamlAdd(n, "buffer", yamlNum(l.Buffer))
		}
		if f := l.Faults; f != (link.Faults{}) {
			yamlAdd(n, "faults", yamlMap(yaml.FlowStyle, "loss", yamlNum(f.Loss), "duplicate", yamlNum(f.Duplicate), "corrupt", yamlNum(f.Corrupt),
				"reorder", yamlNum(f.Reorder), "reorder_delay", yamlStr(f.ReorderDelay.String()), "jitter", yamlStr(f.Jitter.String()),
				"jitter_prob", yamlNum(f.JitterProb),
				"flap", yamlMap(yaml.FlowStyle, "start", yamlStr(f.Flap.Start.String()), "period", yamlStr(f.Flap.Period.String()), "down", yamlStr(f.Flap.Down.String()))))
		}
		links.Content = append(links.Content, n)
	}
	doc := yamlMap(0, "telemetry", yamlStr(t.Telemetry), "congestion_control", yamlStr(t.CongestionControl))
	if t.HPCCMode != "" && t.HPCCMode != "probe" {
		yamlAdd(doc, "hpcc_mode", yamlStr(t.HPCCMode))
	}
	if t.Retry == "rxe" {
		yamlAdd(doc, "retry", yamlStr(t.Retry))
	}
	if len(t.Machines) > 0 {
		machines := yamlSeq(0)
		for _, m := range t.Machines {
			n := yamlMap(yaml.FlowStyle, "name", yamlStr(m.Name))
			if m.Address != "" {
				yamlAdd(n, "address", yamlStr(m.Address))
			}
			machines.Content = append(machines.Content, n)
		}
		yamlAdd(doc, "machines", machines)
	}
	yamlAdd(doc, "hosts", hosts)
	yamlAdd(doc, "switches", switches)
	yamlAdd(doc, "links", links)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		panic(fmt.Sprintf("topo: encoding a node tree built here: %v", err)) // only a malformed tree fails
	}
	enc.Close()
	return buf.Bytes()
}

// yamlMap is a mapping node of key, value pairs.
func yamlMap(style yaml.Style, kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: style}
	for i := 0; i < len(kv); i += 2 {
		yamlAdd(n, kv[i].(string), kv[i+1].(*yaml.Node))
	}
	return n
}

func yamlAdd(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, yamlStr(key), v)
}

// yamlSeq is a sequence node (style 0: block).
func yamlSeq(style yaml.Style) *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode, Style: style} }

// yamlStr is a string scalar: tagged, so the encoder quotes values that would read back as
// something else (a number, true, null) or break the syntax.
func yamlStr(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

// yamlNum is a number scalar, written plain.
func yamlNum[T int | uint8 | uint64 | float64](v T) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: fmt.Sprint(v)}
}
