package lab

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/lab/tunnel"
	"github.com/rocelab/rocelab/network"
)

// A lab over several machines runs as parts, one per machine (topo.Topology.Machines,
// docs/multi-machine.md): each part is a lab process with its machine's hosts and
// switches, and its ends of the links to other machines as VXLAN tunnels (package
// tunnel). Parts reach each other over an authenticated control channel; through it
// `status` on any machine shows every part's nodes and `down` removes every part.

// PartsStatus is what a part of a lab over several machines reports besides its nodes.
type PartsStatus struct {
	// Machine is the part this status was read from.
	Machine string `json:"machine"`
	// Peers are the other parts as this one sees them: up, waiting or gone (since when).
	Peers []tunnel.PeerStatus `json:"peers"`
	// Tunnels are this part's ends of the links to other machines.
	Tunnels []TunnelStatus `json:"tunnels,omitempty"`
	// Datagrams and connections the part refused on the underlay ports.
	Malformed     uint64 `json:"malformed_datagrams"`
	UnknownVNI    uint64 `json:"unknown_vni_datagrams"`
	UnknownSource uint64 `json:"unknown_source_datagrams"`
	RefusedConns  uint64 `json:"refused_control_connections"`
	// Remote are the other parts' own statuses, read through the control channel
	// (only in the status of the part asked).
	Remote []Status `json:"remote,omitempty"`
}

// TunnelStatus is one tunnel end's underlay counters (the model's are its switch
// port's Link).
type TunnelStatus struct {
	Port            string  `json:"port"`
	VNI             uint32  `json:"vni"`
	Peer            string  `json:"peer_machine"`
	DeclaredDelayUS float64 `json:"declared_delay_us"`
	Sent            uint64  `json:"sent"`
	SendErrors      uint64  `json:"send_errors"`
	Received        uint64  `json:"received"`
	UnderlayLost    uint64  `json:"underlay_lost"`
	UnderlayReorder uint64  `json:"underlay_reordered"`
	// Late counts frames the underlay delivered after the model's arrival;
	// MeanLateUS is by how much on average: the underlay's delay beyond the declared.
	Late       uint64  `json:"late"`
	MeanLateUS float64 `json:"mean_late_us"`
}

// startPart prepares this machine's part: the tunnel endpoints network.Build asks for.
func (l *Lab) startPart(opts *network.Options) error {
	cfg, t := l.cfg, l.cfg.Topology
	if len(t.Machines) == 0 {
		if cfg.Machine != "" {
			return fmt.Errorf("lab: --machine %s: the topology places no node on machines", cfg.Machine)
		}
		return nil
	}
	if cfg.Machine == "" {
		var names []string
		for _, m := range t.Machines {
			names = append(names, m.Name)
		}
		return fmt.Errorf("lab: the topology runs on machines %v: start each one's part with --machine NAME", names)
	}
	p, err := tunnel.New(tunnel.Config{Lab: cfg.Name, Machine: cfg.Machine, Topology: t, Peers: cfg.Peers,
		Secret: cfg.Secret, Listen: cfg.Listen, Handle: l.handlePeer, Exec: cfg.RemoteExec,
		Log: l.log.With(zap.String("machine", cfg.Machine))})
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.part = p
	opts.Machine = cfg.Machine
	opts.Tunnel = func(i int, peer string) (link.Endpoint, error) { return p.Tunnel(i, peer) }
	return nil
}

// handlePeer answers another part's request.
func (l *Lab) handlePeer(op string, _ json.RawMessage) (json.RawMessage, error) {
	switch op {
	case "status":
		st := l.Status()
		return json.Marshal(st)
	case "down":
		if l.cfg.OnPeerDown == nil {
			return nil, fmt.Errorf("part %s cannot remove itself (no OnPeerDown): run rocelab down there", l.cfg.Machine)
		}
		go l.cfg.OnPeerDown() // after the answer: it stops this process
		return nil, nil
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

// partsStatus is this part's view of the others; with remote, their statuses too.
func (l *Lab) partsStatus(remote bool) *PartsStatus {
	p := l.part
	if p == nil {
		return nil
	}
	ps := &PartsStatus{Machine: l.cfg.Machine, Peers: p.Peers(), Malformed: p.Malformed.Load(),
		UnknownVNI: p.UnknownVNI.Load(), UnknownSource: p.UnknownSource.Load(), RefusedConns: p.Refused.Load()}
	for _, s := range l.Network.Switches {
		for i, ep := range s.Links {
			tn, ok := ep.(*tunnel.Tunnel)
			if !ok {
				continue
			}
			u := tn.Underlay()
			ts := TunnelStatus{Port: fmt.Sprintf("%s:p%d", s.Name, i), VNI: tn.VNI, Peer: tn.Peer,
				DeclaredDelayUS: float64(tn.Delay()) / 1e3, Sent: u.Sent.Load(), SendErrors: u.SendErrors.Load(),
				Received: u.Received.Load(), UnderlayLost: u.UnderlayLost.Load(), UnderlayReorder: u.UnderlayReordered.Load(),
				Late: u.Late.Load()}
			if ts.Late > 0 {
				ts.MeanLateUS = float64(u.LateNs.Load()) / float64(ts.Late) / 1e3
			}
			ps.Tunnels = append(ps.Tunnels, ts)
		}
	}
	if remote {
		for _, name := range p.Connected() {
			m, err := p.Request(name, tunnel.Message{Op: "status"}, 5*time.Second)
			if err != nil {
				continue
			}
			var st Status
			if json.Unmarshal(m.Body, &st) == nil {
				ps.Remote = append(ps.Remote, st)
			}
		}
	}
	return ps
}

// DownParts tells every other part to remove itself, and returns the machines told
// and those that could not be (gone or never reached: remove those with rocelab down
// or clean on their machine).
func (l *Lab) DownParts() (told, unreachable []string) {
	if l.part == nil {
		return nil, nil
	}
	for _, ps := range l.part.Peers() {
		if _, err := l.part.Request(ps.Machine, tunnel.Message{Op: "down"}, 5*time.Second); err != nil {
			unreachable = append(unreachable, ps.Machine)
			continue
		}
		told = append(told, ps.Machine)
	}
	return told, unreachable
}

// StatusOfParts is Status with, in a lab over several machines, the other parts'
// statuses read through the control channel (PartsStatus.Remote).
func (l *Lab) StatusOfParts() Status {
	st := l.Status()
	st.Parts = l.partsStatus(true)
	return st
}

// WholeLab returns st with the other parts' hosts, switches and loops (st.Parts.Remote)
// among its own, each loop named after its machine ("b/loop0"): the lab as one, for
// what draws or exports every node (the web view, metrics). A status without parts is
// returned as it is.
func (st Status) WholeLab() Status {
	if st.Parts == nil || len(st.Parts.Remote) == 0 {
		return st
	}
	whole := st
	whole.Hosts = slices.Clone(st.Hosts)
	whole.Switches = slices.Clone(st.Switches)
	whole.Loops = nil
	for _, lp := range st.Loops {
		lp.Loop = st.Parts.Machine + "/" + lp.Loop
		whole.Loops = append(whole.Loops, lp)
	}
	for _, r := range st.Parts.Remote {
		machine := "?"
		if r.Parts != nil {
			machine = r.Parts.Machine
		}
		whole.Hosts = append(whole.Hosts, r.Hosts...)
		whole.Switches = append(whole.Switches, r.Switches...)
		for _, lp := range r.Loops {
			lp.Loop = machine + "/" + lp.Loop
			whole.Loops = append(whole.Loops, lp)
		}
	}
	return whole
}
