package main

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/netns"
)

// TestHostView: inside a lab host (rocelab exec) programs find the host as a machine of
// its own with a kernel RDMA device: its hostname, its own netdevs in /sys/class/net,
// the other hosts by name, and rocelab0 in /sys/class/infiniband (rxe's files, agreeing
// with what the real ibv_devinfo reports through rocelab's libibverbs),
// /sys/class/infiniband_verbs and /dev/infiniband — so that UCX lists its verbs
// transports. Outside, nothing changed; down, and clean after a crash, leave no pin and
// no mount.
func TestHostView(t *testing.T) {
	c := newCLI(t)
	buildLibibverbs(t, filepath.Dir(c.bin))
	hostname, _ := os.Hostname()
	_, ibErr := os.Stat("/sys/class/infiniband")
	l := &ibverbsLab{cli: c, name: labName("hv")}
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", l.name)
	t.Cleanup(func() { c.cmd("down", l.name).Run() }) // after a failure; the test removes it itself
	run := func(host string, argv ...string) string {
		t.Helper()
		// Bounded: a program that hangs (ucx_info did, in the system's librdmacm on a
		// node that answered) fails the test instead of hanging it.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		x := l.exec(host, argv...)
		cmd := exec.CommandContext(ctx, x.Path, x.Args[1:]...)
		cmd.Env, cmd.WaitDelay = x.Env, 5*time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %v\n%s", host, argv, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sh := func(host, script string) string { t.Helper(); return run(host, "sh", "-c", script) }

	for _, h := range []string{"h1", "h2"} {
		tap := netns.TapName(h)
		if got := run(h, "hostname"); got != h {
			t.Errorf("hostname in %s: %q", h, got)
		}
		if got := sh(h, "ls /sys/class/net"); got != "lo\n"+tap {
			t.Errorf("/sys/class/net in %s: %q, want lo and %s", h, got, tap)
		}
		ib := "/sys/class/infiniband/rocelab0"
		if got := sh(h, "ls "+ib+"/device/net"); got != tap {
			t.Errorf("%s/device/net in %s: %q, want %s", ib, h, got, tap)
		}
		if got := sh(h, "test -c /dev/infiniband/uverbs0 && test -c /dev/infiniband/rdma_cm && cat /sys/class/infiniband_verbs/uverbs0/ibdev"); got != "rocelab0" {
			t.Errorf("uverbs0 in %s: %q", h, got)
		}
		// sysfs says what the real ibv_devinfo, through the verbs service, says.
		devinfo := run(h, "ibv_devinfo", "-v")
		guid := sh(h, "cat "+ib+"/node_guid")
		if !regexp.MustCompile(`node_guid:\s+` + guid + `\n`).MatchString(devinfo) {
			t.Errorf("%s node_guid %s, ibv_devinfo:\n%s", h, guid, devinfo)
		}
		// ibv_devinfo prints GIDs as inet_ntop does, sysfs as the kernel's %pI6: both
		// are parsed.
		gidRE := regexp.MustCompile(`(?m)^\s*GID\[\s*(\d+)\]:\s+(\S+), (RoCE v[12])$`)
		fromDevinfo := gidTable(t, gidRE.FindAllStringSubmatch(devinfo, -1))
		sysfs := sh(h, `cd `+ib+`/ports/1 && for i in $(ls gids | sort -n); do echo "GID[$i]: $(cat gids/$i), $(cat gid_attrs/types/$i)"; done`)
		fromSysfs := gidTable(t, gidRE.FindAllStringSubmatch(sysfs, -1))
		if len(fromDevinfo) == 0 || !slices.Equal(fromDevinfo, fromSysfs) {
			t.Errorf("%s GID table: sysfs %v, ibv_devinfo %v", h, fromSysfs, fromDevinfo)
		}
		if got := sh(h, "cat "+ib+"/ports/1/state "+ib+"/ports/1/link_layer "+ib+"/ports/1/gid_attrs/ndevs/0"); got != "4: ACTIVE\nEthernet\n"+tap {
			t.Errorf("%s port: %q", h, got)
		}
	}
	if got := sh("h1", "getent ahostsv4 h2 | awk 'NR==1{print $1}'"); got != "10.0.0.2" {
		t.Errorf("h2 from h1: %q, want 10.0.0.2", got)
	}

	if _, err := exec.LookPath("ucx_info"); err != nil {
		t.Log("ucx_info is not installed (apt-get install ucx-utils): UCX's view not checked")
	} else {
		out := run("h1", "ucx_info", "-d")
		for _, want := range []string{"Transport: rc_verbs", "Transport: ud_verbs", "Device: rocelab0:1"} {
			if !strings.Contains(out, want) {
				t.Errorf("ucx_info -d in h1 lacks %q:\n%s", want, out)
			}
		}
	}

	if h, _ := os.Hostname(); h != hostname {
		t.Errorf("the machine's hostname is %q, was %q", h, hostname)
	}
	if _, err := os.Stat("/sys/class/infiniband"); (err == nil) != (ibErr == nil) {
		t.Errorf("the machine's /sys/class/infiniband: %v, was %v", err, ibErr)
	}
	c.run("down", l.name)
	assertNoHostViews(t, l.name)

	// A crash: the lab process killed, then clean.
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", l.name)
	rec, err := c.store.Load(l.name)
	if err != nil {
		t.Fatal(err)
	}
	killAndWait(t, rec.Owner.PID)
	if out := c.run("clean"); !strings.Contains(out, "host view") {
		t.Errorf("clean did not remove the host views:\n%s", out)
	}
	assertNoHostViews(t, l.name)
}

// killAndWait SIGKILLs pid and waits for it through a pidfd.
// gidTable is "index address type" for each match of index, GID and type.
func gidTable(t *testing.T, matches [][]string) []string {
	t.Helper()
	var table []string
	for _, m := range matches {
		a, err := netip.ParseAddr(m[2])
		if err != nil {
			t.Fatalf("GID %q: %v", m[2], err)
		}
		table = append(table, m[1]+" "+a.String()+" "+m[3])
	}
	return table
}

func killAndWait(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if err != unix.EINTR {
			break
		}
	}
}

// assertNoHostViews fails if a pin or a mount of lab's hosts is left.
func assertNoHostViews(t *testing.T, lab string) {
	t.Helper()
	prefix := netns.Prefix + lab + "-"
	entries, _ := os.ReadDir(netns.ViewDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("%s/%s left behind", netns.ViewDir, e.Name())
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(mi)) {
		if strings.Contains(line, prefix) {
			t.Errorf("mount left: %s", line)
		}
	}
}
