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

// YAML formats t as a topology file that Parse reads back to the same topology.
func (t *Topology) YAML() []byte {
	var w strings.Builder
	fmt.Fprintf(&w, "telemetry: %s\ncongestion_control: %s\n", t.Telemetry, t.CongestionControl)
	if t.Retry == "rxe" {
		w.WriteString("retry: rxe\n")
	}
	w.WriteString("\nhosts:\n")
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
