package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/netns"
)

// TestCleanTwoStateDirs: clean and its --dry-run hints never touch, nor suggest
// removing, what a live lab of another state directory uses, nor a namespace with
// live processes. Lab A runs under store 1. Under store 2, a stale record of a crashed
// lab of the same name claims A's namespaces; under store 3 nothing is recorded, and
// a namespace named like rocelab's has a process inside.
func TestCleanTwoStateDirs(t *testing.T) {
	c1 := newCLI(t)
	c2 := &cli{t: t, bin: c1.bin, store: netns.Store{Root: t.TempDir()}}
	c3 := &cli{t: t, bin: c1.bin, store: netns.Store{Root: t.TempDir()}}
	name := labName("cl")
	c1.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	defer c1.run("down", name)

	// Store 2: A's record with a dead owner, as a crash under another state
	// directory would leave it once A took the names.
	rec, err := c1.store.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	rec.Owner, rec.Processes, rec.Sockets = netns.Process{}, nil, nil
	if err := c2.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	// Store 3 records nothing; this namespace has a process inside and no lab.
	busy := netns.NamespaceName(name, "busy")
	if err := netns.CreateNamespace(busy); err != nil {
		t.Fatal(err)
	}
	defer netns.DeleteNamespace(busy)
	sleeper := exec.Command("sleep", "300")
	if err := netns.StartIn(busy, sleeper); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()

	for _, c := range []*cli{c2, c3} {
		for _, args := range [][]string{{"clean", "--dry-run"}, {"clean"}} {
			out := c.run(args...)
			t.Logf("%s under store %s:\n%s", strings.Join(args, " "), c.store.Root, out)
			for _, ns := range append(namespacesOf(t, name), busy) {
				if strings.Contains(out, "ip netns delete "+ns) || strings.Contains(out, "namespace "+ns+"\n") {
					t.Errorf("%s suggested or did removing %s, which a live lab or process uses:\n%s", args[0], ns, out)
				}
				if !strings.Contains(out, "namespace "+ns+" alone: in use by pid") {
					t.Errorf("%s does not say %s is in use:\n%s", args[0], ns, out)
				}
			}
		}
	}
	if got := namespacesOf(t, name); len(got) != 3 {
		t.Errorf("namespaces %v, want lab %s's two and %s", got, name, busy)
	}
	c1.run("exec", "--lab", name, "h1", "--", "ip", "-br", "link") // lab A's namespace still works
	if _, err := os.Stat(c2.store.Dir(name)); err != nil {
		t.Errorf("store 2's record was removed although its namespaces are in use: %v", err)
	}

	// Once nothing uses it, the namespace no one records gets its hint.
	sleeper.Process.Kill()
	sleeper.Wait()
	if out := c3.run("clean", "--dry-run"); !strings.Contains(out, "ip netns delete "+busy) {
		t.Errorf("an unused unrecorded namespace gets no hint:\n%s", out)
	}
}
