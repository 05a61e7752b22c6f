package lab

import (
	"fmt"
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
	// CC overrides the congestion control the topology names (its Mode non-empty);
	// its zero HPCC parameters are derived from the topology.
	CC rnic.CC
	// TxLookahead is every device's rnic.Config.TxLookahead (real-time labs batch).
	TxLookahead time.Duration
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
	// PayloadFree builds every device as rnic.Config.PayloadFree: a virtual-time
	// experiment that does not verify data moves none.
	PayloadFree bool
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
	// BaseRTT is the HPCC base RTT Build derived: the round trip of an MTU-sized
	// packet and its ACK over the longest shortest path between two hosts.
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
}

// Switch is one bridge-switch and its ports' capture points (nil without
// Options.Monitors), indexed by port number.
type Switch struct {
	Name     string
	Switch   *fabric.Switch
	Loop     clock.Loop
	Monitors []*capture.Monitor
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
	maxMTU := 0
	for _, l := range t.Links {
		maxMTU = max(maxMTU, l.MTU)
	}
	n := &Network{Topology: t, Pool: link.NewPool(maxMTU + 18)}
	n.BaseRTT = baseRTT(t)
	format, err := telemetryFormat(t.Telemetry)
	if err != nil {
		return nil, err
	}
	cc := opts.CC
	if cc.Mode == "" {
		cc, err = topologyCC(t, format)
		if err != nil {
			return nil, err
		}
	}

	var loops []clock.Loop
	newLoop := func(name string) clock.Loop {
		if opts.Threads <= 0 {
			return clk.NewLoop(name)
		}
		if len(loops) < opts.Threads {
			loops = append(loops, clk.NewLoop(fmt.Sprintf("loop%d", len(loops))))
			return loops[len(loops)-1]
		}
		l := loops[0]
		loops = append(loops[1:], l)
		return l
	}

	switches := map[string]*Switch{}
	var prio [64]uint8
	for i := range prio {
		prio[i] = DataPriority
	}
	for i, ts := range t.Switches {
		cfg := fabric.Config{ID: uint32(i + 1), Buffer: ts.Buffer, SharedBuffer: true, Pool: n.Pool,
			DSCPPriority: &prio, HashSeed: uint32(i+1) * 0x9e3779b9}
		if ts.ECN != nil {
			cfg.ECN = fabric.ECN{Enabled: true, KMin: ts.ECN.KMin, KMax: ts.ECN.KMax, PMax: ts.ECN.PMax}
		}
		if ts.PFC != nil {
			for _, p := range ts.PFC.Priorities {
				cfg.PFC.Lossless |= 1 << p
			}
			cfg.PFC.XOff, cfg.PFC.XOn, cfg.PFC.Headroom = ts.PFC.XOff, ts.PFC.XOn, ts.PFC.Headroom
		}
		if format != "" && cc.Mode != rnic.ModeNone && cc.Mode != rnic.ModeDCQCN {
			c, err := rnic.Codecs(format)
			if err != nil {
				return nil, err
			}
			cfg.Stamper = stamp.New(c)
		}
		loop := newLoop(ts.Name)
		sw, err := fabric.New(loop, cfg)
		if err != nil {
			return nil, fmt.Errorf("lab: switch %s: %w", ts.Name, err)
		}
		s := &Switch{Name: ts.Name, Switch: sw, Loop: loop}
		switches[ts.Name] = s
		n.Switches = append(n.Switches, s)
	}

	hostLinks := map[string]link.Endpoint{}
	for _, l := range t.Links {
		a, b, err := link.New(l.Config())
		if err != nil {
			return nil, fmt.Errorf("lab: link %s–%s: %w", l.Endpoints[0], l.Endpoints[1], err)
		}
		for i, end := range []link.Endpoint{a, b} {
			name := l.Endpoints[i]
			s, ok := switches[name]
			if !ok {
				hostLinks[name] = end
				continue
			}
			port := len(s.Switch.Ports())
			if opts.Monitors {
				m := capture.NewMonitor(end, fmt.Sprintf("%s:p%d", name, port))
				s.Monitors = append(s.Monitors, m)
				end = m
			}
			s.Switch.AddPort(end, portMAC(s.Switch.ID(), port))
		}
	}

	for name, tables := range t.Forwarding() {
		s := switches[name]
		for mac, ports := range tables.Routes {
			hw, err := parseMAC(mac)
			if err != nil {
				return nil, err
			}
			s.Switch.SetRoute(hw, ports)
		}
		s.Switch.SetFloodPorts(tables.Flood)
	}

	// One static neighbour table for every device: each host's GIDs to its MAC.
	var neighbours map[netip.Addr][6]byte
	if opts.StaticNeighbours {
		neighbours = make(map[netip.Addr][6]byte, 3*len(t.Hosts))
		for _, o := range t.Hosts {
			for _, a := range gidTable(o) {
				neighbours[a.Unmap()] = o.MAC6()
			}
		}
	}
	for _, th := range t.Hosts {
		ep, ok := hostLinks[th.Name]
		if !ok {
			return nil, fmt.Errorf("lab: host %s has no link", th.Name)
		}
		var mon *capture.Monitor
		if opts.Monitors {
			mon = capture.NewMonitor(ep, th.Name+":p0")
			ep = mon
		}
		if th.External != "" {
			if opts.External == nil {
				return nil, fmt.Errorf("lab: host %s is external (%s): only a lab with TAPs (rocelab up) can attach it", th.Name, th.External)
			}
			x := &External{Name: th.Name, Config: th, Link: ep, Loop: newLoop(th.Name), Monitor: mon, Pool: n.Pool}
			if err := opts.External(x); err != nil {
				return nil, fmt.Errorf("lab: external host %s: %w", th.Name, err)
			}
			n.Externals = append(n.Externals, x)
			continue
		}
		gids := gidTable(th)
		cfg := rnic.Config{Name: th.Name, MAC: th.MAC6(), GIDs: gids, Loop: newLoop(th.Name), Link: ep,
			Pool: n.Pool, CC: cc, TxLookahead: opts.TxLookahead, PayloadFree: opts.PayloadFree, Neighbours: neighbours}
		if opts.HostRelay != nil {
			cfg.Host = opts.HostRelay(th.Name)
		}
		d, err := rnic.Open(cfg)
		if err != nil {
			return nil, fmt.Errorf("lab: host %s: %w", th.Name, err)
		}
		n.Hosts = append(n.Hosts, &Host{Name: th.Name, Config: th, Device: d, Loop: cfg.Loop, Monitor: mon})
	}
	return n, nil
}

// gidTable is a host's GID table laid out as rxe lays it out, so that apps pass the
// same -g/-x index as against the kernel: 0 the link-local fe80:: address from the
// MAC's EUI-64, 1 the IPv4 address (::ffff:a.b.c.d), 2 the global IPv6 address. A host
// without IPv4 has its IPv6 address at 1.
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
	if _, err := fmt.Sscanf(s, "%02x:%02x:%02x:%02x:%02x:%02x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]); err != nil {
		return m, fmt.Errorf("lab: MAC %q: %w", s, err)
	}
	return m, nil
}

// telemetryFormat maps a topology's telemetry name to the codec format; "" for none.
func telemetryFormat(name string) (telemetry.Format, error) {
	switch name {
	case "int":
		return telemetry.FormatINTMD, nil
	case "ioam":
		return telemetry.FormatIOAM, nil
	case "ifa":
		return telemetry.FormatIFA, nil
	case "hpcc":
		return telemetry.FormatHPCC, nil
	case "none", "":
		return "", nil
	}
	return "", fmt.Errorf("lab: unknown telemetry format %q", name)
}

// topologyCC is the devices' congestion control for the topology's choice: HPCC runs
// the draft's reference RoCEv2 mode (one telemetry-request probe per RTT), with the
// draft's parameters for the slowest host link and the derived base RTT.
func topologyCC(t *topo.Topology, format telemetry.Format) (rnic.CC, error) {
	switch t.CongestionControl {
	case "none", "":
		return rnic.CC{Mode: rnic.ModeNone}, nil
	case "dcqcn":
		return rnic.CC{Mode: rnic.ModeDCQCN}, nil
	case "hpcc":
		if format == "" {
			return rnic.CC{}, fmt.Errorf("lab: congestion control hpcc needs telemetry (int, ioam, ifa or hpcc), the topology has none")
		}
		rate := uint64(0)
		for _, l := range t.Links {
			if rate == 0 || l.Rate < rate {
				rate = l.Rate
			}
		}
		p := hpcc.DraftParams(float64(rate), baseRTT(t), max(1, len(t.Hosts)-1))
		if format == telemetry.FormatHPCC {
			p.Wrap = hpcc.CompactWrap(1)
		}
		return rnic.CC{Mode: rnic.ModeHPCCProbe, Telemetry: format, HPCC: p}, nil
	}
	return rnic.CC{}, fmt.Errorf("lab: unknown congestion control %q", t.CongestionControl)
}

// baseRTT is the round trip of an MTU-sized packet and a 100-byte ACK over d links,
// d the longest shortest path between two hosts: propagation both ways, and each
// packet serialized once per link.
func baseRTT(t *topo.Topology) time.Duration {
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
