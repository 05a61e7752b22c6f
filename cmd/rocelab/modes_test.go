package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

// TestUmaskZeroLab is issue 20's umask finding: a lab started under umask 000 (as some
// service managers and containers run) still keeps its state owner-only, and its control
// socket refuses other users even when its mode would let them in.
func TestUmaskZeroLab(t *testing.T) {
	c := newCLI(t)
	// The store's parents must be open to everyone, so that only rocelab's own modes and
	// the socket's peer check stand between another user and the lab.
	base, err := os.MkdirTemp("", "rocelab-umask-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	c.store = netns.Store{Root: filepath.Join(base, "run")}
	name := labName("um")
	up := c.cmd("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	old := syscall.Umask(0) // inherited by up and the lab process it starts
	out, err := up.CombinedOutput()
	syscall.Umask(old)
	if err != nil {
		t.Fatalf("up under umask 000: %v\n%s", err, out)
	}
	t.Cleanup(func() { c.cmd("down", name).Run() })

	dir := c.store.Dir(name)
	for path, want := range map[string]os.FileMode{
		c.store.Root:                     0o700 | os.ModeDir,
		dir:                              0o700 | os.ModeDir,
		lab.ControlPath(c.store, name):   0o600 | os.ModeSocket,
		filepath.Join(dir, "state.json"): 0o600,
		filepath.Join(dir, "lab.log"):    0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}

	// Open every door by hand: the control socket's peer check alone must refuse.
	for _, p := range []string{c.store.Root, dir, lab.ControlPath(c.store, name)} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "state.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The test build's directory is closed to other users: run a copy from base.
	bin, err := os.ReadFile(c.bin)
	if err == nil {
		c.bin = filepath.Join(base, "rocelab")
		err = os.WriteFile(c.bin, bin, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	capture := c.cmd("capture", "--lab", name, "s1:p1", "--duration", "1s")
	capture.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	capture.Dir = base
	out, err = capture.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "may not use this lab's control socket") {
		t.Fatalf("capture as uid 65534: err %v, output %q; want a refusal by the control socket", err, out)
	}
	if strings.Contains(string(out), "\x0a\x0d\x0d\x0a") { // a pcapng section header block
		t.Errorf("uid 65534 got pcapng bytes")
	}
}
