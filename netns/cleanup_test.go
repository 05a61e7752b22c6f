package netns

import (
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestDownRemovesOnlyItsOwn: Down removes the lab's namespaces and state while a
// namespace named like rocelab's, but recorded nowhere, survives it and is reported by
// Clean as foreign; a record naming a namespace without rocelab's prefix is refused.
func TestDownRemovesOnlyItsOwn(t *testing.T) {
	needRoot(t)
	store, c, lab := newLab(t, self(t))
	foreign := NamespaceName(uniqueName("foreign"), "x")
	createForeign(t, foreign)
	unprefixed := "not" + NamespaceName(lab, "h9")
	createForeign(t, unprefixed)
	for i := 1; i <= 2; i++ {
		addHost(t, store, lab, hostConfig(i)).Close() // the TAP goes; the host stays
	}

	// Clean leaves a running lab alone and reports the unrecorded namespace.
	rep, err := c.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Running, lab) || !slices.Contains(rep.Foreign, foreign) || len(rep.Removed) != 0 {
		t.Errorf("Clean with a running lab = %+v; want it running, %s foreign, nothing removed", rep, foreign)
	}

	// A tampered record naming a namespace without our prefix, or a file that is not a
	// socket, must not reach them.
	notSocket := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(lab, func(l *Lab) error {
		l.Hosts = append(l.Hosts, Host{Name: "h9", Netns: unprefixed})
		l.Sockets = append(l.Sockets, notSocket)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Down(lab); err == nil {
		t.Error("Down accepted a namespace without rocelab's prefix and a file that is no socket")
	}
	for _, path := range []string{NamespacePath(unprefixed), notSocket} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("Down touched %s: %v", path, err)
		}
	}
	if err := store.Update(lab, func(l *Lab) error {
		l.Hosts = slices.DeleteFunc(l.Hosts, func(h Host) bool { return h.Netns == unprefixed })
		l.Sockets = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	rep, err = c.Down(lab)
	if err != nil {
		t.Fatal(err)
	}
	// h1 and h2 went in the refused Down already; what is left is the state.
	if want := []Removal{{Lab: lab, Kind: "state", Name: store.Dir(lab)}}; !slices.Equal(rep.Removed, want) {
		t.Errorf("Down removed %v, want %v", rep.Removed, want)
	}
	assertNoNamespaces(t, Prefix+lab+"-")
	for _, ns := range []string{foreign, unprefixed} {
		if _, err := os.Stat(NamespacePath(ns)); err != nil {
			t.Errorf("Down touched %s: %v", ns, err)
		}
	}
	if _, err := os.Stat(store.Dir(lab)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir left behind: %v", err)
	}
}

// TestCleanRemovesCrashedLab: a lab whose process is gone (here: its pid is ours but
// its start time is not, as after pid reuse) is removed by Clean with its namespaces,
// the app that `rocelab exec` recorded and an unrecorded process inside a namespace.
// A dry run first reports the same and changes nothing.
func TestCleanRemovesCrashedLab(t *testing.T) {
	needRoot(t)
	me := self(t)
	store, c, lab := newLab(t, Process{PID: me.PID, StartTime: me.StartTime + 1})
	for i := 1; i <= 2; i++ {
		addHost(t, store, lab, hostConfig(i)).Close() // the crashed lab process's fds are closed
	}
	recorded := exec.Command("sleep", "30")
	if err := store.Exec(lab, "h1", recorded); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recorded.Process.Kill(); recorded.Wait() })
	stray := exec.Command("sleep", "30")
	if err := StartIn(NamespaceName(lab, "h2"), stray); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stray.Process.Kill(); stray.Wait() })

	sock := listenUnix(t, filepath.Join(t.TempDir(), "control.sock"))
	if err := store.Update(lab, func(l *Lab) error {
		l.Sockets = append(l.Sockets, sock)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	dry := *c
	dry.DryRun = true
	planned, err := dry.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := store.Load(lab); err != nil || len(l.Hosts) != 2 || len(l.Processes) != 1 {
		t.Fatalf("dry run changed the lab: %+v, %v", l, err)
	}

	start := time.Now()
	rep, err := c.Clean()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Clean of a crashed 2-host lab with 2 processes: %v", time.Since(start))
	if !slices.Equal(planned.Removed, rep.Removed) {
		t.Errorf("dry run planned %v, Clean removed %v", planned.Removed, rep.Removed)
	}
	want := map[string]int{"process": 2, "namespace": 2, "socket": 1, "state": 1}
	got := map[string]int{}
	for _, r := range rep.Removed {
		got[r.Kind]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("Clean removed %v, want %v", rep.Removed, want)
	}
	for _, cmd := range []*exec.Cmd{recorded, stray} {
		if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("%v ended with %v, want SIGTERM", cmd.Args, err)
		}
	}
	assertNoNamespaces(t, Prefix+lab+"-")
	for _, path := range []string{store.Dir(lab), sock} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", path, err)
		}
	}
}

// TestAddHostRefusesExistingNamespace: a namespace that exists already, under the name
// a host would get, is neither adopted nor recorded, so Down can never delete it.
func TestAddHostRefusesExistingNamespace(t *testing.T) {
	needRoot(t)
	store, _, lab := newLab(t, self(t))
	taken := NamespaceName(lab, "h1")
	createForeign(t, taken)
	if _, err := AddHost(store, lab, hostConfig(1)); !errors.Is(err, os.ErrExist) {
		t.Fatalf("AddHost over existing %s = %v, want ErrExist", taken, err)
	}
	if l, err := store.Load(lab); err != nil || len(l.Hosts) != 0 {
		t.Errorf("lab after the refused AddHost: %+v, %v; want no hosts", l, err)
	}
}

// listenUnix leaves a Unix socket file at path, as a crashed lab process would.
func listenUnix(t *testing.T, path string) string {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	return path
}
