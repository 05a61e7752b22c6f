package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// preload is Debian's librspreload.so (librdmacm1): it turns a program's TCP sockets
// into rsockets, calling the r* functions of the librdmacm.so.1 it finds.
const preload = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"

func init() {
	// What the rsockets programs print when the server's host rejects the connection
	// for want of a listener (cmRun starts such a client again).
	noListener = append(noListener, "rconnect: Connection refused", "unable to connect to server",
		"): Connection refused", "rsend: Connection refused")
}

// newRsocketLab is newRDMACMLab for the rsockets programs: rdmacm-utils' rstream,
// riostream and rcopy, and iperf3 and socat under librspreload.so.
func newRsocketLab(t testing.TB) *ibverbsLab {
	for _, p := range []string{"rstream", "riostream", "rcopy", "udpong", "iperf3", "socat", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (make deps-system installs rdmacm-utils, iperf3 and socat as root)", p)
		}
	}
	if _, err := os.Stat(preload); err != nil {
		t.Skip("librspreload.so is not installed (librdmacm1)")
	}
	return newRDMACMLab(t)
}

// TestRsockets: rdmacm-utils' rsockets programs between lab hosts, both ways, over IPv4
// and IPv6, on rocelab's librdmacm (librdmacm/rsocket.c): rstream in each of its
// rsockets modes (-T a async with rpoll, b blocking, n non-blocking, v verifying every
// byte, r resolving with rdma_getaddrinfo), riostream (riomap'd buffers written with
// riowrite), rcopy (a file copied and compared).
func TestRsockets(t *testing.T) {
	l := newRsocketLab(t)
	ways := []struct{ name, srv, cli, addr, flag string }{
		{"h2-to-h1-ipv4", "h1", "h2", "10.0.0.1", "ip"},
		{"h1-to-h2-ipv4", "h2", "h1", "10.0.0.2", "ip"},
		{"h2-to-h1-ipv6", "h1", "h2", "fd00::1", "ipv6"},
		{"h1-to-h2-ipv6", "h2", "h1", "fd00::2", "ipv6"},
	}
	for i, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			for _, mode := range []string{"a", "b", "n", "v", "r"} {
				args := []string{"-T", mode, "-S", "300000", "-C", "20", "-f", w.flag}
				if mode != "v" {
					args = append(args, "-T", "v") // and verify every byte
				}
				srv, cli := l.cmPair(t, w.srv, append([]string{"rstream"}, args...),
					w.cli, append([]string{"rstream", "-s", w.addr}, args...))
				checkPerf(t, "rstream -T "+mode, srv, cli)
			}
			args := []string{"-T", "v", "-S", "65536", "-C", "10", "-I", "2", "-f", w.flag}
			srv, cli := l.cmPair(t, w.srv, append([]string{"riostream"}, args...),
				w.cli, append([]string{"riostream", "-s", w.addr}, args...))
			checkPerf(t, "riostream", srv, cli)
			rcopyPair(t, l, w.srv, w.cli, w.addr, strconv.Itoa(7500+i))
		})
	}
}

// TestUdpong: rdmacm-utils' udpong, datagram rsockets, between lab hosts, both ways,
// over IPv4 and IPv6, in each of its modes (-T s the kernel's UDP sockets for
// comparison, a async with rpoll, b blocking, n non-blocking, e every datagram echoed).
// The first datagram goes over UDP and tells the server the client's UD QP; the rest
// go as UD SENDs: from h2, the data leaves as RDMA payload and not through the TAP.
func TestUdpong(t *testing.T) {
	l := newRsocketLab(t)
	ways := []struct{ name, srv, cli, addr string }{
		{"h2-to-h1-ipv4", "h1", "h2", "10.0.0.1"},
		{"h1-to-h2-ipv4", "h2", "h1", "10.0.0.2"},
		{"h2-to-h1-ipv6", "h1", "h2", "fd00::1"},
		{"h1-to-h2-ipv6", "h2", "h1", "fd00::2"},
	}
	// librdmacm/test/dgram_check.c, in h1: the calls' error paths beside the kernel's
	// UDP sockets', and two rsockets of one host through its RNIC (two UD QPs of one
	// RNIC), over IPv4 and IPv6.
	t.Run("dgram_check", func(t *testing.T) {
		out, err := l.exec("h1", "dgram_check", "10.0.0.1", "fd00::1").CombinedOutput()
		if err != nil || strings.Contains(string(out), "FAIL") {
			t.Fatalf("dgram_check: %v\n%s", err, out)
		}
		t.Logf("dgram_check: %d checks", strings.Count(string(out), "ok   "))
	})
	const size, count = 1000, 2000
	for i, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			for j, mode := range []string{"s", "a", "b", "n", "e"} {
				port := strconv.Itoa(7600 + 10*i + j)
				before := l.traffic(t)
				out := l.cmServing(t, w.srv, []string{"udpong", "-b", w.addr, "-p", port, "-T", mode},
					w.cli, []string{"udpong", "-s", w.addr, "-p", port, "-T", mode, "-S", strconv.Itoa(size), "-C", strconv.Itoa(count)})
				after := l.traffic(t)
				// The server serves until killed, and udpong's non-blocking modes
				// spin: left running, they would starve the lab of the 2 cores.
				exec.Command("pkill", "-f", "^udpong .*-p "+port+" ").Run()
				f := strings.Fields(lastLine(out))
				if len(f) != 7 || f[0] != "custom" || f[2] == "0" {
					t.Fatalf("udpong -T %s did not complete:\n%s", mode, out)
				}
				if mode == "e" && f[2] != "4k" {
					t.Errorf("udpong -T e: %s transfers, want 4k (2,000 echoed)\n%s", f[2], out)
				}
				t.Logf("udpong -T %s: %d x %d bytes, the server took %s: %s Gb/s, %s us/transfer", mode, count, size, f[2], f[5], f[6])
				if w.cli == "h2" && mode != "s" {
					after.checkRDMA(t, "udpong -T "+mode, before, size*count*9/10)
				}
			}
		})
	}
}

// TestUdpongBadInput: datagrams that do not follow the protocol, sent to a udpong
// server's UDP port between two clients (junk, a short header, a wrong tag, version or
// op, an IPv6 header from an IPv4 source, 3,000 random bytes), are dropped: the
// server then serves the second client as if they had not come.
func TestUdpongBadInput(t *testing.T) {
	l := newRsocketLab(t)
	const port = "7690"
	junk := []string{
		`printf 'not an rsocket datagram'`,
		`printf 'UUUU\004'`,
		`printf 'VVVV\004\000\020\000\000\000\000\001\012\000\000\002'`,
		`printf 'UUUU\011\000\020\000\000\000\000\001\012\000\000\002'`,
		`printf 'UUUU\004\003\020\000\000\000\000\001\012\000\000\002data'`,
		`printf 'UUUU\006\000\034\000\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\001'`,
		`head -c 3000 /dev/urandom`,
	}
	// A first client run makes sure the server is up (cmServing starts the script again
	// while the server's host refuses it).
	var script strings.Builder
	script.WriteString("udpong -s 10.0.0.1 -p " + port + " -T b -S 100 -C 10 && ")
	for _, j := range junk {
		fmt.Fprintf(&script, "%s | socat -u - UDP4-SENDTO:10.0.0.1:%s; ", j, port)
	}
	script.WriteString("udpong -s 10.0.0.1 -p " + port + " -T b -S 1000 -C 500 -T e")
	out := l.cmServing(t, "h1", []string{"udpong", "-b", "10.0.0.1", "-p", port, "-T", "b"},
		"h2", []string{"sh", "-c", script.String()})
	exec.Command("pkill", "-f", "^udpong .*-p "+port+" ").Run()
	if f := strings.Fields(lastLine(out)); len(f) != 7 || f[0] != "custom" || f[2] != "1k" {
		t.Fatalf("udpong after bad datagrams: want 1,000 echoed transfers:\n%s", out)
	}
	t.Logf("after %d bad datagrams: %s", len(junk), lastLine(out))
}

// checkPerf checks that both ends of rstream or riostream printed their result line
// (a data verification failure prints instead).
func checkPerf(t *testing.T, what, srv, cli string) {
	t.Helper()
	for _, out := range []string{srv, cli} {
		if !strings.Contains(out, "custom ") || strings.Contains(out, "failed") {
			t.Errorf("%s did not complete:\nserver:\n%s\nclient:\n%s", what, srv, cli)
			return
		}
	}
	t.Logf("%s: %s", what, lastLine(cli))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// rcopyPair copies a 3 MB file from cli to srv with rcopy on port and compares it. rcopy
// takes "server:destination", which cannot hold an IPv6 literal: the client names the
// server "rs-peer", an /etc/hosts line bind-mounted in a mount namespace of its own.
// The rcopy server serves until the lab goes down, so each pair takes a port of its own.
func rcopyPair(t *testing.T, l *ibverbsLab, srv, cli, addr, port string) {
	t.Helper()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src.bin"), filepath.Join(dir, "dst.bin")
	data := make([]byte, 3<<20)
	rand.Read(data)
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, []byte(addr+" rs-peer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := l.cmServing(t, srv, []string{"rcopy", "-p", port}, cli, []string{"unshare", "-m", "sh", "-c",
		fmt.Sprintf("mount --bind %s /etc/hosts && rcopy %s rs-peer:%s -p %s", hosts, src, dst, port)})
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("rcopy to %s: the copy differs from the file (%v)\n%s", addr, err, out)
	}
	t.Logf("rcopy: %s", lastLine(out))
}

// TestRspreload: iperf3 and socat, unmodified, under LD_PRELOAD=librspreload.so between
// lab hosts: their TCP sockets are rsockets, so the data goes over the soft-RNICs'
// RDMA (the sending RNIC's RDMA payload grows by at least the data) and not through
// the kernel's TCP (the TAP netdevs carry almost nothing). The same iperf3 over the
// kernel's TCP through the TAPs is the comparison, logged with the rsockets one.
func TestRspreload(t *testing.T) {
	l := newRsocketLab(t)
	for i, w := range []struct{ name, addr, socat, listen string }{
		{"ipv4", "10.0.0.1", "TCP:10.0.0.1", "TCP-LISTEN"},
		{"ipv6", "fd00::1", "TCP6:[fd00::1]", "TCP6-LISTEN"},
	} {
		t.Run(w.name, func(t *testing.T) {
			kernel := iperf(t, l, w.addr, false, strconv.Itoa(5301+2*i))
			rdma := iperf(t, l, w.addr, true, strconv.Itoa(5302+2*i))
			t.Logf("iperf3 h2 -> h1 (%s), 3 s: rsockets %.2f Gb/s, kernel TCP through the TAP %.2f Gb/s",
				w.name, rdma/1e9, kernel/1e9)

			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src.bin"), filepath.Join(dir, "dst.bin")
			data := make([]byte, 8<<20)
			rand.Read(data)
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			// socat's OPEN: and CREATE: addresses crash under librspreload.so with
			// Debian's own librdmacm as well; the shell's redirections do the files.
			before := l.traffic(t)
			port := 7471 + i
			l.cmPair(t, "h1", []string{"sh", "-c", fmt.Sprintf("LD_PRELOAD=%s socat -u %s:%d,reuseaddr STDOUT > %s", preload, w.listen, port, dst)},
				"h2", []string{"sh", "-c", fmt.Sprintf("LD_PRELOAD=%s socat -u STDIN %s:%d < %s", preload, w.socat, port, src)})
			after := l.traffic(t)
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("socat: the copy differs from the file (%v)", err)
			}
			after.checkRDMA(t, "socat", before, uint64(len(data)))
		})
	}
}

// traffic is what crossed h2's side of the lab: its RNIC's RDMA payload and its TAP's
// kernel frames.
type traffic struct{ rdma, tap uint64 }

func (l *ibverbsLab) traffic(t testing.TB) traffic {
	t.Helper()
	h := l.rnicStats(t, "h2")
	// /proc/net/dev is the namespace's (sysfs is the machine's): "tap: rx_bytes ...
	// (8 receive counters) tx_bytes ..."
	out, err := l.exec("h2", "cat", "/proc/net/dev").Output()
	if err != nil {
		t.Fatalf("netdev counters of h2: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, counters, ok := strings.Cut(line, ":")
		if f := strings.Fields(counters); ok && strings.TrimSpace(name) == h.Tap && len(f) > 8 {
			tap, err := strconv.ParseUint(f[8], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return traffic{h.RNIC.TxDataBytes, tap}
		}
	}
	t.Fatalf("h2's /proc/net/dev has no %s:\n%s", h.Tap, out)
	return traffic{}
}

// checkRDMA checks that n bytes left h2 as RDMA payload and not through its TAP
// (ARP/NDP and the like aside).
func (a traffic) checkRDMA(t testing.TB, what string, b traffic, n uint64) {
	t.Helper()
	rdma, tap := a.rdma-b.rdma, a.tap-b.tap
	t.Logf("%s: %d bytes of data, h2's RNIC sent %d bytes of RDMA payload, its TAP %d bytes", what, n, rdma, tap)
	if rdma < n || tap > n/100 {
		t.Errorf("%s's %d bytes did not go over RDMA: RNIC payload +%d, TAP +%d bytes", what, n, rdma, tap)
	}
}

// iperf runs a 3-second iperf3 from h2 to h1 on port (under librspreload.so with
// rsockets) and returns the receiver's bits per second, checking where the data went.
// Each run has a port of its own: a stopped server lives on until the lab goes down,
// and librspreload's client, refused by the rsockets server not listening yet, would
// try the kernel's TCP and find an earlier kernel server there.
func iperf(t testing.TB, l *ibverbsLab, addr string, rsockets bool, port string) float64 {
	t.Helper()
	env := ""
	srv := []string{"iperf3", "-s", "-p", port}
	if rsockets {
		env = "LD_PRELOAD=" + preload + " "
		srv = append([]string{"env", "LD_PRELOAD=" + preload}, srv...)
	}
	// iperf3 -J exits 0 when it cannot connect (the error is in the JSON): fail then,
	// so that cmRun starts the client again while the server is not listening yet.
	cli := []string{"sh", "-c", fmt.Sprintf(`out=$(%siperf3 -c %s -p %s -t 3 -J); echo "$out"; `+
		`case "$out" in *"unable to connect to server"*) exit 1;; esac`, env, addr, port)}
	// The client's JSON has both ends' numbers, so the server is stopped once the
	// client is done (iperf3 -s -1 twice did not exit within 30 s of its client's end).
	before := l.traffic(t)
	out := l.cmServing(t, "h1", srv, "h2", cli)
	after := l.traffic(t)
	var r struct {
		End struct {
			Sent     struct{ Bytes uint64 } `json:"sum_sent"`
			Received struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.End.Sent.Bytes == 0 {
		t.Fatalf("iperf3 -J: %v\n%s", err, out)
	}
	if rsockets {
		after.checkRDMA(t, "iperf3 over rsockets", before, r.End.Sent.Bytes)
	} else if tap := after.tap - before.tap; tap < r.End.Sent.Bytes {
		t.Errorf("iperf3 over the kernel's TCP sent %d bytes, h2's TAP only %d", r.End.Sent.Bytes, tap)
	}
	return r.End.Received.BitsPerSecond
}

// BenchmarkLabRsockets measures, between h1 and h2 of one lab in one run, iperf3 under
// librspreload.so (rsockets) against iperf3 over the kernel's TCP through the TAPs, and
// rstream's bandwidth (64 KiB transfers) and latency (64 B ping-pong, half a round
// trip) against perftest's ib_write_bw and ib_send_lat on the same RNICs.
func BenchmarkLabRsockets(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("lab benchmarks need root (namespaces and TAPs)")
	}
	l := newRsocketLab(b)
	// rstream's row for a custom size: custom, bytes, xfers, iters, total, time,
	// Gb/sec, usec/xfer.
	rstream := func(args ...string) []string {
		args = append([]string{"rstream"}, args...)
		srv, cli := l.cmPair(b, "h1", args, "h2", append(args, "-s", "10.0.0.1"))
		fmt.Print(srv, cli)
		f := strings.Fields(lastLine(cli))
		if len(f) != 8 || f[0] != "custom" {
			b.Fatalf("rstream %v printed no result:\n%s", args, cli)
		}
		return f
	}
	perftest := func(tool string, args ...string) string { return l.perftestPair(b, tool, args...) }
	port := 7700
	for b.Loop() {
		port += 2
		rs := iperf(b, l, "10.0.0.1", true, strconv.Itoa(port))
		tcp := iperf(b, l, "10.0.0.1", false, strconv.Itoa(port+1))
		bw, lat := rstream("-S", "65536", "-C", "1000"), rstream("-S", "64", "-C", "1", "-I", "1000")
		rsBW, errBW := strconv.ParseFloat(bw[6], 64)
		rsLat, errLat := strconv.ParseFloat(lat[7], 64)
		realBW, okBW := tableValue(perftest("ib_write_bw", "-x", "1", "-s", "65536", "-n", "5000", "--report_gbits"), "65536", 3)
		realLat, okLat := tableValue(perftest("ib_send_lat", "-x", "1", "-s", "64", "-n", "5000"), "64", 4)
		if errBW != nil || errLat != nil || !okBW || !okLat {
			b.Fatal("a tool printed no result")
		}
		b.ReportMetric(rs/1e9, "iperf3-rsockets-Gb/s")
		b.ReportMetric(tcp/1e9, "iperf3-tcp-Gb/s")
		b.ReportMetric(rsBW, "rstream-Gb/s")
		b.ReportMetric(rsLat, "rstream-64B-µs")
		b.ReportMetric(realBW, "ib-write-Gb/s")
		b.ReportMetric(realLat, "ib-send-lat-µs")
	}
}
