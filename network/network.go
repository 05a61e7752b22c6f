package network

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/capture"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/stamp"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Options tune how Build turns a topology into nodes.
type Options struct {
	// RandomIDs is every device's rnic.Config.RandomIDs: unguessable MR keys and QPNs
	// (a lab's; virtual time keeps them deterministic).
	RandomIDs bool
	// CC overrides the congestion control the topology names (its Mode non-empty);
	// its zero HPCC parameters are derived from the topology.
	CC rnic.CC
	// TxLookahead is every device's rnic.Config.TxLookahead (real-time labs batch).
	TxLookahead time.Duration
	// MaxUnackedPSNs is every device's rnic.Config.MaxUnackedPSNs.
	MaxUnackedPSNs int
	// HostRelay, if set, gives each host's device the receiver of the frames it does
	// not terminate: the lab's writer into the host's TAP. Without one the devices
	// answer ARP and NDP themselves.
	HostRelay func(host string) link.Receiver
	// StaticNeighbours installs every other host's MAC in each device, as the lab
	// installs them in each host's kernel, so that QPs connect without waiting for ARP.
	StaticNeighbours bool
	// Monitors wraps every switch port and every host port in a capture.Monitor
	// (`rocelab capture`).
	Monitors bool
	// External attaches an external host's end of its link (topo.Host.External): the
	// lab runtime relays it to the host's TAP. Build fails on external hosts without it.
	External func(h *External) error
	// Threads, if positive, is how many loops the nodes share, dealt round-robin in
	// creation order (switches, then hosts); 0 gives every node its own. On a real
	// clock each loop is an OS thread, and a frame crossing from one loop to another
	// costs a wake-up of the receiving thread; fewer threads than nodes trades
	// parallelism for those wake-ups (see Config.Threads).
	Threads int
	// OnPanic hears each node's first contained panic (fabric.Config.OnPanic,
	// rnic.Config.OnPanic): the frame was dropped and counted, and the node went on.
	OnPanic func(node string, v any, stack []byte)
	// Machine, with a topology placed on machines (topo.Topology.Machines), builds
	// only that machine's part: its hosts and switches, and for each link to a node of
	// another machine the endpoint Tunnel returns. "" builds every node.
	Machine string
	// Tunnel returns this part's end of link i (its index in the topology's Links),
	// whose other end runs on machine peer.
	Tunnel func(i int, peer string) (link.Endpoint, error)
	// PayloadFree builds every device as rnic.Config.PayloadFree: a virtual-time
	// experiment that does not verify data moves none.
	PayloadFree bool
}

// onPanic binds Options.OnPanic to one node.
func (o *Options) onPanic(node string) func(any, []byte) {
	if o.OnPanic == nil {
		return nil
	}
	return func(v any, stack []byte) { o.OnPanic(node, v, stack) }
}

// External is a host rocelab does not emulate (topo.Host.External): its link end, the
// loop to use it from, and its capture point.
type External struct {
	Name    string
	Config  topo.Host
	Link    link.Endpoint
	Loop    clock.Loop
	Monitor *capture.Monitor
	Pool    *link.Pool // the network's frame pool
}

// Network is a topology built into running nodes on one clock: a soft-RNIC per host, a
// bridge-switch per switch, an in-process link per topology link.
type Network struct {
	Topology *topo.Topology
	Hosts    []*Host // the emulated hosts, in file order
	// Externals are the hosts behind TAPs without a soft-RNIC, in file order.
	Externals []*External
	Switches  []*Switch
	// Pool supplies every node's frames, sized for the largest link MTU.
	Pool *link.Pool
	// BaseRTT is the round trip Build derived from the links: an MTU-sized packet and
	// its ACK over the longest shortest path between two hosts. It is HPCC's T, except
	// that a lab on the real-time clock runs with at least RealTimeMinBaseRTT.
	BaseRTT time.Duration
}

// Host is one emulated host's NIC.
type Host struct {
	Name   string
	Config topo.Host
	Device *rnic.Device
	Loop   clock.Loop
	// Monitor is the capture point of the host's port ("h1:p0"); nil without
	// Options.Monitors.
	Monitor *capture.Monitor
	// Link is the host's end of its link: its Stats count the faults injected into
	// what the host sent (touched on the host's loop).
	Link *link.End
}

// Switch is one bridge-switch and its ports' capture points (nil without
// Options.Monitors), indexed by port number.
type Switch struct {
	Name     string
	Switch   *fabric.Switch
	Loop     clock.Loop
	Monitors []*capture.Monitor
	// Links are the switch's ends of its ports' links, by port (an in-process link's
	// or a tunnel's): their Stats count the faults injected into what each port sent
	// (touched on the switch's loop).
	Links []link.Endpoint
}

// External returns the external host named name, or nil.
func (n *Network) External(name string) *External {
	for _, x := range n.Externals {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Host returns the host named name, or nil.
func (n *Network) Host(name string) *Host {
	for _, h := range n.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Switch returns the switch named name, or nil.
func (n *Network) Switch(name string) *Switch {
	for _, s := range n.Switches {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// DataPriority is the one traffic class a lab's switches put every IP packet in. Data,
// its telemetry-carrying variants (INT signals itself with a DSCP), ACKs and probes must
// share a class: strict priority between classes would reorder a flow whose packets
// carry telemetry only sometimes. 3 is RoCE's customary lossless class.
const DataPriority = 3

// Build creates the nodes of t on clk: switches first, in file order (their loops'
// random sources follow the creation order), then links, then a device per host. The
// caller starts the clock.
func Build(t *topo.Topology, clk clock.Clock, opts Options) (*Network, error) {
	b, err := newBuilder(t, clk, opts)
	if err != nil {
		return nil, err
	}
	// The order fixes switch IDs, port numbers and which loop each node gets.
	for _, step := range []func() error{b.addSwitches, b.addLinks, b.setForwarding, b.addHosts} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b.n, nil
}

// builder holds what Build's steps share.
type builder struct {
	t      *topo.Topology
	clk    clock.Clock
	opts   Options
	n      *Network
	format telemetry.Format
	cc     rnic.CC
	// loops are the shared loops when opts.Threads > 0, the next to deal first.
	loops     []clock.Loop
	switches  map[string]*Switch
	hostLinks map[string]*link.End // each host's end of its link
	place     map[string]string    // each node's machine (Topology.Placement)
}

// local reports whether node runs in the part being built.
func (b *builder) local(node string) bool {
	return b.opts.Machine == "" || b.place[node] == b.opts.Machine
}

// newBuilder sizes the frame pool for the largest MTU and settles the telemetry
// format and the hosts' congestion control.
func newBuilder(t *topo.Topology, clk clock.Clock, opts Options) (*builder, error) {
	maxMTU := 0
	for _, l := range t.Links {
		maxMTU = max(maxMTU, l.MTU)
	}
	b := &builder{t: t, clk: clk, opts: opts, switches: map[string]*Switch{}, hostLinks: map[string]*link.End{},
		n: &Network{Topology: t, Pool: link.NewPool(maxMTU + 18), BaseRTT: BaseRTT(t)}, place: t.Placement()}
	if opts.Machine != "" && opts.Tunnel == nil {
		return nil, fmt.Errorf("lab: machine %s's part needs Options.Tunnel for its links to other machines", opts.Machine)
	}
	var err error
	if b.format, err = telemetry.ParseFormat(t.Telemetry); err != nil {
		return nil, err
	}
	b.cc = opts.CC
	if b.cc.Mode == "" {
		_, realTime := clk.(*clock.Real)
		if b.cc, err = topologyCC(t, b.format, realTime); err != nil {
			return nil, err
		}
	}
	if b.cc.Mode != rnic.ModeNone && b.cc.Mode != rnic.ModeDCQCN {
		for _, l := range t.Links {
			if err := rnic.CheckLineRate(b.format, l.Rate); err != nil {
				return nil, fmt.Errorf("lab: link %s–%s: %w", l.Endpoints[0], l.Endpoints[1], err)
			}
		}
	}
	return b, nil
}

// newLoop returns the loop of the next node: its own, or the next of opts.Threads
// shared loops, dealt round-robin.
func (b *builder) newLoop(name string) clock.Loop {
	if b.opts.Threads <= 0 {
		return b.clk.NewLoop(name)
	}
	if len(b.loops) < b.opts.Threads {
		b.loops = append(b.loops, b.clk.NewLoop(fmt.Sprintf("loop%d", len(b.loops))))
		return b.loops[len(b.loops)-1]
	}
	l := b.loops[0]
	b.loops = append(b.loops[1:], l)
	return l
}

// addSwitches creates a switch per topology switch, IDs 1…n in file order, every DSCP
// in DataPriority's class, stamping telemetry when the hosts' CC reads it.
func (b *builder) addSwitches() error {
	var prio [64]uint8
	for i := range prio {
		prio[i] = DataPriority
	}
	for i, ts := range b.t.Switches {
		if !b.local(ts.Name) {
			continue // another part's; IDs stay those of the whole lab
		}
		cfg := fabric.Config{ID: uint32(i + 1), Buffer: ts.Buffer, SharedBuffer: true, Pool: b.n.Pool,
			DSCPPriority: &prio, HashSeed: uint32(i+1) * 0x9e3779b9}
		switch {
		case ts.ECN != nil:
			cfg.ECN = fabric.ECN{Enabled: true, KMin: ts.ECN.KMin, KMax: ts.ECN.KMax, PMax: ts.ECN.PMax}
		case b.cc.Mode == rnic.ModeDCQCN:
			// DCQCN without marking would never slow a sender: a switch the topology
			// gives no thresholds marks as the HPCC simulator does at its slowest link.
			cfg.ECN = fabric.SimECN(slowestLink(b.t, ts.Name))
		}
		if ts.PFC != nil {
			for _, p := range ts.PFC.Priorities {
				cfg.PFC.Lossless |= 1 << p
			}
			cfg.PFC.XOff, cfg.PFC.XOn, cfg.PFC.Headroom = ts.PFC.XOff, ts.PFC.XOn, ts.PFC.Headroom
		}
		if b.format != "" && b.cc.Mode != rnic.ModeNone && b.cc.Mode != rnic.ModeDCQCN {
			c, err := rnic.Codecs(b.format)
			if err != nil {
				return err
			}
			cfg.Stamper = stamp.New(c)
		}
		cfg.OnPanic = b.opts.onPanic(ts.Name)
		loop := b.newLoop(ts.Name)
		sw, err := fabric.New(loop, cfg)
		if err != nil {
			return fmt.Errorf("lab: switch %s: %w", ts.Name, err)
		}
		s := &Switch{Name: ts.Name, Switch: sw, Loop: loop}
		b.switches[ts.Name] = s
		b.n.Switches = append(b.n.Switches, s)
	}
	return nil
}

// addLinks creates every link and attaches its switch ends as ports, numbered in file
// order (behind a capture monitor with opts.Monitors); host ends wait for addHosts.
func (b *builder) addLinks() error {
	for li, l := range b.t.Links {
		near, far := b.local(l.Endpoints[0]), b.local(l.Endpoints[1])
		if !near && !far {
			continue
		}
		if near != far {
			if err := b.addTunnel(li, l); err != nil {
				return err
			}
			continue
		}
		a, z, err := link.New(l.Config())
		if err != nil {
			return fmt.Errorf("lab: link %s–%s: %w", l.Endpoints[0], l.Endpoints[1], err)
		}
		for i, le := range []*link.End{a, z} {
			name := l.Endpoints[i]
			s, ok := b.switches[name]
			if !ok {
				b.hostLinks[name] = le
				continue
			}
			b.addPort(s, le)
		}
	}
	return nil
}

// addTunnel attaches this part's end of link li, which crosses to another machine.
// Only a switch may end a tunnel here: a host's link is its NIC's cable, and the
// placement puts an unplaced host with its switch.
func (b *builder) addTunnel(li int, l topo.Link) error {
	name, other := l.Endpoints[0], l.Endpoints[1]
	if !b.local(name) {
		name, other = other, name
	}
	s, ok := b.switches[name]
	if !ok {
		return fmt.Errorf("lab: link %s–%s crosses from machine %s to %s at host %s: place a host on its switch's machine",
			l.Endpoints[0], l.Endpoints[1], b.place[name], b.place[other], name)
	}
	ep, err := b.opts.Tunnel(li, b.place[other])
	if err != nil {
		return fmt.Errorf("lab: link %s–%s: %w", l.Endpoints[0], l.Endpoints[1], err)
	}
	b.addPort(s, ep)
	return nil
}

// addPort attaches end as switch s's next port, behind a capture monitor with
// opts.Monitors.
func (b *builder) addPort(s *Switch, end link.Endpoint) {
	s.Links = append(s.Links, end)
	port := len(s.Switch.Ports())
	if b.opts.Monitors {
		m := capture.NewMonitor(end, fmt.Sprintf("%s:p%d", s.Name, port))
		s.Monitors = append(s.Monitors, m)
		end = m
	}
	s.Switch.AddPort(end, portMAC(s.Switch.ID(), port))
}

// setForwarding installs each switch's routes and flood ports (Topology.Forwarding).
func (b *builder) setForwarding() error {
	for name, tables := range b.t.Forwarding() {
		s := b.switches[name]
		if s == nil {
			continue // another part's
		}
		for mac, ports := range tables.Routes {
			hw, err := parseMAC(mac)
			if err != nil {
				return err
			}
			s.Switch.SetRoute(hw, ports)
		}
		s.Switch.SetFloodPorts(tables.Flood)
	}
	return nil
}

// addHosts opens a soft-RNIC per emulated host on its link end and hands each external
// host's end to opts.External.
func (b *builder) addHosts() error {
	neighbours := b.neighbourTable()
	for _, th := range b.t.Hosts {
		if !b.local(th.Name) {
			continue
		}
		le, ok := b.hostLinks[th.Name]
		if !ok {
			return fmt.Errorf("lab: host %s has no link", th.Name)
		}
		var ep link.Endpoint = le
		var mon *capture.Monitor
		if b.opts.Monitors {
			mon = capture.NewMonitor(ep, th.Name+":p0")
			ep = mon
		}
		if th.External != "" {
			if b.opts.External == nil {
				return fmt.Errorf("lab: host %s is external (%s): only a lab with TAPs (rocelab up) can attach it", th.Name, th.External)
			}
			x := &External{Name: th.Name, Config: th, Link: ep, Loop: b.newLoop(th.Name), Monitor: mon, Pool: b.n.Pool}
			if err := b.opts.External(x); err != nil {
				return fmt.Errorf("lab: external host %s: %w", th.Name, err)
			}
			b.n.Externals = append(b.n.Externals, x)
			continue
		}
		cfg := rnic.Config{Name: th.Name, MAC: th.MAC6(), GIDs: gidTable(th), Loop: b.newLoop(th.Name), Link: ep,
			Pool: b.n.Pool, CC: b.cc, TxLookahead: b.opts.TxLookahead, OnPanic: b.opts.onPanic(th.Name),
			MaxUnackedPSNs: b.opts.MaxUnackedPSNs, RXERetryCnt: b.t.Retry == "rxe",
			PayloadFree: b.opts.PayloadFree, Neighbours: neighbours, RandomIDs: b.opts.RandomIDs}
		if b.opts.HostRelay != nil {
			cfg.Host = b.opts.HostRelay(th.Name)
		}
		d, err := rnic.Open(cfg)
		if err != nil {
			return fmt.Errorf("lab: host %s: %w", th.Name, err)
		}
		b.n.Hosts = append(b.n.Hosts, &Host{Name: th.Name, Config: th, Device: d, Loop: cfg.Loop, Monitor: mon, Link: le})
	}
	return nil
}

// neighbourTable is, with StaticNeighbours, every host's addresses and MAC in one
// table the soft-RNICs share read-only (rnic.Config.Neighbours), so no device waits for
// ARP; nil otherwise. A copy per device would grow with the square of the hosts.
func (b *builder) neighbourTable() map[netip.Addr][6]byte {
	if !b.opts.StaticNeighbours {
		return nil
	}
	t := make(map[netip.Addr][6]byte, 3*len(b.t.Hosts))
	for _, o := range b.t.Hosts {
		for _, a := range gidTable(o) {
			t[a.Unmap()] = o.MAC6()
		}
	}
	return t
}

func gidTable(h topo.Host) []netip.Addr {
	m := h.MAC6()
	ll := netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
	gids := []netip.Addr{ll}
	for _, a := range []netip.Addr{h.IPv4, h.IPv6} {
		if a.IsValid() {
			gids = append(gids, a)
		}
	}
	return gids
}

// portMAC is a switch port's own address (PFC frames' source): locally administered,
// switch and port numbered.
func portMAC(id uint32, port int) fabric.MAC {
	return fabric.MAC{0x02, 0xff, byte(id >> 8), byte(id), byte(port >> 8), byte(port)}
}

func parseMAC(s string) (fabric.MAC, error) {
	var m fabric.MAC
	// net.ParseMAC, not fmt.Sscanf: a switch's table has an entry per host, and on a
	// k = 26 fat tree (4,394 hosts, 845 switches) Sscanf took 4.8 of the build's 11 s.
	hw, err := net.ParseMAC(s)
	if err != nil {
		return m, fmt.Errorf("lab: MAC %q: %w", s, err)
	}
	if len(hw) != len(m) {
		return m, fmt.Errorf("lab: MAC %q: %d bytes, want %d", s, len(hw), len(m))
	}
	copy(m[:], hw)
	return m, nil
}

// slowestLink is the rate of the slowest link of node name, or of the whole topology
// when name is "" (0 if there is none).
func slowestLink(t *topo.Topology, name string) uint64 {
	var rate uint64
	for _, l := range t.Links {
		if name == "" || l.Endpoints[0] == name || l.Endpoints[1] == name {
			if rate == 0 || l.Rate < rate {
				rate = l.Rate
			}
		}
	}
	return rate
}

// RealTimeMinBaseRTT is the least HPCC base RTT T of a lab on the real-time clock.
// T stands for the round trip of an unloaded path with its NICs (a hardware NIC adds a
// microsecond or two, which deployments count in T); a soft-RNIC's part is its loop
// thread's. Where the links are faster than the loop (the two-host lab's 100 Gb/s), the
// loop is the bottleneck and sets the round trip: a probe's took 16.7 µs (median; p90
// 17.9 µs) during write_bw in the two-host lab, against the links' 4.3 µs. With T at
// the links' figure HPCC's window cap W = B·T holds a quarter of what the loop keeps in
// flight: the sender waits for ACKs each window and the loop idles through the links'
// delays (write_bw 17.5 against 20.2 Gb/s, docs/datapath.md). Topologies whose links a
// lab can fill (1–10 Gb/s, T of tens of microseconds) keep their derived T.
const RealTimeMinBaseRTT = 20 * time.Microsecond

// TopologyCC is the congestion control the soft-RNICs of a lab built from t run on the
// real-time clock, and the telemetry format its switches stamp: what a virtual-time
// twin of that lab runs.
func TopologyCC(t *topo.Topology) (rnic.CC, telemetry.Format, error) {
	format, err := telemetry.ParseFormat(t.Telemetry)
	if err != nil {
		return rnic.CC{}, "", err
	}
	cc, err := topologyCC(t, format, true)
	return cc, format, err
}

// RealTimeBaseRTT is HPCC's base RTT T in a lab of t on the real-time clock: BaseRTT,
// at least RealTimeMinBaseRTT.
func RealTimeBaseRTT(t *topo.Topology) time.Duration { return max(BaseRTT(t), RealTimeMinBaseRTT) }

// topologyCC is the devices' congestion control for the topology's choice: HPCC in
// the topology's mode (by default the draft's reference RoCEv2 mode, one
// telemetry-request probe per RTT), with the draft's parameters for the slowest link
// and the derived base RTT (at least RealTimeMinBaseRTT on the real-time clock).
func topologyCC(t *topo.Topology, format telemetry.Format, realTime bool) (rnic.CC, error) {
	mode, err := rnic.ParseCC(t.CongestionControl, t.HPCCMode)
	if err != nil {
		return rnic.CC{}, fmt.Errorf("lab: %w", err)
	}
	if mode == rnic.ModeNone || mode == rnic.ModeDCQCN {
		return rnic.CC{Mode: mode}, nil
	}
	if format == "" {
		return rnic.CC{}, fmt.Errorf("lab: congestion control hpcc needs telemetry (int, ioam, ifa or hpcc), the topology has none")
	}
	T := BaseRTT(t)
	if realTime {
		T = RealTimeBaseRTT(t)
	}
	p := hpcc.DraftParams(float64(slowestLink(t, "")), T, max(1, len(t.Hosts)-1))
	if format == telemetry.FormatHPCC {
		p.Wrap = hpcc.CompactWrap(1)
	}
	return rnic.CC{Mode: mode, Telemetry: format, HPCC: p}, nil
}

// BaseRTT is the round trip of an MTU-sized packet and a 100-byte ACK over d links,
// d the longest shortest path between two hosts: propagation both ways, and each
// packet serialized once per link.
func BaseRTT(t *topo.Topology) time.Duration {
	var delay time.Duration
	rate, mtu := uint64(0), 0
	for _, l := range t.Links {
		delay = max(delay, l.Delay)
		if rate == 0 || l.Rate < rate {
			rate = l.Rate
		}
		mtu = max(mtu, l.MTU)
	}
	if rate == 0 {
		return 0
	}
	d := time.Duration(t.Diameter())
	ser := func(n int) time.Duration { return time.Duration(uint64(n) * 8e9 / rate) }
	return 2*d*delay + d*(ser(mtu+18)+ser(100))
}
