package topo

import (
	"strings"
	"testing"
)

// TestDiameter: the longest host-to-host path of each generated shape, in links.
func TestDiameter(t *testing.T) {
	p := Params{Rate: 100e9, Delay: 1000, MTU: 1500}
	star, _ := Star(4, p)
	bell, _ := Dumbbell(2, p)
	clos, _ := LeafSpine(4, 2, 2, p)
	tree, _ := FatTree(4, p)
	for _, c := range []struct {
		name string
		t    *Topology
		want int
	}{{"star", star, 2}, {"dumbbell", bell, 3}, {"leaf-spine", clos, 4}, {"fat-tree", tree, 6}} {
		if c.t == nil {
			t.Fatalf("%s: generator failed", c.name)
		}
		if got := c.t.Diameter(); got != c.want {
			t.Errorf("%s: diameter %d, want %d", c.name, got, c.want)
		}
	}
}

// TestExternalHosts: external hosts load, need their MAC, round-trip through YAML and
// get routes like any host.
func TestExternalHosts(t *testing.T) {
	src := `telemetry: int
congestion_control: hpcc
hosts:
  - {name: h1, ipv4: 10.0.0.1}
  - {name: rxe, ipv4: 10.0.0.100, ipv6: "fd00::100", mac: "52:54:0a:00:00:64", external: bridge}
  - {name: k1, ipv4: 10.0.0.50, mac: "02:00:00:00:00:50", external: kernel}
switches:
  - name: s1
links:
  - {endpoints: [h1, s1], rate: 10G, delay: 1us}
  - {endpoints: [rxe, s1], rate: 10G, delay: 1us}
  - {endpoints: [k1, s1], rate: 10G, delay: 1us}
`
	tp, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if h := tp.Hosts[1]; h.External != ExternalBridge || h.Bridge != "br0" {
		t.Errorf("rxe: %+v", h)
	}
	back, err := Parse(tp.YAML())
	if err != nil || back.Hosts[1].External != ExternalBridge || back.Hosts[2].External != ExternalKernel {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	if got := tp.Forwarding()["s1"].Routes["52:54:0a:00:00:64"]; len(got) != 1 || got[0] != 1 {
		t.Errorf("route to the external host: %v", got)
	}
	for _, bad := range []struct{ line, want string }{
		{`{name: x, ipv4: 10.0.0.9, external: bridge}`, "needs its mac"},
		{`{name: x, ipv4: 10.0.0.9, mac: "02:00:00:00:00:99", external: vm}`, "want kernel or bridge"},
		{`{name: x, ipv4: 10.0.0.9, mac: "02:00:00:00:00:99", bridge: br1}`, "only for external: bridge"},
	} {
		_, err := Parse([]byte("hosts:\n  - " + bad.line + "\nswitches:\n  - name: s1\nlinks:\n  - {endpoints: [x, s1], rate: 10G, delay: 1us}\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error saying %q", bad.line, err, bad.want)
		}
	}
}
