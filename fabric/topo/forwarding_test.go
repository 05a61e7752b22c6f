package topo

import "testing"

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
