package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/netns"
)

// The real RDMA programs these tests run: Debian's ibverbs-utils and perftest, linked
// against the system's libibverbs.so.1 and run on rocelab's (docs/libibverbs.md).
var realTools = []string{"ibv_devinfo", "ibv_devices", "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong",
	"ibv_srq_pingpong", "ibv_xsrq_pingpong", "ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat",
	"ib_read_lat"}

// buildLibibverbs compiles rocelab's libibverbs.so.1 into dir/lib, where rocelab exec
// finds it next to a rocelab binary in dir, and verbs_check into dir. It skips the test
// when the RDMA packages (make deps-system) are missing.
func buildLibibverbs(tb testing.TB, dir string) {
	tb.Helper()
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		tb.Skip("libibverbs-dev is not installed (make deps-system installs it as root)")
	}
	for _, tool := range realTools {
		if _, err := exec.LookPath(tool); err != nil {
			tb.Skipf("%s is not installed (make deps-system installs ibverbs-utils and perftest as root)", tool)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("../../libibverbs/build.sh", filepath.Join(dir, "lib", "libibverbs.so.1")).CombinedOutput(); err != nil {
		tb.Fatalf("build libibverbs.so.1: %v\n%s", err, out)
	}
	// verbs_check is compiled against the system's libibverbs-dev, as any program is.
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "verbs_check"),
		"../../libibverbs/test/verbs_check.c", "-libverbs").CombinedOutput(); err != nil {
		tb.Fatalf("build verbs_check: %v\n%s", err, out)
	}
}

// ibverbsLab is a running two-host lab whose rocelab binary has libibverbs.so.1 and
// rocelab's Go apps beside it.
type ibverbsLab struct {
	*cli
	name string
	// parts, for a lab over several machines, is the CLI (state directory) of each
	// host's machine; hosts not listed are cli's.
	parts map[string]*cli
}

func newIBVerbsLab(t *testing.T) *ibverbsLab {
	c := newCLI(t)
	dir := filepath.Dir(c.bin)
	buildLibibverbs(t, dir)
	if out, err := exec.Command("go", "build", "-o", dir+"/", "../rc_pingpong", "../uc_pingpong", "../ud_pingpong",
		"../srq_pingpong").CombinedOutput(); err != nil {
		t.Fatalf("go build apps: %v\n%s", err, out)
	}
	return upLab(t, c, "ibv", realToolsTopology(t))
}

// upLab brings up a lab of topology, named from prefix, until the test ends.
func upLab(t testing.TB, c *cli, prefix, topology string) *ibverbsLab {
	l := &ibverbsLab{cli: c, name: labName(prefix)}
	c.run("up", "-f", topology, "--name", l.name)
	t.Cleanup(func() { c.run("down", l.name) })
	return l
}

// realToolsTopology is two-hosts.yaml with "retry: rxe", the lab the real tools run in:
// they ask for retry_cnt 7 (rdma-core's pingpongs, perftest, librdmacm's default),
// which rxe, the device they are compared with, reads as "retry forever". Read as the
// IBTA's 7 retries of ibv_srq_pingpong's 67 ms timer, a lab loop stalled for about half
// a second on a loaded machine ended the run in RETRY_EXC_ERR (status 12).
func realToolsTopology(t testing.TB) string {
	b, err := os.ReadFile("../../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "two-hosts-rxe-retry.yaml")
	if err := os.WriteFile(p, append([]byte("retry: rxe\n"), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// clis is the CLI of each of the lab's machines, once each.
func (l *ibverbsLab) clis() []*cli {
	out := []*cli{l.cli}
	for _, c := range l.parts {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func (l *ibverbsLab) exec(host string, argv ...string) *exec.Cmd {
	return l.cliOf(host).cmd(append([]string{"exec", "--lab", l.name, host, "--"}, argv...)...)
}

// cliOf is the CLI of host's machine.
func (l *ibverbsLab) cliOf(host string) *cli {
	if c, ok := l.parts[host]; ok {
		return c
	}
	return l.cli
}

// waitListening polls host's TCP tables until something listens on port: the tools
// print nothing we could wait for before they listen.
func (l *ibverbsLab) waitListening(t testing.TB, host string, port int, server *exec.Cmd, done <-chan struct{}) {
	t.Helper()
	want := fmt.Sprintf(":%04X 00000000:0000 0A", port)
	want6 := fmt.Sprintf(":%04X 00000000000000000000000000000000:0000 0A", port)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("%v exited before it listened", server.Args)
		default:
		}
		out, _ := l.exec(host, "cat", "/proc/net/tcp", "/proc/net/tcp6").Output()
		if bytes.Contains(out, []byte(want)) || bytes.Contains(out, []byte(want6)) {
			return
		}
	}
	t.Fatalf("nothing listens on port %d in %s", port, host)
}

// rnicTX returns the frames host's soft-RNIC sent, from rocelab status.
func (l *ibverbsLab) rnicTX(t *testing.T, host string) int {
	t.Helper()
	out := l.run("status", "--lab", l.name)
	for _, line := range strings.Split(out, "\n") {
		// HOST NETNS IPV4 IPV6 MAC RNIC-TX ...
		if f := strings.Fields(line); len(f) > 5 && f[0] == host {
			if n, err := strconv.Atoi(f[5]); err == nil {
				return n
			}
		}
	}
	t.Fatalf("rocelab status shows no RNIC counters for %s:\n%s", host, out)
	return 0
}

// child returns the pid of the program rocelab exec started.
func child(t testing.TB, exec *exec.Cmd) int {
	t.Helper()
	children := processChildren()[exec.Process.Pid]
	if len(children) == 0 {
		t.Fatalf("rocelab exec %d has no child", exec.Process.Pid)
	}
	return children[0]
}

// processChildren maps each process's pid to its children's (/proc/PID/stat; a
// thread's children file misses children of exited threads).
func processChildren() map[int][]int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := make(map[int][]int)
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	return children
}

// pair runs server in srvHost and, once it listens on port, client in cliHost (with the
// server's address appended), and returns both outputs; either failing fails the test.
func (l *ibverbsLab) pair(t testing.TB, port int, srvHost string, server []string, cliHost string, client []string, addr string) (string, string) {
	t.Helper()
	var srvOut bytes.Buffer
	srv := l.exec(srvHost, server...)
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var srvErr error
	go func() { srvErr = srv.Wait(); close(done) }()
	defer func() {
		srv.Process.Kill()
		<-done
	}()
	l.waitListening(t, srvHost, port, srv, done)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli := l.exec(cliHost, append(client, addr)...)
	cmd := exec.CommandContext(ctx, cli.Path, cli.Args[1:]...)
	cmd.Env = cli.Env
	out, err := cmd.CombinedOutput()
	// srvOut is written by exec's copying goroutine until the server is waited for.
	stopServer := func() string {
		srv.Process.Kill()
		<-done
		return srvOut.String()
	}
	if err != nil {
		t.Fatalf("client %v: %v\n%s\nserver:\n%s", client, err, out, stopServer())
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("server %v did not finish\n%s", server, stopServer())
	}
	if srvErr != nil {
		t.Fatalf("server %v: %v\n%s\nclient:\n%s", server, srvErr, srvOut.String(), out)
	}
	return srvOut.String(), string(out)
}

const pingpongPort, checkPort = 18515, 18777

// perftestPair runs a perftest-style tool with args as the server in h1 and as the
// client in h2 (to 10.0.0.1), prints the client's output (a benchmark's table) and
// returns it.
func (l *ibverbsLab) perftestPair(tb testing.TB, tool string, args ...string) string {
	tb.Helper()
	_, out := l.pair(tb, pingpongPort, "h1", append([]string{tool}, args...), "h2", append([]string{tool}, args...), "10.0.0.1")
	fmt.Print(out)
	return out
}

// TestLibibverbs: unmodified programs linked against the system's libibverbs run on a
// lab's soft-RNICs through rocelab exec: ibv_devinfo and ibv_devices show each host its
// own device, verbs_check exercises the verbs and their error paths between two hosts,
// rdma-core's pingpongs run against each other and against rocelab's Go apps, and
// perftest's bandwidth and latency tools run between the hosts both ways over IPv4 and
// IPv6 GIDs.
func TestLibibverbs(t *testing.T) {
	l := newIBVerbsLab(t)

	t.Run("ibv_devinfo", func(t *testing.T) {
		out, err := l.exec("h1", "ibv_devinfo", "-v").CombinedOutput()
		if err != nil {
			t.Fatalf("ibv_devinfo: %v\n%s", err, out)
		}
		for _, want := range []string{"hca_id:\trocelab0", "node_guid:\t\t\t0000:00ff:fe00:0001",
			"state:\t\t\tPORT_ACTIVE (4)", "active_mtu:\t\t1024 (3)", "link_layer:\t\tEthernet",
			"GID[  0]:\t\tfe80::ff:fe00:1, RoCE v2", "GID[  1]:\t\t::ffff:10.0.0.1, RoCE v2",
			"GID[  2]:\t\tfd00::1, RoCE v2"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
			}
		}
		out, err = l.exec("h2", "ibv_devices").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "rocelab0        \t000000fffe000002") ||
			strings.Contains(string(out), "000000fffe000001") {
			t.Errorf("ibv_devices in h2 should list h2's device only: %v\n%s", err, out)
		}
	})

	t.Run("verbs_check", func(t *testing.T) {
		srv, cli := l.pair(t, checkPort, "h2", []string{"verbs_check", "server"}, "h1", []string{"verbs_check", "client"}, "10.0.0.2")
		t.Logf("server:\n%s\nclient:\n%s", srv, cli)
		// every unsupported verb it tries is named once on stderr
		for _, verb := range []string{"ibv_wr_send_tso"} {
			if !strings.Contains(srv+cli, "rocelab libibverbs: "+verb+" is not supported") {
				t.Errorf("no line names %s as unsupported", verb)
			}
		}
	})

	for _, typ := range []string{"rc", "uc", "ud", "srq"} {
		real, goApp := "ibv_"+typ+"_pingpong", typ+"_pingpong"
		args := []string{"-g", "1", "-n", "100"}
		switch typ {
		case "rc", "uc":
			args = append(args, "-c") // validate the received buffer
		case "ud":
			args = append(args, "-s", "512") // the message and its GRH within the 1024-byte MTU
		}
		t.Run(real, func(t *testing.T) {
			_, out := l.pair(t, pingpongPort, "h2", append([]string{real}, args...), "h1", append([]string{real}, args...), "10.0.0.2")
			if !strings.Contains(out, "100 iters in") {
				t.Fatalf("%s:\n%s", real, out)
			}
		})
		t.Run(real+"/go-"+goApp, func(t *testing.T) {
			_, out := l.pair(t, pingpongPort, "h1", append([]string{goApp}, args...), "h2", append([]string{real}, args...), "10.0.0.1")
			if !strings.Contains(out, "100 iters in") {
				t.Fatalf("%s against %s:\n%s", real, goApp, out)
			}
			_, out = l.pair(t, pingpongPort, "h2", append([]string{real}, args...), "h1", append([]string{goApp}, args...), "10.0.0.2")
			if !strings.Contains(out, "100 iters in") {
				t.Fatalf("%s against %s:\n%s", goApp, real, out)
			}
		})
	}

	// XRC: each side's XRC_SEND QPs send into the other's XRC SRQs through its XRC_RECV
	// QPs, the SRQ numbers exchanged over TCP; the domain is a file both processes of a
	// side open (ibv_xsrq_pingpong's /tmp/xrc_domain), so it is shared as the verbs say.
	t.Run("ibv_xsrq_pingpong", func(t *testing.T) {
		args := []string{"ibv_xsrq_pingpong", "-g", "1", "-n", "100"}
		srv, cli := l.pair(t, pingpongPort, "h2", args, "h1", args, "10.0.0.2")
		t.Logf("server:\n%s\nclient:\n%s", srv, cli)
		// It prints "success" once every message of every client came back, after
		// checking each completion's status, opcode and WR ID.
		for _, out := range []string{srv, cli} {
			if !strings.Contains(out, "success") || !strings.Contains(out, "SRQN") {
				t.Fatalf("ibv_xsrq_pingpong:\nserver:\n%s\nclient:\n%s", srv, cli)
			}
		}
	})

	// perftest over XRC: its XRC_SEND QPs send into the server's XRC SRQs through
	// XRC_RECV QPs, each side's domain a file perftest opens.
	for _, tool := range []string{"ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat"} {
		t.Run(tool+"-xrc", func(t *testing.T) {
			args := []string{tool, "-c", "XRC", "-x", "1", "-n", "200"}
			_, out := l.pair(t, pingpongPort, "h2", args, "h1", args, "10.0.0.2")
			if !strings.Contains(out, "#bytes") || !strings.Contains(out, " 200 ") || !strings.Contains(out, "XRC") {
				t.Fatalf("%s -c XRC printed no result:\n%s", tool, out)
			}
		})
	}

	// kill -9 of the receiving program mid-transfer: the service reclaims its objects and
	// keeps serving, and the sender, with perftest's retry_cnt 7 (7 retries, as the IBTA
	// reads it: a lab of two-hosts.yaml itself, not retry: rxe's "forever"), gets an error
	// completion and exits saying so.
	t.Run("kill-9", func(t *testing.T) {
		c := *l.cli
		c.t = t
		l := upLab(t, &c, "ibk", "../../topologies/two-hosts.yaml")
		const port = 18516
		args := []string{"ib_write_bw", "-x", "1", "-D", "60", "-p", strconv.Itoa(port)}
		srv := l.exec("h2", args...)
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		l.waitListening(t, "h2", port, srv, done)
		before := l.rnicTX(t, "h1")
		cli := l.exec("h1", append(args, "10.0.0.2")...)
		var cliOut bytes.Buffer
		cli.Stdout, cli.Stderr = &cliOut, &cliOut
		if err := cli.Start(); err != nil {
			t.Fatal(err)
		}
		cliDone := make(chan error, 1)
		go func() { cliDone <- cli.Wait() }()
		// perftest prints nothing before the end: the sender's RNIC counters say when
		// the transfer runs
		deadline := time.Now().Add(20 * time.Second)
		for l.rnicTX(t, "h1") < before+10000 {
			if time.Now().After(deadline) {
				t.Fatal("the transfer did not start")
			}
		}
		if err := syscall.Kill(child(t, srv), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		select {
		case err := <-cliDone:
			if err == nil || !strings.Contains(cliOut.String(), "Failed status 12") { // IBV_WC_RETRY_EXC_ERR
				t.Fatalf("the sender after its peer's kill -9: %v, want an exit on RETRY_EXC_ERR:\n%s", err, cliOut.String())
			}
		case <-time.After(30 * time.Second): // 8 × 67 ms of retries, far exceeded
			syscall.Kill(child(t, cli), syscall.SIGKILL)
			t.Fatalf("the sender still runs 30 s after its peer's kill -9:\n%s", cliOut.String())
		}
		_, pp := l.pair(t, pingpongPort, "h2", []string{"ibv_rc_pingpong", "-g", "1", "-n", "100", "-c"}, "h1",
			[]string{"ibv_rc_pingpong", "-g", "1", "-n", "100", "-c"}, "10.0.0.2")
		if !strings.Contains(pp, "100 iters in") {
			t.Fatalf("after kill -9, ibv_rc_pingpong:\n%s", pp)
		}
	})

	for _, tool := range []string{"ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_send_lat", "ib_write_lat", "ib_read_lat"} {
		// IPv4 GIDs with the server in h2, IPv6 GIDs with the server in h1: both ways.
		for _, v := range []struct{ gid, srv, cli, addr string }{{"1", "h2", "h1", "10.0.0.2"}, {"2", "h1", "h2", "10.0.0.1"}} {
			t.Run(fmt.Sprintf("%s/gid%s-%s-to-%s", tool, v.gid, v.cli, v.srv), func(t *testing.T) {
				args := []string{tool, "-x", v.gid, "-n", "200"}
				_, out := l.pair(t, pingpongPort, v.srv, args, v.cli, args, v.addr)
				if !strings.Contains(out, "#bytes") || !strings.Contains(out, " 200 ") {
					t.Fatalf("%s printed no result:\n%s", tool, out)
				}
			})
		}
	}
}

// BenchmarkLabRealTools runs perftest's real ib_write_bw (64 KiB) and ib_send_lat (64 B)
// between two lab hosts on rocelab's libibverbs.so.1 next to rocelab's Go write_bw and
// send_lat in the same lab and run, prints the four tables, and reports each tool's
// average Gb/s and typical latency and the real tools' ratio to the Go tools.
func BenchmarkLabRealTools(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("lab benchmarks need root (namespaces and TAPs)")
	}
	dir := b.TempDir()
	for _, pkg := range []string{".", "../write_bw", "../send_lat"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	buildLibibverbs(b, dir)
	l := &ibverbsLab{cli: &cli{bin: filepath.Join(dir, "rocelab"), store: netns.Store{Root: filepath.Join(dir, "state")}},
		name: labName("rbench")}
	lab := func(args ...string) {
		if out, err := l.cmd(args...).CombinedOutput(); err != nil {
			b.Fatalf("rocelab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	lab("up", "-f", "../../topologies/two-hosts.yaml", "--name", l.name)
	defer lab("down", l.name)
	run := func(tool string, args ...string) string { return l.perftestPair(b, tool, args...) }
	bwArgs := []string{"-x", "1", "-s", "65536", "-n", "5000", "--report_gbits"}
	latArgs := []string{"-x", "1", "-s", "64", "-n", "5000"}
	for b.Loop() {
		goBW, okGoBW := tableValue(run("write_bw", bwArgs...), "65536", 3)
		realBW, okRealBW := tableValue(run("ib_write_bw", bwArgs...), "65536", 3)
		// #bytes #iterations t_min t_max t_typical ...
		goLat, okGoLat := tableValue(run("send_lat", latArgs...), "64", 4)
		realLat, okRealLat := tableValue(run("ib_send_lat", latArgs...), "64", 4)
		if !okGoBW || !okRealBW || !okGoLat || !okRealLat {
			b.Fatal("a tool printed no result row")
		}
		b.ReportMetric(goBW, "go-Gb/s")
		b.ReportMetric(realBW, "real-Gb/s")
		b.ReportMetric(realBW/goBW, "real/go-bw")
		b.ReportMetric(goLat, "go-p50-µs")
		b.ReportMetric(realLat, "real-p50-µs")
		b.ReportMetric(realLat/goLat, "real/go-p50")
	}
}
