package main

import (
	"fmt"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/roce"
)

// starFileFlags are the flags a star's topology file replaces in the incast and
// fairness scenarios: its links, congestion control and telemetry are the file's.
var starFileFlags = []string{"link-rate", "link-delay", "mtu", "cc", "mode", "telemetry"}

// starFromTopology sets cfg from a star topology, as `experiment --lab` reads a lab
// built from it: its first cfg.Senders hosts (all but the last when senders is not
// given) send to its last; the links' rate, delay and path MTU; its congestion control
// (network.TopologyCC: HPCC in the topology's mode, a probe per RTT by default, DCQCN or
// none) and telemetry; HPCC's base RTT T as the lab derives it (network.BaseRTT: the link MTU's
// frames, at least network.RealTimeMinBaseRTT: network.RealTimeBaseRTT) unless --base-rtt is given; the switch's
// buffer and RED marking where it sets them (fabric.SimECN for the links' rate
// otherwise, as a lab does). So the same file runs in a lab and,
// here, as its virtual-time twin. The incast's star runs every link alike, without
// PFC: a file that differs is refused with the reason.
func starFromTopology(t *topo.Topology, cfg *experiment.Config, sendersGiven, baseRTTGiven bool) error {
	if len(t.Switches) != 1 {
		return fmt.Errorf("a star has one switch, the topology has %d", len(t.Switches))
	}
	sw := t.Switches[0]
	if len(t.Hosts) < 2 {
		return fmt.Errorf("a star needs at least two hosts, the topology has %d", len(t.Hosts))
	}
	if len(t.Links) != len(t.Hosts) {
		return fmt.Errorf("a star links each host to the switch once: %d links for %d hosts", len(t.Links), len(t.Hosts))
	}
	first := t.Links[0]
	for i, h := range t.Hosts {
		if h.External != "" {
			return fmt.Errorf("host %s is external (%s): the virtual star has soft-RNICs only", h.Name, h.External)
		}
		l := t.Links[i]
		if !(l.Endpoints[0] == h.Name && l.Endpoints[1] == sw.Name || l.Endpoints[1] == h.Name && l.Endpoints[0] == sw.Name) {
			return fmt.Errorf("link %d (%s–%s) is not host %s's link to %s: list one link per host, in the hosts' order",
				i+1, l.Endpoints[0], l.Endpoints[1], h.Name, sw.Name)
		}
		if l.Rate != first.Rate || l.Delay != first.Delay || l.MTU != first.MTU {
			return fmt.Errorf("link %s–%s differs from %s–%s (%d bit/s, %v, MTU %d against %d bit/s, %v, MTU %d): the incast's star runs every link alike",
				l.Endpoints[0], l.Endpoints[1], first.Endpoints[0], first.Endpoints[1], l.Rate, l.Delay, l.MTU, first.Rate, first.Delay, first.MTU)
		}
		if l.Faults != (link.Faults{}) || l.Buffer > 0 {
			return fmt.Errorf("link %s–%s has faults or a buffer of its own, which the virtual star does not model", l.Endpoints[0], l.Endpoints[1])
		}
	}
	if sw.PFC != nil {
		return fmt.Errorf("switch %s has PFC, which the virtual star does not model", sw.Name)
	}
	switch {
	case !sendersGiven:
		cfg.Senders = len(t.Hosts) - 1
	case cfg.Senders > len(t.Hosts)-1:
		return fmt.Errorf("--senders %d: the topology has %d hosts, room for %d senders and a receiver", cfg.Senders, len(t.Hosts), len(t.Hosts)-1)
	}
	cfg.LinkRate, cfg.LinkDelay = first.Rate, first.Delay
	cfg.MTU = roce.MTUForLinkMTU(first.MTU)
	cc, format, err := network.TopologyCC(t)
	if err != nil {
		return err
	}
	cfg.CC, cfg.Telemetry = cc.Mode, format
	if !baseRTTGiven {
		cfg.BaseRTT = network.RealTimeBaseRTT(t)
	}
	if sw.Buffer > 0 {
		cfg.Buffer = sw.Buffer
	}
	cfg.ECN = fabric.SimECN(cfg.LinkRate)
	if e := sw.ECN; e != nil {
		cfg.ECN = fabric.ECN{Enabled: true, KMin: e.KMin, KMax: e.KMax, PMax: e.PMax}
	}
	return nil
}
