package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

// partsTopology is topologies/two-machines.yaml as the multi-machine test runs it: the
// real tools' retry (realToolsTopology), jumbo links, and a tunnel link declared
// longer than this machine's underlay takes (docs/multi-machine.md: the declared delay
// of a tunnel must cover the underlay's, which status measures).
const partsTopology = `retry: rxe
telemetry: hpcc
congestion_control: hpcc
machines:
  - {name: a, address: 192.168.77.1}
  - {name: b, address: 192.168.77.2}
hosts:
  - {name: h1, ipv4: 10.0.0.1, ipv6: 'fd00::1', machine: a}
  - {name: h2, ipv4: 10.0.0.2, ipv6: 'fd00::2', machine: a}
  - {name: h3, ipv4: 10.0.0.3, ipv6: 'fd00::3', machine: b}
  - {name: h4, ipv4: 10.0.0.4, ipv6: 'fd00::4', machine: b}
switches:
  - {name: s1, machine: a}
  - {name: s2, machine: b}
links:
  - {endpoints: [h1, s1], rate: 2G, delay: 1µs, mtu: 9000}
  - {endpoints: [h2, s1], rate: 2G, delay: 1µs, mtu: 9000}
  - {endpoints: [h3, s2], rate: 2G, delay: 1µs, mtu: 9000}
  - {endpoints: [h4, s2], rate: 2G, delay: 1µs, mtu: 9000}
  - {endpoints: [s1, s2], rate: 2G, delay: 500µs, mtu: 9000}
`

// underlayRate is the links' rate in partsTopology, in bits per second.
const underlayRate = 2e9

// machine is a "machine" of the multi-machine test: a network namespace of its own
// (not named like rocelab's, so that no lab's clean takes it) with one end of a veth
// to the underlay, and the state directory its part's CLI uses.
type machine struct {
	name, netns, veth, addr string
	cli                     *cli
}

// newMachines makes machines a and b (192.168.77.1 and .2) joined by the underlay,
// removed when the test ends.
func newMachines(t testing.TB, c *cli) (a, b *machine, u *underlay) {
	t.Helper()
	suffix := strconv.Itoa(os.Getpid() % 10000)
	a = &machine{name: "a", netns: "mach-a" + suffix, veth: "mmva" + suffix, addr: "192.168.77.1"}
	b = &machine{name: "b", netns: "mach-b" + suffix, veth: "mmvb" + suffix, addr: "192.168.77.2"}
	u = newUnderlay(t, suffix)
	for i, m := range []*machine{a, b} {
		ipCmd(t, "netns", "add", m.netns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", m.netns).Run() })
		m.cli = &cli{t: t, bin: c.bin, store: netns.Store{Root: t.TempDir()}}
		u.attach(t, i, m)
	}
	return a, b, u
}

// in returns rocelab args run inside the machine (its network namespace: the lab
// process binds the underlay there), with the machine's state directory.
func (m *machine) in(args ...string) *exec.Cmd {
	x := m.cli.cmd(args...)
	x.Args = append([]string{"nsenter", "--net=/run/netns/" + m.netns, m.cli.bin}, args...)
	x.Path = "/usr/bin/nsenter"
	return x
}

// upParts starts the lab's part on each machine and waits until each sees the other up.
func upParts(t testing.TB, name, topology, secret string, ms ...*machine) {
	t.Helper()
	for _, m := range ms {
		out, err := m.in("up", "-f", topology, "--name", name, "--machine", m.name, "--secret-file", secret).CombinedOutput()
		if err != nil {
			t.Fatalf("up --machine %s: %v\n%s", m.name, err, out)
		}
	}
	for _, m := range ms {
		waitPeer(t, m, name, "up")
	}
}

// partsOf reads a part's view of the other parts.
func partsOf(t testing.TB, m *machine, name string) *lab.PartsStatus {
	t.Helper()
	out, err := m.cli.cmd("status", "--lab", name, "--json").Output()
	if err != nil {
		t.Fatalf("status on machine %s: %v", m.name, err)
	}
	var st lab.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json on machine %s: %v\n%s", m.name, err, out)
	}
	if st.Parts == nil {
		t.Fatalf("status on machine %s shows no parts:\n%s", m.name, out)
	}
	return st.Parts
}

// waitPeer waits (bounded) until machine m's part sees every other part in state.
func waitPeer(t testing.TB, m *machine, name, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ps := partsOf(t, m, name)
		ok := len(ps.Peers) > 0
		for _, p := range ps.Peers {
			ok = ok && p.State == state
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine %s: the other parts are not %s: %+v", m.name, state, ps.Peers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMultiMachineLab: a lab over two "machines" (network namespaces joined by a veth
// underlay), each running one part: h1, h2 and s1 on a, h3, h4 and s2 on b, the s1–s2
// link a VXLAN tunnel. Across the tunnel, both ways, over IPv4 and IPv6: ping, the
// real ib_write_bw, rping, ib_write_bw -R and rocelab's write_bw. With delay and loss
// on the underlay (tc netem), the link's delay stays the declared one and the loss is
// counted. An HPCC incast h1, h2, h3 → h4 is compared with the same topology in one
// process. down on b removes both parts; in a second run, kill -9 of b's part ends a's
// transfer across it in error completions, a's status names b gone, and down on a and
// clean on b leave nothing on either machine.
func TestMultiMachineLab(t *testing.T) {
	c := newCLI(t)
	for _, tool := range []string{"ping", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps-system installs iputils-ping and ethtool as root)", tool)
		}
	}
	buildRDMACM(t, c)
	buildApps(t, c, "write_bw")
	a, b, u := newMachines(t, c)
	dir := t.TempDir()
	topology := filepath.Join(dir, "two-machines.yaml")
	secret := filepath.Join(dir, "lab.secret")
	if err := os.WriteFile(topology, []byte(partsTopology), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("a lab secret for the multi-machine test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := labName("mm")
	upParts(t, name, topology, secret, a, b)
	t.Cleanup(func() {
		a.cli.cmd("down", name).Run()
		b.cli.cmd("down", name).Run()
	})
	l := &ibverbsLab{cli: a.cli, name: name, parts: map[string]*cli{"h3": b.cli, "h4": b.cli}}

	t.Run("status", func(t *testing.T) { checkPartsStatus(t, a, b, name) })
	t.Run("exec-across", func(t *testing.T) { checkExecAcross(t, a, b, name) })
	t.Run("capture-across", func(t *testing.T) { checkCaptureAcross(t, l, a) })
	t.Run("metrics-whole-lab", func(t *testing.T) { checkMetricsWholeLab(t, a, name) })
	t.Run("ping", func(t *testing.T) {
		for _, p := range []struct{ from, to string }{{"h1", "10.0.0.3"}, {"h4", "10.0.0.2"}, {"h2", "fd00::4"}, {"h3", "fd00::1"}} {
			if out, err := l.exec(p.from, "ping", "-c", "3", "-i", "0.05", p.to).CombinedOutput(); err != nil {
				t.Errorf("ping %s → %s: %v\n%s", p.from, p.to, err, out)
			}
		}
	})
	crossings := []struct{ srv, cli, addr, gid string }{
		{"h3", "h1", "10.0.0.3", "1"}, {"h1", "h4", "10.0.0.1", "1"}, // IPv4 GIDs
		{"h4", "h2", "10.0.0.4", "2"}, {"h2", "h3", "10.0.0.2", "2"}, // IPv6 GIDs
	}
	for _, x := range crossings {
		t.Run(fmt.Sprintf("ib_write_bw/gid%s-%s-to-%s", x.gid, x.cli, x.srv), func(t *testing.T) {
			args := []string{"ib_write_bw", "-x", x.gid, "-n", "500"}
			srv, cli := l.pair(t, 18515, x.srv, args, x.cli, args, x.addr)
			for _, out := range []string{srv, cli} {
				if !strings.Contains(out, " 65536      500 ") {
					t.Errorf("ib_write_bw did not move 500 messages:\n%s", out)
				}
			}
			t.Logf("%s", lastLine(cli))
		})
		t.Run(fmt.Sprintf("write_bw/gid%s-%s-to-%s", x.gid, x.cli, x.srv), func(t *testing.T) {
			args := []string{"write_bw", "-x", x.gid, "-n", "500", "--report_gbits"}
			srv, cli := l.pair(t, 18515, x.srv, args, x.cli, args, x.addr)
			if _, ok := tableValue(cli, "65536", 3); !ok {
				t.Errorf("write_bw reported no bandwidth:\nserver:\n%s\nclient:\n%s", srv, cli)
			}
		})
	}
	for _, x := range []struct{ srv, cli, addr string }{{"h3", "h1", "10.0.0.3"}, {"h1", "h4", "fd00::1"}, {"h2", "h3", "10.0.0.2"}, {"h4", "h2", "fd00::4"}} {
		t.Run(fmt.Sprintf("rping/%s-to-%s-%s", x.cli, x.srv, x.addr), func(t *testing.T) {
			srv, cli := l.cmPair(t, x.srv, []string{"rping", "-s", "-a", x.addr, "-v", "-C", "10"},
				x.cli, []string{"rping", "-c", "-a", x.addr, "-v", "-C", "10"})
			if strings.Count(srv, "server ping data") < 10 || strings.Count(cli, "ping data") < 10 {
				t.Errorf("rping did not see 10 pings:\nserver:\n%s\nclient:\n%s", srv, cli)
			}
		})
	}
	// ib_write_bw -R over IPv4 only: Debian's perftest resolves the server for rdma_cm
	// with an AF_INET getaddrinfo ("Address family for hostname not supported" for an
	// IPv6 address, on rxe as here); rping covers rdma_cm over IPv6 above.
	for _, x := range []struct{ srv, cli, addr string }{{"h3", "h1", "10.0.0.3"}, {"h1", "h4", "10.0.0.1"}} {
		t.Run(fmt.Sprintf("ib_write_bw-R/%s-to-%s-%s", x.cli, x.srv, x.addr), func(t *testing.T) {
			srv, cli := l.cmPair(t, x.srv, []string{"ib_write_bw", "-R", "-n", "200"},
				x.cli, []string{"ib_write_bw", "-R", "-n", "200", x.addr})
			for _, out := range []string{srv, cli} {
				if !strings.Contains(out, "Data ex. method : rdma_cm") || !strings.Contains(out, " 65536      200 ") {
					t.Errorf("ib_write_bw -R did not move 200 messages over rdma_cm:\n%s", out)
				}
			}
		})
	}
	t.Run("underlay-capture", func(t *testing.T) { checkUnderlayCapture(t, l, a) })
	t.Run("impaired-underlay", func(t *testing.T) { checkImpairedUnderlay(t, l, a, b, u) })
	t.Run("hpcc-incast", func(t *testing.T) { checkPartsIncast(t, c, l, a, b, topology) })

	// down on either machine removes every part.
	out := b.cli.run("down", name)
	if !strings.Contains(out, "parts on a told to go down") {
		t.Errorf("down on b did not tell a:\n%s", out)
	}
	waitNoLab(t, a.cli, name) // a removes itself once told
	checkNothingLeft(t, name, a, b)

	t.Run("kill", func(t *testing.T) {
		// Without "retry: rxe", whose retry_cnt 7 retries forever as rxe's does: the
		// QPs to the killed part then run out of retries.
		topology := filepath.Join(dir, "two-machines-ibta-retry.yaml")
		if err := os.WriteFile(topology, []byte(strings.TrimPrefix(partsTopology, "retry: rxe\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		name := labName("mk")
		// Whatever fails, neither part outlives the test (both are gone when it passes).
		t.Cleanup(func() {
			a.cli.cmd("down", "--this-part", name).Run()
			b.cli.cmd("down", "--this-part", name).Run()
			b.cli.cmd("clean").Run()
		})
		upParts(t, name, topology, secret, a, b)
		checkPartKilled(t, &ibverbsLab{cli: a.cli, name: name, parts: map[string]*cli{"h3": b.cli, "h4": b.cli}}, a, b)
	})
}

// checkPartsStatus: each part shows the other up, its tunnel, and the other's hosts.
func checkPartsStatus(t *testing.T, a, b *machine, name string) {
	for _, m := range []*machine{a, b} {
		ps := partsOf(t, m, name)
		if len(ps.Tunnels) != 1 || ps.Tunnels[0].VNI != 5 || ps.Tunnels[0].DeclaredDelayUS != 500 {
			t.Errorf("machine %s: tunnels %+v, want one, VNI 5 (the fifth link), 500 µs", m.name, ps.Tunnels)
		}
		if len(ps.Remote) != 1 {
			t.Fatalf("machine %s: %d remote statuses, want the other part's", m.name, len(ps.Remote))
		}
		var hosts []string
		for _, h := range ps.Remote[0].Hosts {
			hosts = append(hosts, h.Name)
		}
		want := map[string]string{"a": "h3 h4", "b": "h1 h2"}[m.name]
		if strings.Join(hosts, " ") != want {
			t.Errorf("machine %s: the other part's hosts %v, want %s", m.name, hosts, want)
		}
	}
	out := a.cli.run("status", "--lab", name)
	for _, want := range []string{"this part: machine a", "192.168.77.2  up", "--- part on machine b", "h4 "} {
		if !strings.Contains(out, want) {
			t.Errorf("status on a lacks %q:\n%s", want, out)
		}
	}
}

// checkUnderlayCapture: tshark on machine a's underlay decodes the tunnel's datagrams
// as VXLAN carrying the lab's RoCEv2 frames, their telemetry unchanged.
func checkUnderlayCapture(t *testing.T, l *ibverbsLab, a *machine) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark is not installed (make deps-system installs it as root)")
	}
	pcap := filepath.Join(t.TempDir(), "underlay.pcapng")
	capture := exec.Command("ip", "netns", "exec", a.netns, "tshark", "-i", a.veth, "-f", "udp port 4789", "-c", "300", "-w", pcap)
	stderr, err := capture.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	defer capture.Process.Kill()
	var head []byte
	buf := make([]byte, 512)
	for !bytes.Contains(head, []byte("Capturing on")) { // tshark says so once it captures
		n, err := stderr.Read(buf)
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, head)
		}
		head = append(head, buf[:n]...)
	}
	args := []string{"write_bw", "-x", "1", "-s", "4096", "-n", "300"}
	l.pair(t, 18515, "h3", args, "h1", args, "10.0.0.3")
	if err := capture.Wait(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	out, err := exec.Command("tshark", "-r", pcap, "-T", "fields", "-e", "frame.protocols", "-e", "vxlan.vni").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	roce := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "udp:vxlan:eth:ethertype:ip:udp:infiniband") && strings.HasSuffix(line, "\t5") {
			roce++
		}
	}
	if roce < 100 {
		t.Errorf("%d of 300 underlay frames decode as VXLAN (VNI 5) carrying RoCEv2:\n%s", roce, out)
	}
	t.Logf("%d of 300 underlay frames decode as VXLAN VNI 5 → Ethernet → IPv4 → UDP → InfiniBand (RoCEv2)", roce)
}

// checkExecAcross: rocelab exec on one machine runs a command in a host of the other
// part, with its standard streams and exit status relayed.
func checkExecAcross(t *testing.T, a, b *machine, name string) {
	for _, x := range []struct {
		m          *machine
		host, addr string
	}{{a, "h3", "10.0.0.3"}, {b, "h1", "10.0.0.1"}} {
		// The CLI runs on the machine (its network namespace), as a user's would.
		c := x.m.in("exec", "--lab", name, x.host, "--", "sh", "-c", "cat; hostname; ip -4 -o addr show; exit 3")
		c.Stdin = strings.NewReader("from machine " + x.m.name + "\n")
		out, err := c.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("exec %s on machine %s: %v, want exit status 3\n%s", x.host, x.m.name, err, out)
		}
		for _, want := range []string{"from machine " + x.m.name, x.host + "\n", x.addr + "/"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("exec %s on machine %s: output lacks %q:\n%s", x.host, x.m.name, want, out)
			}
		}
	}
	if out, err := a.in("exec", "--lab", name, "h9", "--", "true").CombinedOutput(); err == nil || !strings.Contains(string(out), `no host "h9"`) {
		t.Errorf("exec in a host no part has: %v\n%s", err, out)
	}
}

// checkCaptureAcross: rocelab capture on machine a of a port of b's switch (s2:p0,
// towards h3) writes the pcapng b's part captures, here.
func checkCaptureAcross(t *testing.T, l *ibverbsLab, a *machine) {
	file := filepath.Join(t.TempDir(), "s2p0.pcapng")
	capture := a.in("capture", "--lab", l.name, "s2:p0", "-w", file, "--duration", "2s")
	var stderr bytes.Buffer
	capture.Stderr = &stderr
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	// Pings to h3 cross s2:p0 while the capture runs (they start within its 2 s).
	l.exec("h1", "ping", "-c", "10", "-i", "0.1", "10.0.0.3").Run()
	if err := capture.Wait(); err != nil {
		t.Fatalf("capture s2:p0 on machine a: %v\n%s", err, stderr.String())
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("%s is not pcapng: %v\n%s", file, err, stderr.String())
	}
	frames := 0
	for {
		if _, _, err := r.ReadPacketData(); err != nil {
			break
		}
		frames++
	}
	if frames < 10 || !strings.Contains(stderr.String(), "captured") {
		t.Errorf("the capture of s2:p0 from machine a holds %d frames (want the 10 pings and their replies at least):\n%s", frames, stderr.String())
	}
}

// checkMetricsWholeLab: rocelab metrics on machine a exports b's hosts and ports too.
func checkMetricsWholeLab(t *testing.T, a *machine, name string) {
	m := a.cli.cmd("metrics", "--lab", name, "--listen", "127.0.0.1:0")
	stderr, err := m.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { m.Process.Kill(); m.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("rocelab metrics: %v", err)
	}
	url := regexp.MustCompile(`http://\S+/metrics`).FindString(line)
	if url == "" {
		t.Fatalf("rocelab metrics printed no address: %q", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`host="h1"`, `host="h4"`, `port="s1:p2"`, `port="s2:p1"`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics on machine a lack %s", want)
		}
	}
}

// minRTT pings to from host and returns the least round trip.
func minRTT(t *testing.T, l *ibverbsLab, host, to string) float64 {
	t.Helper()
	out, err := l.exec(host, "ping", "-c", "30", "-i", "0.01", to).CombinedOutput()
	if err != nil {
		t.Fatalf("ping %s → %s: %v\n%s", host, to, err, out)
	}
	m := regexp.MustCompile(`= ([0-9.]+)/`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("ping printed no round trips:\n%s", out)
	}
	ms, _ := strconv.ParseFloat(string(m[1]), 64)
	return ms * 1000
}

// checkImpairedUnderlay: 100 µs more delay each way on the underlay does not lengthen
// the tunnel link, declared 500 µs (the receiving part releases frames at the model's
// arrival); 2 % loss on the underlay is lost on the link and counted as the
// underlay's.
func checkImpairedUnderlay(t *testing.T, l *ibverbsLab, a, b *machine, u *underlay) {
	before := minRTT(t, l, "h1", "10.0.0.3")
	restore := u.impair(t, 100*time.Microsecond, 0)
	with := minRTT(t, l, "h1", "10.0.0.3")
	restore()
	lost := func() uint64 {
		return partsOf(t, a, l.name).Tunnels[0].UnderlayLost + partsOf(t, b, l.name).Tunnels[0].UnderlayLost
	}
	lost0 := lost()
	restore = u.impair(t, 0, 0.02)
	// Lost frames are lost pings: the count is checked, not the exit status.
	l.exec("h1", "ping", "-c", "400", "-i", "0.002", "-W", "1", "10.0.0.3").Run()
	restore()
	n := lost() - lost0
	t.Logf("min RTT h1 → h3: %.0f µs; with 100 µs more each way on the underlay %.0f µs; %d datagrams of about 800 lost at 2 %%", before, with, n)
	if with-before > 100 {
		t.Errorf("the underlay's 200 µs more round trip lengthened the link by %.0f µs: the receiving part did not absorb it", with-before)
	}
	if n < 4 || n > 48 {
		t.Errorf("2 %% loss on ~800 datagrams: the parts counted %d lost, want about 16", n)
	}
}

// incastFigures are the bottleneck's (s2:p1, towards h4) utilization and mean queue
// while the three senders run.
type incastFigures struct{ util, queueKB float64 }

// runIncast runs rocelab's write_bw from h1, h2 and h3 to h4 for 4 s and reads the
// bottleneck through the receiver's part (rec: its CLI).
func runIncast(t *testing.T, l *ibverbsLab, rec *cli) (incastFigures, bool) {
	t.Helper()
	base := []string{"write_bw", "-x", "1", "-D", "4", "-e", "-Q", "16"}
	var servers []*exec.Cmd
	for i := range 3 {
		srv := l.exec("h4", append(base, "-p", strconv.Itoa(18600+i))...)
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, srv)
		done := make(chan struct{})
		go func() { srv.Wait(); close(done) }()
		l.waitListening(t, "h4", 18600+i, srv, done)
	}
	defer func() {
		for _, s := range servers {
			s.Process.Kill()
		}
	}()
	if _, err := lab.Query(rec.store, l.name, lab.Request{Op: "record", EveryNs: int64(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var clients []*exec.Cmd
	var outs []*bytes.Buffer
	for i, h := range []string{"h1", "h2", "h3"} {
		cl := l.exec(h, append(base, "-p", strconv.Itoa(18600+i), "10.0.0.4")...)
		var out bytes.Buffer
		cl.Stdout, cl.Stderr = &out, &out
		if err := cl.Start(); err != nil {
			t.Fatal(err)
		}
		clients, outs = append(clients, cl), append(outs, &out)
	}
	for i, cl := range clients {
		if err := cl.Wait(); err != nil {
			t.Fatalf("write_bw %d: %v\n%s", i, err, outs[i])
		}
	}
	reply, err := lab.Query(rec.store, l.name, lab.Request{Op: "record"})
	if err != nil {
		t.Fatal(err)
	}
	rows := reply.Recorded
	// The window: from when all three send (the bottleneck full) to when the first
	// ends, trimmed by 10 % at each end.
	var busy []lab.Counters
	for _, r := range rows {
		if len(r.Switches["s2"]) > 1 {
			busy = append(busy, r)
		}
	}
	if len(busy) < 100 {
		t.Fatalf("%d rows recorded", len(busy))
	}
	first, last := -1, -1
	for i := 1; i < len(busy); i++ {
		dt := float64(busy[i].TimeNs - busy[i-1].TimeNs)
		rate := float64(busy[i].Switches["s2"][1].TxBytes-busy[i-1].Switches["s2"][1].TxBytes) * 8e9 / dt
		if rate > 0.5*underlayRate {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || last-first < 200 {
		t.Logf("the bottleneck never ran above half its rate for 200 ms (%d..%d)", first, last)
		return incastFigures{}, false
	}
	trim := (last - first) / 10
	r0, r1 := busy[first+trim], busy[last-trim]
	dt := float64(r1.TimeNs - r0.TimeNs)
	p0, p1 := r0.Switches["s2"][1], r1.Switches["s2"][1]
	f := incastFigures{util: float64(p1.TxBytes-p0.TxBytes) * 8e9 / dt / underlayRate,
		queueKB: float64(p1.QueueArea-p0.QueueArea) / dt / 1e3}
	return f, true
}

// lateMark is the timer lateness (µs) summed over every loop of a lab's parts, and
// their timers, at one moment: the start of an interval whose lateness is judged.
type lateMark struct {
	name   string
	clis   []*cli
	sumUS  float64
	timers uint64
}

// markLateness reads lab name's loops through the CLI of each of its parts.
func markLateness(t testing.TB, name string, clis ...*cli) lateMark {
	t.Helper()
	m := lateMark{name: name, clis: clis}
	for _, c := range clis {
		reply, err := lab.Query(c.store, name, lab.Request{Op: "status"})
		if err != nil {
			t.Fatal(err)
		}
		for _, lp := range reply.Status.Loops {
			m.sumUS, m.timers = m.sumUS+lp.LateSumUS, m.timers+lp.Timers
		}
	}
	return m
}

// since is the loops' lateness from m until now, as Metrics for KeptUp to judge.
func (m lateMark) since(t testing.TB) experiment.Metrics {
	t.Helper()
	now := markLateness(t, m.name, m.clis...)
	n := now.timers - m.timers
	return experiment.Metrics{LoopLateness: &experiment.LoopLateness{Timers: n, MeanUS: (now.sumUS - m.sumUS) / float64(max(1, n))}}
}

// timedIncast runs runIncast and skips the test, saying why, when the run shows the
// machine did not keep up (the loops' mean timer lateness during it, judged by
// experiment.Metrics.KeptUp as the real-time tests judge) or the bottleneck never
// filled (the senders themselves short of CPU): the figures would measure the CPU.
func timedIncast(t *testing.T, what string, l *ibverbsLab, rec *cli, clis ...*cli) incastFigures {
	t.Helper()
	start := markLateness(t, l.name, clis...)
	f, filled := runIncast(t, l, rec)
	kept, why := start.since(t).KeptUp()
	switch {
	case !kept:
		t.Skipf("%s: %s; not judged", what, why)
	case !filled:
		t.Skipf("%s: the bottleneck never ran above half its rate for 200 ms (%s): not judged", what, why)
	}
	t.Logf("%s: %s", what, why)
	return f
}

// checkPartsIncast: the HPCC incast over the two parts against the same topology in
// one process: the bottleneck's utilization and queue within 5 %.
func checkPartsIncast(t *testing.T, c *cli, l *ibverbsLab, a, b *machine, topology string) {
	split := timedIncast(t, "two parts", l, b.cli, a.cli, b.cli)
	one := onePartTopology(partsTopology)
	onePath := filepath.Join(t.TempDir(), "one-process.yaml")
	if err := os.WriteFile(onePath, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	single := &ibverbsLab{cli: c, name: labName("m1")}
	c.run("up", "-f", onePath, "--name", single.name)
	defer c.run("down", single.name)
	whole := timedIncast(t, "one process", single, c, c)
	t.Logf("bottleneck s2→h4: two parts %.1f %% utilized, mean queue %.1f KB; one process %.1f %%, %.1f KB",
		100*split.util, split.queueKB, 100*whole.util, whole.queueKB)
	if d := split.util/whole.util - 1; d > 0.05 || d < -0.05 {
		t.Errorf("utilization differs by %.1f %%", 100*d)
	}
	// A queue is compared relative to the bottleneck's bandwidth-delay product when both
	// are below it: HPCC holds it near empty, where 5 % of a few hundred bytes is noise.
	bdpKB := underlayRate / 8 * 1.1e-3 / 1e3
	if d := split.queueKB - whole.queueKB; d > 0.05*max(whole.queueKB, bdpKB) || -d > 0.05*max(whole.queueKB, bdpKB) {
		t.Errorf("mean queue differs by %.1f KB (bandwidth-delay product %.0f KB)", d, bdpKB)
	}
}

// checkPartKilled: kill -9 of b's part: a's transfer to h3 ends in error completions,
// a's status names b gone; down on a and clean on b leave nothing.
func checkPartKilled(t *testing.T, l *ibverbsLab, a, b *machine) {
	args := []string{"write_bw", "-x", "1", "-D", "60"}
	srv := l.exec("h3", args...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	srvDone := make(chan struct{})
	go func() { srv.Wait(); close(srvDone) }()
	l.waitListening(t, "h3", 18515, srv, srvDone)
	cl := l.exec("h1", append(args, "10.0.0.3")...)
	var out bytes.Buffer
	cl.Stdout, cl.Stderr = &out, &out
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	clDone := make(chan error, 1)
	go func() { clDone <- cl.Wait() }()
	// Kill b's lab process once the transfer runs across the tunnel.
	deadline := time.Now().Add(20 * time.Second)
	for partsOf(t, a, l.name).Tunnels[0].Sent < 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("no transfer across the tunnel:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec, err := b.cli.store.Load(l.name)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(rec.Owner.PID, syscall.SIGKILL)
	select {
	case err := <-clDone:
		if err == nil || !strings.Contains(out.String(), "Completion with error") {
			t.Errorf("write_bw across the killed part: %v, want an error completion (retries exceeded):\n%s", err, out.String())
		}
	case <-time.After(45 * time.Second):
		cl.Process.Kill()
		t.Fatalf("write_bw did not end after its peer's part was killed:\n%s", out.String())
	}
	waitPeer(t, a, l.name, "gone")
	if st := a.cli.run("status", "--lab", l.name); !strings.Contains(st, "GONE") {
		t.Errorf("status on a does not show b gone:\n%s", st)
	}
	down := a.cli.run("down", l.name)
	if !strings.Contains(down, "parts on b unreachable") {
		t.Errorf("down on a does not say b is unreachable:\n%s", down)
	}
	b.cli.run("clean")
	<-srvDone
	checkNothingLeft(t, l.name, a, b)
}

// checkNothingLeft: no namespace, state or process of lab name on either machine.
func checkNothingLeft(t *testing.T, name string, ms ...*machine) {
	t.Helper()
	if ns := namespacesOf(t, name); len(ns) > 0 {
		t.Errorf("namespaces left: %v", ns)
	}
	for _, m := range ms {
		if _, err := m.cli.store.Load(name); err == nil {
			t.Errorf("machine %s still records lab %s", m.name, name)
		}
		if out, _ := exec.Command("ip", "netns", "pids", m.netns).Output(); len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("processes left in machine %s: %s", m.name, out)
		}
	}
}

// cpuSeconds is the CPU time pid has used (user and system), from /proc/PID/stat.
func cpuSeconds(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64) // fields 14 and 15 of the line
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// labPID is the lab process of lab name in c's state directory.
func labPID(tb testing.TB, c *cli, name string) int {
	tb.Helper()
	rec, err := c.store.Load(name)
	if err != nil {
		tb.Fatal(err)
	}
	return rec.Owner.PID
}

// BenchmarkLabTunnel runs perftest's ib_write_bw (64 KiB) and ib_send_lat (64 B) from h1
// to h3 across the tunnel of a lab in two parts (partsTopology at 10 Gb/s, two
// namespace machines on a veth underlay, TestMultiMachineLab's) and the same in the
// same topology run by one process, and the CPU each lab process spent per GB moved.
func BenchmarkLabTunnel(b *testing.B) {
	c := newCLI(b)
	buildLibibverbs(b, filepath.Dir(c.bin))
	if _, err := exec.LookPath("ethtool"); err != nil {
		b.Skip("ethtool is not installed (make deps-system installs it as root)")
	}
	ma, mb, _ := newMachines(b, c)
	dir := b.TempDir()
	topo10G := strings.ReplaceAll(partsTopology, "rate: 2G", "rate: 10G")
	split, one := filepath.Join(dir, "two-machines.yaml"), filepath.Join(dir, "one-process.yaml")
	secret := filepath.Join(dir, "lab.secret")
	for f, text := range map[string]string{split: topo10G, one: onePartTopology(topo10G), secret: "a lab secret for the tunnel benchmark\n"} {
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	name := labName("tb")
	upParts(b, name, split, secret, ma, mb)
	defer mb.cli.cmd("down", name).Run()
	parts := &ibverbsLab{cli: ma.cli, name: name, parts: map[string]*cli{"h3": mb.cli, "h4": mb.cli}}
	whole := &ibverbsLab{cli: c, name: labName("tb1")}
	c.run("up", "-f", one, "--name", whole.name)
	defer c.run("down", whole.name)

	bwArgs := []string{"ib_write_bw", "-x", "1", "-s", "65536", "-n", "20000", "--report_gbits"}
	latArgs := []string{"ib_send_lat", "-x", "1", "-s", "64", "-n", "5000"}
	// measure runs the pair in l and returns the bandwidth (Gb/s), the p50 latency (µs)
	// and the CPU seconds per GB moved of each of the lab processes pids.
	measure := func(l *ibverbsLab, pids ...int) (gbps, latUS float64, cpuPerGB []float64) {
		cpu0 := make([]float64, len(pids))
		for i, p := range pids {
			cpu0[i] = cpuSeconds(b, p)
		}
		_, out := l.pair(b, pingpongPort, "h3", bwArgs, "h1", bwArgs, "10.0.0.3")
		gbps, ok := tableValue(out, "65536", 3)
		for i, p := range pids {
			cpuPerGB = append(cpuPerGB, (cpuSeconds(b, p)-cpu0[i])/(20000*65536/1e9))
		}
		_, out2 := l.pair(b, pingpongPort, "h3", latArgs, "h1", latArgs, "10.0.0.3")
		latUS, ok2 := tableValue(out2, "64", 4)
		if !ok || !ok2 {
			b.Fatalf("a tool printed no result row:\n%s\n%s", out, out2)
		}
		return gbps, latUS, cpuPerGB
	}
	for b.Loop() {
		tBW, tLat, tCPU := measure(parts, labPID(b, ma.cli, name), labPID(b, mb.cli, name))
		oBW, oLat, oCPU := measure(whole, labPID(b, c, whole.name))
		ps := partsOf(b, ma, name)
		b.ReportMetric(tBW, "tunnel-Gb/s")
		b.ReportMetric(oBW, "one-process-Gb/s")
		b.ReportMetric(tLat, "tunnel-p50-µs")
		b.ReportMetric(oLat, "one-process-p50-µs")
		b.ReportMetric(tCPU[0], "part-a-CPU-s/GB")
		b.ReportMetric(tCPU[1], "part-b-CPU-s/GB")
		b.ReportMetric(oCPU[0], "one-process-CPU-s/GB")
		b.ReportMetric(ps.Peers[0].OneWayUS, "underlay-one-way-µs")
		fmt.Printf("tunnel: %.2f Gb/s, %.1f µs p50, CPU %.2f + %.2f s/GB; one process: %.2f Gb/s, %.1f µs, CPU %.2f s/GB; underlay one-way %.0f µs, %d of %d datagrams late by %.0f µs on average\n",
			tBW, tLat, tCPU[0], tCPU[1], oBW, oLat, oCPU[0], ps.Peers[0].OneWayUS, ps.Tunnels[0].Late, ps.Tunnels[0].Received, ps.Tunnels[0].MeanLateUS)
	}
}

// onePartTopology is a topology placed on machines with the placement taken out: the
// same lab in one process.
func onePartTopology(topology string) string {
	return regexp.MustCompile(`(?m)^machines:\n(  - .*\n)+|, machine: [ab]`).ReplaceAllString(topology, "")
}
