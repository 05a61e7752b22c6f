package topo

import (
	"net"
	"slices"
	"strings"
)

// Limits of a topology. A host's auto-assigned MAC and a generator's addresses have room
// for 2^24 hosts; these bounds keep a topology to what a run can hold in memory and
// say so up front rather than after minutes of building.
const (
	MaxHosts    = 1 << 16
	MaxSwitches = 1 << 14
	MaxLinks    = 1 << 18
)

// Validate checks the topology as a whole and fills defaults: a link's MTU defaults to
// 1500, a host's MAC to 02:00:00:nn:nn:nn from its 1-based position. Errors name the
// line of the offending declaration.
func (t *Topology) Validate() error {
	if !slices.Contains(TelemetryFormats, t.Telemetry) {
		return errorf(0, "unknown telemetry format %q", t.Telemetry)
	}
	if !slices.Contains(CongestionControls, t.CongestionControl) {
		return errorf(0, "unknown congestion control %q", t.CongestionControl)
	}
	if t.HPCCMode == "" {
		t.HPCCMode = "probe"
	}
	if !slices.Contains(HPCCModes, t.HPCCMode) {
		return errorf(0, "unknown HPCC mode %q", t.HPCCMode)
	}
	if t.Retry == "" {
		t.Retry = "ibta"
	}
	if !slices.Contains(RetryReadings, t.Retry) {
		return errorf(0, "unknown retry reading %q", t.Retry)
	}
	if len(t.Hosts) == 0 {
		return errorf(0, "no hosts")
	}
	if len(t.Hosts) > MaxHosts || len(t.Switches) > MaxSwitches || len(t.Links) > MaxLinks {
		return errorf(0, "%d hosts, %d switches and %d links: a topology has at most %d hosts, %d switches and %d links",
			len(t.Hosts), len(t.Switches), len(t.Links), MaxHosts, MaxSwitches, MaxLinks)
	}
	lines := map[string]int{}
	declare := func(kind, name string, line int) error {
		if name == "" {
			return errorf(line, "%s without a name", kind)
		}
		if prev, dup := lines[name]; dup {
			return errorf(line, "%s %q: name already used on line %d", kind, name, prev)
		}
		lines[name] = line
		return nil
	}
	macs, ips := map[string]string{}, map[string]string{}
	for i := range t.Hosts {
		h := &t.Hosts[i]
		if err := declare("host", h.Name, h.Line); err != nil {
			return err
		}
		if !h.IPv4.IsValid() && !h.IPv6.IsValid() {
			return errorf(h.Line, "host %q has no address: give ipv4, ipv6 or both", h.Name)
		}
		if h.External != "" && h.MAC == nil {
			return errorf(h.Line, "external host %q needs its mac: the address of the device behind the TAP", h.Name)
		}
		if h.Bridge != "" && h.External != ExternalBridge {
			return errorf(h.Line, "host %q: bridge %q is only for external: bridge", h.Name, h.Bridge)
		}
		if h.External == ExternalBridge && h.Bridge == "" {
			h.Bridge = "br0"
		}
		if len(h.Bridge) > 15 || strings.ContainsAny(h.Bridge, "/ :") {
			return errorf(h.Line, "host %q: bridge %q is not a netdev name (at most 15 characters, no '/', ' ' or ':')", h.Name, h.Bridge)
		}
		if h.MAC == nil {
			h.MAC = net.HardwareAddr{0x02, 0, 0, byte((i + 1) >> 16), byte((i + 1) >> 8), byte(i + 1)}
		}
		if other, dup := macs[h.MAC.String()]; dup {
			return errorf(h.Line, "host %q: MAC %s already used by %q", h.Name, h.MAC, other)
		}
		macs[h.MAC.String()] = h.Name
		for _, a := range []string{h.IPv4.String(), h.IPv6.String()} {
			if other, dup := ips[a]; dup && a != "invalid IP" {
				return errorf(h.Line, "host %q: address %s already used by %q", h.Name, a, other)
			}
			ips[a] = h.Name
		}
	}
	for _, s := range t.Switches {
		if err := declare("switch", s.Name, s.Line); err != nil {
			return err
		}
		if e := s.ECN; e != nil && (e.KMax <= e.KMin) {
			return errorf(s.Line, "switch %q: ecn kmax %d must exceed kmin %d", s.Name, e.KMax, e.KMin)
		}
		if p := s.PFC; p != nil && (p.XOff <= 0 || p.XOn > p.XOff || len(p.Priorities) == 0) {
			return errorf(s.Line, "switch %q: pfc needs priorities and 0 ≤ xon ≤ xoff, xoff > 0", s.Name)
		}
	}
	isHost := map[string]bool{}
	for _, h := range t.Hosts {
		isHost[h.Name] = true
	}
	hostLinks := map[string]int{}
	for i := range t.Links {
		l := &t.Links[i]
		for _, e := range l.Endpoints {
			if _, ok := lines[e]; !ok {
				return errorf(l.Line, "link %s–%s: unknown node %q", l.Endpoints[0], l.Endpoints[1], e)
			}
			if isHost[e] {
				if hostLinks[e]++; hostLinks[e] > 1 {
					return errorf(l.Line, "host %q has a second link: a host has one port", e)
				}
			}
		}
		if l.Endpoints[0] == l.Endpoints[1] {
			return errorf(l.Line, "link joins %q to itself", l.Endpoints[0])
		}
		if isHost[l.Endpoints[0]] && isHost[l.Endpoints[1]] {
			return errorf(l.Line, "link %s–%s joins two hosts: put a switch between them", l.Endpoints[0], l.Endpoints[1])
		}
		if l.Rate == 0 {
			return errorf(l.Line, "link %s–%s has no rate", l.Endpoints[0], l.Endpoints[1])
		}
		if l.MTU == 0 {
			l.MTU = 1500
		}
		if l.MTU < 68 || l.MTU > 9000 {
			return errorf(l.Line, "link %s–%s: mtu %d outside [68, 9000]", l.Endpoints[0], l.Endpoints[1], l.MTU)
		}
		if err := l.Faults.Validate(); err != nil {
			return errorf(l.Line, "link %s–%s: faults: %v", l.Endpoints[0], l.Endpoints[1], err)
		}
	}
	for _, h := range t.Hosts {
		if hostLinks[h.Name] == 0 {
			return errorf(h.Line, "host %q is not connected", h.Name)
		}
	}
	if g := t.graph(); len(g.reach(0)) != len(g.names) {
		return errorf(0, "the topology is not connected")
	}
	return t.validatePlacement()
}
