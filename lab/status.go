package lab

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/rocelab/rocelab/fabric/capture"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
)

// Status returns the lab's description with counters read on each node's loop.
func (l *Lab) Status() Status {
	rec, err := l.cfg.Store.Load(l.cfg.Name)
	st := Status{Name: l.cfg.Name, Running: true, Pid: os.Getpid(), Dir: l.Dir(), Topology: l.cfg.TopologyFile,
		Telemetry: l.cfg.Topology.Telemetry, CongestionControl: l.cfg.Topology.CongestionControl,
		Uptime: time.Since(l.started).Round(time.Millisecond).String()}
	if err == nil {
		st.Hosts = hostStatuses(rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i := range st.Hosts {
		h := l.Network.Host(st.Hosts[i].Name)
		if h == nil {
			continue
		}
		if svc, ok := l.services[h.Name].(countedService); ok {
			vs := svc.Stats()
			st.Hosts[i].Verbs = &vs
		}
		type hostCounters struct {
			rnic rnic.Stats
			link link.Stats
			qps  []QPStatus
			mc   []McastGroupStatus
		}
		ch := make(chan hostCounters, 1)
		h.Device.Do(func() {
			ch <- hostCounters{h.Device.Stats(), *h.Link.Stats(), qpStatuses(h.Device), mcastStatuses(h.Device)}
		})
		select {
		case c := <-ch:
			st.Hosts[i].RNIC, st.Hosts[i].Link, st.Hosts[i].QPs, st.Hosts[i].McastGroups = &c.rnic, &c.link, c.qps, c.mc
		case <-ctx.Done():
		}
		if h.Monitor != nil {
			st.Hosts[i].Capture = captureStatus(h.Monitor.Last())
		}
	}
	peers := Peers(l.cfg.Topology)
	for _, s := range l.Network.Switches {
		ch := make(chan []PortStatus, 1)
		l.inboxes[s.Name].Do(func() {
			var ps []PortStatus
			for i, p := range s.Switch.Ports() {
				ps = append(ps, PortStatus{Stats: p.Stats(), Link: *s.Links[i].Stats()})
			}
			ch <- ps
		})
		ss := SwitchStatus{Name: s.Name}
		select {
		case ps := <-ch:
			for i, p := range ps {
				pe := peers[s.Name][i]
				p.Port, p.Peer, p.Rate = fmt.Sprintf("%s:p%d", s.Name, i), pe.Name, topo.FormatRate(pe.Rate)
				if i < len(s.Monitors) {
					p.Capture = captureStatus(s.Monitors[i].Last())
				}
				ss.Ports = append(ss.Ports, p)
			}
		case <-ctx.Done():
		}
		st.Switches = append(st.Switches, ss)
	}
	st.Loops = loopStatuses(l.clk)
	st.Parts = l.partsStatus(false)
	return st
}

func newCounters() Counters {
	return Counters{Hosts: map[string]uint64{}, Received: map[string]uint64{}, Switches: map[string][]PortCounters{}}
}

// Counters reads the hosts' and switch ports' byte counters and queues on their loops
// (one task per node), for a sampler.
func (l *Lab) Counters() Counters {
	cs := newCounters()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range l.Network.Hosts {
		ch := make(chan rnic.Stats, 1)
		h.Device.Do(func() { ch <- h.Device.Stats() })
		select {
		case st := <-ch:
			cs.Hosts[h.Name], cs.Received[h.Name] = st.TxDataBytes, st.RxDataBytes
		case <-ctx.Done():
		}
	}
	type read struct {
		ports []PortCounters
		at    clock.Time
	}
	for _, s := range l.Network.Switches {
		ch := make(chan read, 1)
		l.inboxes[s.Name].Do(func() { ch <- read{portCounters(s), l.clk.Now()} })
		select {
		case r := <-ch:
			cs.Switches[s.Name], cs.TimeNs = r.ports, int64(r.at)
		case <-ctx.Done():
		}
	}
	return cs
}

// portCounters reads a switch's ports' queues and bytes sent, on its loop: what op
// "counters" and the recorder take of a switch.
func portCounters(s *network.Switch) []PortCounters {
	ports := make([]PortCounters, 0, len(s.Switch.Ports()))
	now := s.Loop.Now()
	for _, p := range s.Switch.Ports() {
		st := p.Stats()
		ports = append(ports, PortCounters{QLen: st.QLen, TxBytes: st.TxBytes, QueueArea: p.QueueArea(now)})
	}
	return ports
}

// StatusFromRecord describes a lab from its state file alone: what `rocelab status`
// shows of a lab whose process is gone (crashed: `rocelab clean` removes it).
func StatusFromRecord(store netns.Store, rec *netns.Lab) Status {
	return Status{Name: rec.Name, Running: rec.Running(), Pid: rec.Owner.PID, Dir: store.Dir(rec.Name), Hosts: hostStatuses(rec)}
}

func hostStatuses(rec *netns.Lab) []HostStatus {
	var out []HostStatus
	for _, h := range rec.Hosts {
		hs := HostStatus{Name: h.Name, Netns: h.Netns, Tap: h.Tap, MAC: h.MAC, Bridge: h.Bridge}
		if h.IPv4.IsValid() {
			hs.IPv4 = h.IPv4.Addr().String()
		}
		if h.IPv6.IsValid() {
			hs.IPv6 = h.IPv6.Addr().String()
		}
		out = append(out, hs)
	}
	return out
}

// Peer is the far end of a node's port and the link's rate.
type Peer struct {
	Name string
	Rate uint64
}

// Peers lists, per node, the far end of each port in port order: a switch's port i
// (s1:pi) is its i-th link in the topology. A replay of an experiment (web) names
// ports as the lab does through it.
func Peers(t *topo.Topology) map[string][]Peer {
	out := map[string][]Peer{}
	for _, lk := range t.Links {
		a, b := lk.Endpoints[0], lk.Endpoints[1]
		out[a] = append(out[a], Peer{b, lk.Rate})
		out[b] = append(out[b], Peer{a, lk.Rate})
	}
	return out
}

func captureStatus(s *capture.Session) *CaptureStatus {
	if s == nil {
		return nil
	}
	return &CaptureStatus{Running: s.Running(), Frames: s.Frames(), Dropped: s.Dropped(), Snaplen: s.Snaplen()}
}

// loopStatuses reads the clock's lateness counters.
func loopStatuses(clk *clock.Real) []LoopStatus {
	if clk == nil {
		return nil
	}
	var out []LoopStatus
	for _, x := range clk.Lateness() {
		out = append(out, LoopStatus{Loop: x.Loop, Timers: x.Timers(), LateP50US: x.QuantileUS(0.5),
			LateP99US: x.QuantileUS(0.99), LateBuckets: x.Buckets[:], LateSumUS: float64(x.Sum) / 1e3, MaxLagUS: float64(x.MaxLag) / 1e3})
	}
	return out
}

// qpStatuses reads d's queue pairs; it runs on the device's loop.
func qpStatuses(d *rnic.Device) []QPStatus {
	var out []QPStatus
	finite := func(v float64) *float64 {
		if math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	for _, x := range d.QPs() {
		rate, window := x.Rate()
		q := QPStatus{QPN: uint32(x.QPN()), State: x.State().String(), RateBps: finite(rate), WindowBytes: finite(window),
			InFlightBytes: x.InFlightBytes()}
		if st, ok := x.HPCC(); ok {
			q.HPCCU = &st.U
		}
		out = append(out, q)
	}
	return out
}

// countedService is a host service that counts its connections: the verbs service.
type countedService interface{ Stats() service.Stats }

// mcastStatuses reads d's multicast groups; it runs on the device's loop.
func mcastStatuses(d *rnic.Device) []McastGroupStatus {
	var out []McastGroupStatus
	for _, g := range d.McastGroups() {
		s := McastGroupStatus{GID: g.GID.Addr().String()}
		for _, q := range g.QPs {
			s.QPs = append(s.QPs, uint32(q))
		}
		out = append(out, s)
	}
	return out
}
