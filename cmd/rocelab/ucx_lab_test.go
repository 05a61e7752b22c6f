package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/netns"
)

// TestUCX runs Debian's unmodified UCX (ucx-utils) between two lab hosts over rocelab's
// RNICs: ucx_perftest's tag-matching latency and bandwidth over UCX_TLS=rc_verbs,ud_verbs
// (RC for the data, UD for UCX's wire-up) and over ud_verbs alone, on the IPv4 RoCEv2
// GID UCX picks. Each run must complete its iterations ("Final:" with a message rate).
// UD over IPv4 needs ibv_wc.sl to carry the L3 header type, as ConnectX reports it
// (qp.SLIPv4): with rxe's 0, UCX 1.13 drops every IPv4 packet as a wrong GID.
func TestUCX(t *testing.T) {
	if _, err := exec.LookPath("ucx_perftest"); err != nil {
		t.Skip("ucx_perftest is not installed (make deps-system installs ucx-utils as root)")
	}
	l := newIBVerbsLab(t)
	final := regexp.MustCompile(`(?m)^Final:\s+(\d+)\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)`)
	for i, tc := range []struct{ name, tls, test, iters string }{
		{"rc-ud-tag_lat", "rc_verbs,ud_verbs", "tag_lat", "1000"},
		{"rc-ud-tag_bw", "rc_verbs,ud_verbs", "tag_bw", "200"},
		{"ud-tag_lat", "ud_verbs", "tag_lat", "1000"},
		{"ud-tag_bw", "ud_verbs", "tag_bw", "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(13400 + i)
			env := []string{"env", "UCX_TLS=" + tc.tls, "UCX_NET_DEVICES=rocelab0:1"}
			// exec -d returns once the server listens on its TCP port for the exchange.
			server := l.cmd(append([]string{"exec", "--lab", l.name, "-d", "h2", "--"}, append(env, "ucx_perftest", "-p", port)...)...)
			server.Stdout, server.Stderr = os.Stderr, os.Stderr
			if err := server.Run(); err != nil {
				t.Fatalf("exec -d ucx_perftest: %v", err)
			}
			out, err := l.exec("h1", append(env, "ucx_perftest", "10.0.0.2", "-p", port, "-t", tc.test, "-n", tc.iters)...).CombinedOutput()
			t.Logf("ucx_perftest -t %s over %s:\n%s", tc.test, tc.tls, out)
			m := final.FindSubmatch(out)
			if err != nil || m == nil || string(m[1]) != tc.iters {
				t.Fatalf("ucx_perftest -t %s over %s: %v, want %s iterations completed", tc.test, tc.tls, err, tc.iters)
			}
		})
	}
}

// BenchmarkLabUCX runs ucx_perftest's tag_lat and tag_bw (8 B, over rc_verbs with
// ud_verbs, which rc_verbs needs to wire up) beside perftest's ib_send_lat (64 B) and
// ib_write_bw (64 KiB) between two lab hosts in the same lab and run, and reports UCX's
// median latency and message rate next to perftest's typical latency and bandwidth.
func BenchmarkLabUCX(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("lab benchmarks need root (namespaces and TAPs)")
	}
	if _, err := exec.LookPath("ucx_perftest"); err != nil {
		b.Skip("ucx_perftest is not installed (make deps-system installs ucx-utils as root)")
	}
	dir := b.TempDir()
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	buildLibibverbs(b, dir)
	l := &ibverbsLab{cli: &cli{bin: filepath.Join(dir, "rocelab"), store: netns.Store{Root: filepath.Join(dir, "state")}},
		name: labName("ubench")}
	lab := func(args ...string) {
		if out, err := l.cmd(args...).CombinedOutput(); err != nil {
			b.Fatalf("rocelab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	lab("up", "-f", "../../topologies/two-hosts.yaml", "--name", l.name)
	defer lab("down", l.name)
	const ucxPort = 13337 // ucx_perftest's default out-of-band TCP port
	env := []string{"env", "UCX_TLS=rc_verbs,ud_verbs", "UCX_NET_DEVICES=rocelab0:1"}
	ucx := func(test string) []string {
		_, out := l.pair(b, ucxPort, "h2", append(env, "ucx_perftest"),
			"h1", append(env, "ucx_perftest", "-t", test, "-s", "8", "-n", "10000"), "10.0.0.2")
		fmt.Print(out)
		// Final: iterations, latency p50, average, overall (µs), MB/s average, overall, msg/s average, overall
		i := strings.LastIndex(out, "Final:")
		if i < 0 || len(strings.Fields(out[i:])) < 9 {
			b.Fatalf("ucx_perftest -t %s printed no final line:\n%s", test, out)
		}
		return strings.Fields(out[i:])
	}
	perftest := func(tool string, args ...string) string {
		_, out := l.pair(b, pingpongPort, "h1", append([]string{tool}, args...), "h2", append([]string{tool}, args...), "10.0.0.1")
		fmt.Print(out)
		return out
	}
	for b.Loop() {
		lat, bw := ucx("tag_lat"), ucx("tag_bw")
		realBW, okBW := tableValue(perftest("ib_write_bw", "-x", "1", "-s", "65536", "-n", "5000", "--report_gbits"), "65536", 3)
		realLat, okLat := tableValue(perftest("ib_send_lat", "-x", "1", "-s", "64", "-n", "5000"), "64", 4)
		ucxLat, errLat := strconv.ParseFloat(lat[2], 64)
		ucxRate, errRate := strconv.ParseFloat(bw[7], 64)
		if !okBW || !okLat || errLat != nil || errRate != nil {
			b.Fatal("a tool printed no result")
		}
		b.ReportMetric(ucxLat, "ucx-tag-p50-µs")
		b.ReportMetric(ucxRate, "ucx-tag-msg/s")
		b.ReportMetric(realLat, "ib-send-lat-µs")
		b.ReportMetric(realBW, "ib-write-Gb/s")
	}
}
