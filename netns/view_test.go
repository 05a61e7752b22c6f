package netns

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestViewFormats(t *testing.T) {
	if got, want := guidString(0x020000fffe000001), "0200:00ff:fe00:0001"; got != want {
		t.Errorf("guidString = %q, want %q", got, want)
	}
	g := [16]byte{0: 0xfe, 1: 0x80, 11: 0xff, 12: 0xfe, 15: 1}
	if got, want := gidString(g), "fe80:0000:0000:0000:0000:00ff:fe00:0001"; got != want {
		t.Errorf("gidString = %q, want %q", got, want)
	}
	// The drop-in libibverbs' speed and width for each rate (libibverbs/device.c
	// speed_width), in the kernel's rate_show format.
	for rate, want := range map[uint64]string{
		1e9:   "2.5 Gb/sec (1X)",
		10e9:  "10 Gb/sec (4X)",
		25e9:  "25 Gb/sec (1X EDR)",
		40e9:  "40 Gb/sec (8X DDR)",
		100e9: "100 Gb/sec (4X EDR)",
		400e9: "400 Gb/sec (8X HDR)",
	} {
		if got := rateString(rate); got != want {
			t.Errorf("rateString(%g) = %q, want %q", float64(rate), got, want)
		}
	}
	if got, want := unescapeMountinfo(`/a\040b\\c`), `/a b\\c`; got != want {
		t.Errorf("unescapeMountinfo = %q, want %q", got, want)
	}
}

// hostView is h1's view in lab, of hostConfig hosts, with one RDMA device.
func hostView(t *testing.T, store Store, lab string) HostView {
	t.Helper()
	hosts, err := store.WriteHosts(lab)
	if err != nil {
		t.Fatal(err)
	}
	h1 := hostConfig(1)
	gids := []GID{{Type: "RoCE v2"}, {Type: "RoCE v2"}}
	gids[0].GID = [16]byte{0: 0xfe, 1: 0x80, 11: 0xff, 12: 0xfe, 15: 1}
	gids[1].GID = h1.IPv6.Addr().As16()
	return HostView{Hostname: "h1", Hosts: hosts, Devices: []RDMADevice{{
		Name: "rocelab0", NodeGUID: 0x000000fffe000001, FWVer: "test", Netdev: TapName("h1"),
		Active: true, Rate: 100e9, GIDs: gids, PKeys: 2,
	}}}
}

// inView runs a shell script in host h1 of lab through Store.Exec and returns its output.
func inView(t *testing.T, store Store, lab, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := store.Exec(lab, "h1", cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out.String())
	}
	return out.String()
}

// TestHostView: a host with a view has its own hostname, /etc/hosts, a sysfs of its
// network namespace and an rxe-like RDMA device; nothing outside changes; Down removes
// the pins and every mount of the view.
func TestHostView(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("util-linux's nsenter is not installed")
	}
	store, c, lab := newLab(t, self(t))
	addHost(t, store, lab, hostConfig(1))
	addHost(t, store, lab, hostConfig(2))
	hostname, _ := os.Hostname()
	hostsBefore, _ := os.ReadFile("/etc/hosts")
	_, ibErr := os.Stat("/sys/class/infiniband")

	if err := CreateHostView(store, lab, "h1", hostView(t, store, lab)); err != nil {
		t.Fatal(err)
	}
	if err := CreateHostView(store, lab, "h1", hostView(t, store, lab)); !errors.Is(err, os.ErrExist) {
		t.Errorf("a second view of h1: %v, want EEXIST", err)
	}

	ib := "/sys/class/infiniband/rocelab0"
	checks := []struct{ cmd, want string }{
		{"hostname", "h1"},
		{"ls /sys/class/net", "lo\nrl-h1"},
		{"getent ahostsv4 h2 | awk 'NR==1{print $1}'", "10.0.0.2"},
		{"getent ahostsv6 h2 | awk 'NR==1{print $1}'", "fd00::2"},
		{"su nobody -s /bin/sh -c 'grep -c h2 /etc/hosts'", "2"}, // every user reads it
		{"ls /sys/class/infiniband", "rocelab0"},
		{"cat " + ib + "/node_type", "1: CA"},
		{"cat " + ib + "/node_guid", "0000:00ff:fe00:0001"},
		{"cat " + ib + "/parent", "rl-h1"},
		{"cat " + ib + "/device/net/rl-h1/address", "02:00:00:00:00:01"},
		{"cat " + ib + "/ports/1/state " + ib + "/ports/1/phys_state " + ib + "/ports/1/link_layer " + ib + "/ports/1/rate",
			"4: ACTIVE\n5: LinkUp\nEthernet\n100 Gb/sec (4X EDR)"},
		{"cat " + ib + "/ports/1/gids/0 " + ib + "/ports/1/gids/1", "fe80:0000:0000:0000:0000:00ff:fe00:0001\nfd00:0000:0000:0000:0000:0000:0000:0001"},
		{"cat " + ib + "/ports/1/gid_attrs/types/1 " + ib + "/ports/1/gid_attrs/ndevs/1", "RoCE v2\nrl-h1"},
		{"cat " + ib + "/ports/1/pkeys/0 " + ib + "/ports/1/pkeys/1", "0xffff\n0x0000"},
		{"cat /sys/class/infiniband_verbs/abi_version /sys/class/infiniband_verbs/uverbs0/ibdev", "6\nrocelab0"},
		{"test -c /dev/infiniband/uverbs0 && test -c /dev/infiniband/rdma_cm && test -w /dev/infiniband/uverbs0 && echo ok", "ok"},
		{"cat /sys/class/infiniband_verbs/uverbs0/dev", "120:192"},
		// Nothing answers the nodes: the system's librdmacm or libibverbs, if a program
		// gets them, find no kernel device instead of a /dev/null.
		{"cat /dev/infiniband/rdma_cm 2>&1; cat /dev/infiniband/uverbs0 2>&1; true", "cat: /dev/infiniband/rdma_cm: No such device or address\ncat: /dev/infiniband/uverbs0: No such device or address"},
		{"echo x >/dev/null && test -c /dev/pts/ptmx && echo ok", "ok"}, // the rest of /dev works
	}
	for _, c := range checks {
		if got := strings.TrimSpace(inView(t, store, lab, c.cmd)); got != c.want {
			t.Errorf("in h1: %s = %q, want %q", c.cmd, got, c.want)
		}
	}

	// Nothing outside the host changed.
	if h, _ := os.Hostname(); h != hostname {
		t.Errorf("the machine's hostname is %q, was %q", h, hostname)
	}
	if b, _ := os.ReadFile("/etc/hosts"); string(b) != string(hostsBefore) {
		t.Errorf("the machine's /etc/hosts changed:\n%s", b)
	}
	if _, err := os.Stat("/sys/class/infiniband"); (err == nil) != (ibErr == nil) {
		t.Errorf("the machine's /sys/class/infiniband: %v, was %v", err, ibErr)
	}

	rep, err := c.Down(lab)
	if err != nil {
		t.Fatal(err)
	}
	views := 0
	for _, r := range rep.Removed {
		if r.Kind == "host view" {
			views++
		}
	}
	if views != 1 {
		t.Errorf("Down removed %v, want one host view", rep.Removed)
	}
	assertNoViews(t, lab)
}

// TestCleanRemovesCrashedView: a crashed lab's pinned views go with it.
func TestCleanRemovesCrashedView(t *testing.T) {
	needRoot(t)
	me := self(t)
	store, c, lab := newLab(t, Process{PID: me.PID, StartTime: me.StartTime + 1})
	tap := addHost(t, store, lab, hostConfig(1))
	if err := CreateHostView(store, lab, "h1", hostView(t, store, lab)); err != nil {
		t.Fatal(err)
	}
	tap.Close() // the crashed lab process's fds are closed
	// A pin no state file records (another store's lab, or a leftover): reported only.
	foreign := Prefix + uniqueName("foreign") + "-h1.mnt"
	if err := os.WriteFile(filepath.Join(ViewDir, foreign), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(ViewDir, foreign)) })
	rep, err := c.Clean()
	if err != nil {
		t.Fatal(err)
	}
	assertNoViews(t, lab)
	if !slices.Contains(rep.ForeignViews, filepath.Join(ViewDir, foreign)) {
		t.Errorf("Clean reported foreign views %v, want %s among them", rep.ForeignViews, foreign)
	}
	if _, err := os.Stat(filepath.Join(ViewDir, foreign)); err != nil {
		t.Errorf("Clean touched a foreign pin: %v", err)
	}
}

// assertNoViews fails if a pin file or any mount of lab's hosts is left.
func assertNoViews(t *testing.T, lab string) {
	t.Helper()
	entries, _ := os.ReadDir(ViewDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix+lab+"-") {
			t.Errorf("%s/%s left behind", ViewDir, e.Name())
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), Prefix+lab+"-") {
		t.Errorf("mounts of lab %s left:\n%s", lab, mi)
	}
}
