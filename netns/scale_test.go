package netns

import (
	"testing"
	"time"
)

// TestSixteenHostsUpAndDown builds a 16-host lab (namespace, TAP, addresses and 30
// static neighbours each), checks one host from inside, and removes it with Down,
// logging how long each step took. (Closing a TAP unregisters the netdev, which waits
// for an RCU grace period in the kernel: that, not Down, dominates teardown.)
func TestSixteenHostsUpAndDown(t *testing.T) {
	needRoot(t)
	const n = 16
	store, c, lab := newLab(t, self(t))
	start := time.Now()
	taps := make([]*TAP, n)
	for i := 1; i <= n; i++ {
		cfg := hostConfig(i)
		cfg.Neighbours = neighbours(i, n)
		taps[i-1] = addHost(t, store, lab, cfg)
	}
	up := time.Since(start)
	last := hostConfig(n)
	last.Neighbours = neighbours(n, n)
	checkInside(t, NamespaceName(lab, last.Name), last)

	start = time.Now()
	for _, tap := range taps {
		tap.Close()
	}
	closeTaps := time.Since(start)
	start = time.Now()
	rep, err := c.Down(lab)
	if err != nil {
		t.Fatal(err)
	}
	down := time.Since(start)
	if len(rep.Removed) != n+1 {
		t.Errorf("Down removed %d objects, want %d namespaces and the state", len(rep.Removed), n)
	}
	assertNoNamespaces(t, Prefix+lab+"-")
	t.Logf("%d hosts: up %v (%v per host); TAPs closed in %v, Down in %v (%v per host)",
		n, up, up/n, closeTaps, down, down/n)
}
