// Package fabric models the switches of a lab: bridge-switches whose egress ports queue,
// schedule, mark, pause and stamp telemetry exactly, in model time.
//
// The pipeline of one frame through a switch:
//
//  1. A port's link delivers a batch of frames (Receive) on the switch's loop.
//  2. Parse reads L2/L3/L4 basics; PFC frames pause or resume the port's egress and
//     end here; malformed frames are counted and dropped.
//  3. Classification: the 802.1p priority is the VLAN PCP if tagged, else looked up
//     from the DSCP (Config.DSCPPriority).
//  4. Forwarding by destination MAC: the FIB's ECMP set (one member chosen by the flow
//     hash), flooding along the spanning tree for broadcast, multicast and unknown
//     destinations; unknown source MACs are learned.
//  5. Admission: lossless priorities (PFC) count bytes per ingress port and priority,
//     pausing the upstream at XOFF and dropping only past the headroom; other traffic
//     is tail-dropped at the buffer limit (shared by the switch or per port).
//  6. Egress scheduling: strict priority between the port's eight queues, FIFO within
//     one, serialization at the port's rate. Departure times are computed, not
//     timer-driven: a timer only wakes the port when its next frame is due.
//  7. At dequeue: RED ECN marking from the queue's length, then telemetry stamping
//     (Stamper) with the model's exact time, queue length and byte counter.
//  8. The port hands its departed frames to the link in one batch.
package fabric

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
)

// A SignalStamper is a Stamper that can tell from a frame's located headers whether
// the frame shows its format's request signal at all (stamp.Stamper can: a DSCP, an
// IP protocol or an IPv6 Hop-by-Hop header). The switch asks it when the frame
// arrives, its headers in the caches, and does not call Stamp at dequeue for a frame
// without the signal (link.Frame.Unsignalled): on a fat tree half the frames (ACKs and
// their echoes) and, with probe-per-RTT telemetry, nearly all. MayStamp false must
// mean that Stamp would report false and no error for the frame as it is; a frame
// whose headers contradict themselves is not asked about, and goes to Stamp. A frame
// with the signal gets its IP length and TTL (link.Frame.IPLen, TTL) for Stamp.
type SignalStamper interface {
	Stamper
	MayStamp(frame []byte, l *roce.Layout) bool
}

// Stamper pushes one hop of in-band telemetry into frames that request it, in one
// format (INT-MD, IOAM, IFA, HPCC compact). The switch calls it at dequeue for every
// frame it transmits (but those a SignalStamper turned away when they arrived), after
// ECN marking, on the switch's loop.
type Stamper interface {
	// Stamp inspects f and, if f requests telemetry in this format, records hop in it
	// in place and reports true. It must leave f untouched and report false for a
	// frame that does not request telemetry, or whose hop budget is exhausted (after
	// setting the format's overflow flag, if it has one). It may grow f with
	// f.Grow — frames have at least link.Headroom bytes before and link.Tailroom
	// bytes after them — and must then fix every length and checksum it changes
	// (IP total/payload length, IPv4 header checksum, UDP length). An error means
	// the hop could not be recorded (malformed telemetry, a value the format cannot
	// carry, no room): the switch counts it in PortStats.StampErrors and forwards f
	// all the same, so Stamp must leave f a whole frame — untouched but for the
	// format's error flag, if it has one. Stamp must not retain f, allocate or panic,
	// whatever f holds: any host can send any frame.
	Stamp(f *link.Frame, hop hpcc.Hop) (stamped bool, err error)
}

// MAC is an Ethernet address.
type MAC [6]byte

// String formats m as aa:bb:cc:dd:ee:ff.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// ECN configures RED marking (as DCQCN switches do): a frame leaving a queue holding q
// bytes is marked with probability 0 below KMin, PMax·(q−KMin)/(KMax−KMin) between,
// and 1 from KMax on. Only ECN-capable frames are marked; none is dropped by RED.
type ECN struct {
	Enabled    bool
	KMin, KMax int
	PMax       float64
}

// SimECN is the HPCC simulator's RED marking for a link of rate bit/s (its run.py's
// KMIN_MAP, KMAX_MAP and PMAX_MAP): K_min 100 KB and K_max 400 KB per 25 Gb/s,
// P_max 0.2; at 100 Gb/s 400 KB and 1600 KB, at 1 Gb/s 4 KB and 16 KB.
func SimECN(rate uint64) ECN {
	scale := float64(rate) / 25e9
	return ECN{Enabled: true, KMin: int(100_000 * scale), KMax: int(400_000 * scale), PMax: 0.2}
}

// PFC configures IEEE 802.1Qbb priority flow control. Bytes are counted per ingress
// port and priority: reaching XOff pauses the upstream for that priority, falling to
// XOn resumes it; a frame arriving beyond XOff+Headroom (in flight while the pause
// travelled) is dropped and counted. Headroom is reserved outside the shared buffer.
type PFC struct {
	// Lossless is a bit mask of the priorities PFC protects; 0 disables PFC.
	Lossless          uint8
	XOff, XOn         int
	Headroom          int
	PauseQuanta       uint16 // quanta (512 bit times) per XOFF; 0 means 0xFFFF
	DisableRefreshing bool   // do not re-send XOFF while the queue stays above XOn
}

// Config configures a switch.
type Config struct {
	// ID is the switch ID reported in telemetry.
	ID uint32
	// Buffer is the packet buffer in bytes: one pool shared by every egress port when
	// SharedBuffer is set, else that much per egress port. 0 means unlimited.
	Buffer       int
	SharedBuffer bool
	// DSCPPriority maps a DSCP to an 802.1p priority for untagged IP frames; nil means
	// the DSCP's class selector (DSCP >> 3): CS6 (48, CNPs) → 6, AF31 (26, RoCE data)
	// → 3, best effort → 0. Tagged frames use their PCP.
	DSCPPriority *[64]uint8
	ECN          ECN
	PFC          PFC
	// Stamper stamps telemetry at dequeue; nil stamps nothing.
	Stamper Stamper
	// HashSeed perturbs the ECMP hash (different per switch to avoid polarization).
	HashSeed uint32
	// Pool supplies the frames the switch creates (PFC frames, flood copies).
	Pool *link.Pool
	// OnPanic hears the switch's first contained panic: a frame whose handling (or
	// stamping) panicked was dropped and counted in its port's Panics, and the switch
	// went on. Later panics are only counted. nil: counted only.
	OnPanic func(v any, stack []byte)
}

// Switch is a bridge-switch. All its methods run on its loop (or during setup).
type Switch struct {
	merge link.Merge // its ports' link ends: a late loop hands their frames over in arrival order
	cfg   Config
	// signalled is the Stamper, if it can tell which frames it may stamp.
	signalled SignalStamper
	loop      clock.Loop
	ports     []*Port
	fib       fib      // the index of each address's route in routes
	routes    []route  // the distinct routes (routeIndex)
	tree      []uint16 // flood ports; nil floods every port
	used      int      // shared buffer bytes in use
	dirty     []*Port  // ports with frames to hand to their link
	// active has a bit per port that queued or sent a frame since SampleChanges last
	// found it empty: the only ports whose sample can have changed.
	active  []uint64
	hdr     Headers // the frame being received
	markHdr Headers // the frame being ECN-marked at dequeue, possibly meanwhile
	outs    []uint16
	dscp    [64]uint8
	ingBuf  [][8]int // bytes held per ingress port and priority (PFC accounting)
	panics  int      // contained panics, all ports
}

// panicked counts a contained panic and reports the first one (Config.OnPanic).
func (s *Switch) panicked(v any, stack []byte) {
	if s.panics++; s.panics == 1 && s.cfg.OnPanic != nil {
		s.cfg.OnPanic(v, stack)
	}
}

type route struct {
	ports   []uint16
	learned bool
}

// routeIndex returns the index in s.routes of the route to ports, adding it if it is
// new. A switch has few distinct routes (a port each, its ECMP sets) for thousands of
// addresses: the FIB maps an address to the index of its route, 16 bytes an entry
// instead of 40 (the 1,024-host fat tree has 320 tables of 1,024 entries, each looked
// up twice per frame), and the routes themselves stay in the caches.
func (s *Switch) routeIndex(ports []uint16, learned bool) uint32 {
	for i, r := range s.routes {
		if r.learned == learned && slices.Equal(r.ports, ports) {
			return uint32(i)
		}
	}
	s.routes = append(s.routes, route{ports: slices.Clone(ports), learned: learned})
	return uint32(len(s.routes) - 1)
}

// New returns a switch running on loop.
func New(loop clock.Loop, cfg Config) (*Switch, error) {
	if cfg.Pool == nil {
		return nil, errors.New("fabric: switch needs a frame pool")
	}
	if p := cfg.PFC; p.Lossless != 0 && (p.XOff <= 0 || p.XOn < 0 || p.XOn > p.XOff || p.Headroom < 0) {
		return nil, fmt.Errorf("fabric: PFC thresholds XOff %d, XOn %d, headroom %d", p.XOff, p.XOn, p.Headroom)
	}
	if e := cfg.ECN; e.Enabled && (e.KMin < 0 || e.KMax <= e.KMin || e.PMax < 0 || e.PMax > 1) {
		return nil, fmt.Errorf("fabric: RED KMin %d, KMax %d, PMax %v", e.KMin, e.KMax, e.PMax)
	}
	if cfg.PFC.PauseQuanta == 0 {
		cfg.PFC.PauseQuanta = 0xFFFF
	}
	s := &Switch{cfg: cfg, loop: loop}
	s.signalled, _ = cfg.Stamper.(SignalStamper)
	if cfg.DSCPPriority != nil {
		s.dscp = *cfg.DSCPPriority
	} else {
		for d := range s.dscp {
			s.dscp[d] = uint8(d >> 3)
		}
	}
	return s, nil
}

// ID returns the switch ID.
func (s *Switch) ID() uint32 { return s.cfg.ID }

// AddPort attaches the switch to a link endpoint as its next port and returns the port.
// Ports are numbered from 0 in the order they are added; telemetry reports that number.
func (s *Switch) AddPort(ep link.Endpoint, mac MAC) *Port {
	p := &Port{sw: s, ep: ep, index: uint16(len(s.ports)), mac: mac, rate: ep.Rate()}
	p.timer = s.loop.NewTimer(p.wake)
	s.ports = append(s.ports, p)
	if int(p.index)/64 == len(s.active) {
		s.active = append(s.active, 0)
	}
	s.ingBuf = append(s.ingBuf, [8]int{})
	ep.Attach(s.loop, p)
	s.merge.Add(ep) // links with faults or test doubles deliver on their own
	return p
}

// Ports returns the switch's ports, indexed by port number.
func (s *Switch) Ports() []*Port { return s.ports }

// SetRoute installs the ECMP set of ports towards dst, replacing any learned entry.
func (s *Switch) SetRoute(dst MAC, ports []uint16) {
	s.fib.set(dst, s.routeIndex(ports, false))
}

// SetFloodPorts sets the ports on the spanning tree; broadcast, multicast and unknown
// destinations are flooded on them (except the ingress port).
func (s *Switch) SetFloodPorts(ports []uint16) {
	s.tree = append([]uint16{}, ports...)
}

// receive runs one frame through steps 2–5 of the pipeline.
func (s *Switch) receive(in *Port, f *link.Frame) {
	h := &s.hdr
	b := f.Bytes()
	// MAC control other than PFC (802.3x PAUSE) is not modelled: dropped like a
	// malformed frame, and counted once (it used to count as received and as an error).
	if err := h.Parse(b); err != nil || h.EtherType == roce.EtherTypeMACControl && !h.PFC {
		in.stats.RxErrors++
		f.Release()
		return
	}
	in.stats.RxFrames++
	in.stats.RxBytes += uint64(f.Len())
	if h.PFC {
		in.pause(f.Time, h.PFCEnable, &h.PFCQuanta)
		in.stats.PauseRcvd++
		f.Release()
		return
	}
	f.InPort = in.index
	f.Unsignalled, f.IPLen = false, 0
	if s.signalled != nil && h.located {
		if s.signalled.MayStamp(b, &h.layout) {
			f.IPLen, f.TTL = uint16(h.layout.End-h.layout.L3), h.layout.TTL(b)
		} else {
			f.Unsignalled = true
		}
	}
	switch {
	case h.VLAN:
		f.Priority = h.PCP
	case h.L3 != 0:
		f.Priority = s.dscp[h.DSCP]
	default:
		f.Priority = 0
	}
	if h.Src[0]&1 == 0 {
		if i, ok := s.fib.get(h.Src); !ok || (s.routes[i].learned && s.routes[i].ports[0] != in.index) {
			s.fib.learn(h.Src, s.routeIndex([]uint16{in.index}, true))
		}
	}
	s.outs = s.outs[:0]
	if i, ok := s.fib.get(h.Dst); ok && h.Dst[0]&1 == 0 {
		r := &s.routes[i]
		out := r.ports[0]
		if len(r.ports) > 1 {
			out = r.ports[h.FlowHash(b, s.cfg.HashSeed)%uint32(len(r.ports))]
		}
		if out == in.index {
			in.stats.Filtered++ // the destination is behind the port it came from
			f.Release()
			return
		}
		s.outs = append(s.outs, out)
	} else {
		s.flood(in.index)
	}
	for i, out := range s.outs {
		g := f
		if i < len(s.outs)-1 {
			g = f.Clone()
		}
		s.ports[out].enqueue(g)
	}
	if len(s.outs) == 0 {
		f.Release()
	}
}

func (s *Switch) flood(in uint16) {
	if s.tree == nil {
		for _, p := range s.ports {
			if p.index != in {
				s.outs = append(s.outs, p.index)
			}
		}
		return
	}
	onTree := false
	for _, p := range s.tree {
		if p == in {
			onTree = true
		}
	}
	if !onTree { // a frame from off the tree would loop: learning still happened
		return
	}
	for _, p := range s.tree {
		if p != in {
			s.outs = append(s.outs, p)
		}
	}
}

// flush hands every port's departed frames to its link.
func (s *Switch) flush() {
	for _, p := range s.dirty {
		p.flush()
	}
	link.Forget(s.dirty)
	s.dirty = s.dirty[:0]
}
