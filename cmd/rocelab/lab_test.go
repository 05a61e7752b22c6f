package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/lab/labtest"
	"github.com/rocelab/rocelab/netns"
)

// rocelabBinary builds the CLI once per test binary: the lab tests run it as users do,
// because `up` daemonizes by re-executing itself.
func rocelabBinary(t testing.TB) string {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("lab CLI tests need root (namespaces and TAPs)")
	}
	bin := filepath.Join(t.TempDir(), "rocelab")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type cli struct {
	t     testing.TB
	bin   string
	store netns.Store
}

func (c *cli) cmd(args ...string) *exec.Cmd {
	x := exec.Command(c.bin, args...)
	x.Env = append(os.Environ(), netns.StateRootEnv+"="+c.store.Root)
	return x
}

func (c *cli) run(args ...string) string {
	c.t.Helper()
	out, err := c.cmd(args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("rocelab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newCLI(t testing.TB) *cli {
	return &cli{t: t, bin: rocelabBinary(t), store: netns.Store{Root: t.TempDir()}}
}

func labName(prefix string) string { return fmt.Sprintf("%s%d", prefix, os.Getpid()%100000) }

// execRecorded waits (bounded) until lab name's record lists a process started with
// exec, and returns that record: exec records the process before it returns control
// to the command, and the command may run before the record shows it.
func (c *cli) execRecorded(t testing.TB, name string) *netns.Lab {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rec, err := c.store.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Processes) > 0 {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec'd process was never recorded")
		}
	}
}

func namespacesOf(t *testing.T, name string) []string {
	t.Helper()
	all, err := netns.ListNamespaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range all {
		if strings.HasPrefix(ns, netns.Prefix+name+"-") {
			out = append(out, ns)
		}
	}
	return out
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// waitGone waits (bounded) for pid to exit: SIGKILL is delivered asynchronously.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUpKillClean: `up` a lab, start a process in it with `exec`, kill -9 the lab
// process, then `clean`: no namespace, TAP, socket, state or process is left.
func TestUpKillClean(t *testing.T) {
	c := newCLI(t)
	name := labName("k")
	out := c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	if !strings.Contains(out, "ready") {
		t.Fatalf("up printed %q", out)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Name != name || len(st.Hosts) != 2 || st.Hosts[1].IPv4 != "10.0.0.2" || !st.Running || st.Hosts[0].RNIC == nil {
		t.Fatalf("status %+v", st)
	}
	if got := namespacesOf(t, name); len(got) != 2 {
		t.Fatalf("namespaces %v", got)
	}
	sleeper := c.cmd("exec", "h1", "--", "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	child := c.execRecorded(t, name).Processes[0].PID
	ctl := lab.ControlPath(c.store, name)
	if _, err := os.Stat(ctl); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, st.Pid, "the lab process")
	out = c.run("clean")
	t.Logf("clean: %s", out)
	if got := namespacesOf(t, name); len(got) != 0 {
		t.Errorf("namespaces left: %v", got)
	}
	waitGone(t, child, "the process started with exec")
	if _, err := os.Stat(c.store.Dir(name)); !os.IsNotExist(err) {
		t.Errorf("state directory left: %v", err)
	}
	if _, err := os.Stat(ctl); !os.IsNotExist(err) {
		t.Errorf("control socket left: %v", err)
	}
	links, _ := exec.Command("ip", "-o", "link").Output()
	if bytes.Contains(links, []byte("rl-h1")) {
		t.Errorf("a TAP is left in the root namespace:\n%s", links)
	}
}

// TestUpSixteenHostsAllPairs: `rocelab up` of a 16-host leaf-spine (two leaves, two
// spines); every host pings every other and talks TCP with it over IPv4 and IPv6
// through the lab process's Go fabric; status sees the 16 hosts; down removes them.
func TestUpSixteenHostsAllPairs(t *testing.T) {
	c := newCLI(t)
	name := labName("a")
	tp, err := topo.LeafSpine(2, 2, 8, topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ls16.yaml")
	if err := os.WriteFile(file, tp.YAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("up", "-f", file, "--name", name)
	defer func() {
		c.run("down", name)
		if got := namespacesOf(t, name); len(got) != 0 {
			t.Errorf("namespaces left after down: %v", got)
		}
	}()
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Hosts) != 16 || len(st.Switches) != 4 {
		t.Fatalf("status: %d hosts, %d switches", len(st.Hosts), len(st.Switches))
	}
	var hosts []labtest.Host
	for _, h := range st.Hosts {
		hosts = append(hosts, labtest.Host{Name: h.Name, Namespace: h.Netns,
			IPv4: netip.MustParseAddr(h.IPv4), IPv6: netip.MustParseAddr(h.IPv6)})
	}
	labtest.PingAllPairs(t, hosts)
	labtest.TCPAllPairs(t, hosts)
}

// TestDownLeavesForeign: a namespace named like the lab's but created by someone else
// survives `down`; two labs run side by side and --lab picks one.
func TestDownLeavesForeign(t *testing.T) {
	c := newCLI(t)
	a, b := labName("a"), labName("b")
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", a)
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", b)
	foreign := netns.NamespaceName(a, "h9")
	if err := netns.CreateNamespace(foreign); err != nil {
		t.Fatal(err)
	}
	defer netns.DeleteNamespace(foreign)

	if out, err := c.cmd("exec", "h1", "--", "true").CombinedOutput(); err == nil || !strings.Contains(string(out), "--lab") {
		t.Errorf("exec with two labs and no --lab: %v %s", err, out)
	}
	c.run("exec", "--lab", b, "h2", "--", "true")
	c.run("down", a)
	if got := namespacesOf(t, a); len(got) != 1 || got[0] != foreign {
		t.Errorf("after down %s: namespaces %v, want only the foreign %s", a, got, foreign)
	}
	if got := namespacesOf(t, b); len(got) != 2 {
		t.Errorf("down %s touched lab %s: its namespaces are %v", a, b, got)
	}
	c.run("down") // the only lab left
	if got := namespacesOf(t, b); len(got) != 0 {
		t.Errorf("namespaces of %s left: %v", b, got)
	}
}

// BenchmarkUp runs `rocelab up` as users do (daemon, progress, ready) for 16 and 64
// hosts on a leaf-spine, and reports the time to ready and the lab process's resident
// memory once ready.
func BenchmarkUp(b *testing.B) {
	if unix.Geteuid() != 0 {
		b.Skip("lab CLI benchmarks need root (namespaces and TAPs)")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "rocelab")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	store := netns.Store{Root: filepath.Join(dir, "state")}
	for _, hosts := range []int{16, 64} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			tp, err := topo.LeafSpine(hosts/8, 4, 8, topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500})
			if err != nil {
				b.Fatal(err)
			}
			file := filepath.Join(dir, fmt.Sprintf("ls%d.yaml", hosts))
			if err := os.WriteFile(file, tp.YAML(), 0o644); err != nil {
				b.Fatal(err)
			}
			var up time.Duration
			var rss int64
			n := 0
			for b.Loop() {
				name := fmt.Sprintf("u%dx%d", hosts, n)
				n++
				c := exec.Command(bin, "up", "-f", file, "--name", name)
				c.Env = append(os.Environ(), netns.StateRootEnv+"="+store.Root)
				start := time.Now()
				if out, err := c.CombinedOutput(); err != nil {
					b.Fatalf("up: %v\n%s", err, out)
				}
				up += time.Since(start)
				b.StopTimer()
				rec, err := store.Load(name)
				if err != nil {
					b.Fatal(err)
				}
				rss += vmRSS(rec.Owner.PID)
				if _, err := (&netns.Cleaner{Store: store}).Down(name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(up.Milliseconds())/float64(n), "ms/up")
			b.ReportMetric(float64(rss)/float64(n)/(1<<20), "MiB-RSS")
		})
	}
}

// vmRSS is a process's resident set in bytes.
func vmRSS(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	return 0
}

// TestUpInterruptedOrTimedOut: an up that gives up (--timeout) or is killed (SIGKILL, which
// it cannot catch) before its lab is ready leaves no namespace, state or lab process.
func TestUpInterruptedOrTimedOut(t *testing.T) {
	c := newCLI(t)
	name := labName("to")
	out, err := c.cmd("up", "-f", "../../topologies/leaf-spine.yaml", "--name", name, "--timeout", "1ms").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not ready after 1ms (--timeout)") {
		t.Fatalf("up --timeout 1ms: %v\n%s", err, out)
	}
	waitNoLab(t, c, name)

	name = labName("kl")
	up := c.cmd("up", "-f", "../../topologies/leaf-spine.yaml", "--name", name)
	stdout, _ := up.StdoutPipe()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 1)
	if _, err := stdout.Read(line); err != nil { // up has started the lab process and heard from it
		t.Fatal(err)
	}
	up.Process.Kill()
	up.Wait()
	waitNoLab(t, c, name)
}

// waitNoLab waits (bounded) until lab name has no namespace, state directory or process.
func waitNoLab(t *testing.T, c *cli, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, serr := os.Stat(c.store.Dir(name))
		ns := namespacesOf(t, name)
		if os.IsNotExist(serr) && len(ns) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab %s left behind: namespaces %v, state directory: %v", name, ns, serr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatusLinkFaults: a lab's injected faults can be confirmed from status: 400 UDP
// datagrams from h1 over a link with loss 0.5 show as lost at h1's end of the link, about
// half of them, in status --json and in the table's LINK FAULTS column.
func TestStatusLinkFaults(t *testing.T) {
	c := newCLI(t)
	name := labName("lf")
	file := filepath.Join(t.TempDir(), "lossy.yaml")
	tp := `telemetry: int
hosts:
  - {name: h1, ipv4: 10.0.0.1}
  - {name: h2, ipv4: 10.0.0.2}
switches:
  - name: s1
links:
  - {endpoints: [h1, s1], rate: 10G, delay: 1us, faults: {loss: 0.5}}
  - {endpoints: [h2, s1], rate: 10G, delay: 1us}
`
	if err := os.WriteFile(file, []byte(tp), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run("up", "-f", file, "--name", name)
	t.Cleanup(func() { c.cmd("down", name).Run() })
	const sent = 400
	err := netns.Do(netns.NamespaceName(name, "h1"), func() error {
		// Unconnected, so that h2's ICMP port unreachable does not fail the next write.
		conn, err := net.ListenPacket("udp4", "10.0.0.1:0")
		if err != nil {
			return err
		}
		defer conn.Close()
		to := &net.UDPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 9}
		for range sent {
			if _, err := conn.WriteTo([]byte("rocelab"), to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var st lab.Status
	// The relay hands frames to the link asynchronously, and the link delivers them
	// after its delay: wait until every frame is counted as lost or delivered.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
			t.Fatal(err)
		}
		if l := st.Hosts[0].Link; l != nil && l.Frames >= sent && l.Lost+l.Delivered == l.Frames || time.Now().After(deadline) {
			break
		}
	}
	l := st.Hosts[0].Link
	if l == nil || l.Frames < sent || l.Lost < sent/4 || l.Lost > 3*sent/4 || l.Lost+l.Delivered != l.Frames {
		t.Fatalf("h1's link: %+v, want about %d of %d+ frames lost", l, sent/2, sent)
	}
	table := c.run("status", "--lab", name)
	if !strings.Contains(table, "LINK FAULTS") {
		t.Errorf("status table without LINK FAULTS:\n%s", table)
	}
	t.Logf("h1's link: %d frames, %d lost", l.Frames, l.Lost)
}
