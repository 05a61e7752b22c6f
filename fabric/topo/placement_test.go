package topo

import (
	"maps"
	"strings"
	"testing"
)

// TestPlacement: placed nodes stay where they are put, unplaced ones go with their
// nearest placed neighbour, and the links between machines are the tunnels.
func TestPlacement(t *testing.T) {
	tp, err := Load("../../topologies/two-machines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"h1": "a", "h2": "a", "s1": "a", "h3": "b", "h4": "b", "s2": "b"}
	if got := tp.Placement(); !maps.Equal(got, want) {
		t.Errorf("placement %v, want %v", got, want)
	}
	if got := tp.Tunnels(); len(got) != 1 || got[0] != 4 || VNI(got[0]) != 5 {
		t.Errorf("tunnels %v, want link 4 (s1–s2, VNI 5)", got)
	}

	// Only the switches placed: each host follows its switch.
	tp.Hosts[0].Machine, tp.Hosts[3].Machine = "", ""
	if got := tp.Placement(); !maps.Equal(got, want) {
		t.Errorf("hosts unplaced: placement %v, want %v", got, want)
	}
	// Nothing placed: one part, on the first machine.
	for i := range tp.Hosts {
		tp.Hosts[i].Machine = ""
	}
	for i := range tp.Switches {
		tp.Switches[i].Machine = ""
	}
	for n, m := range tp.Placement() {
		if m != "a" {
			t.Errorf("nothing placed: %s on %q", n, m)
		}
	}
	if len(tp.Tunnels()) != 0 {
		t.Errorf("nothing placed: tunnels %v", tp.Tunnels())
	}
	// No machines: one unnamed part.
	one, err := Load("../../topologies/four-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for n, m := range one.Placement() {
		if m != "" {
			t.Errorf("no machines: %s on %q", n, m)
		}
	}
}

func TestPlacementErrors(t *testing.T) {
	base := `hosts:
  - {name: h1, ipv4: 10.0.0.1, machine: %s}
switches:
  - {name: s1}
links:
  - {endpoints: [h1, s1], rate: 1G}
`
	for _, c := range []struct{ machines, machine, want string }{
		{"", "a", `machine "a" is not among`},
		{"machines: [{name: a}, {name: a}]\n", "a", "name already used on line 1"},
		{"machines: [{name: Big_A}]\n", "Big_A", "want a DNS label"},
		{"machines: [{name: a, port: 4789}]\n", "a", `unknown field "port"`},
	} {
		_, err := Parse([]byte(c.machines + strings.Replace(base, "%s", c.machine, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.machines, err, c.want)
		}
	}
}
