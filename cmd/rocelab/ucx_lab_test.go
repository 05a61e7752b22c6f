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

// BenchmarkLabUCX runs ucx_perftest's tag_lat (8 B), tag_bw (8 B, and 64 KiB) and
// ucp_put_bw (64 KiB) beside ib_write_bw's 64 KiB WRITEs, over rc_verbs with ud_verbs (which rc_verbs
// needs to wire up), perftest's ib_send_lat (64 B) and ib_write_bw between h1 and h2,
// and Open MPI's ping-pong (apps/mpi/mpi_check.c, 8 B, half a round trip, four ranks
// on four hosts over UCX), all in one lab and run.
func BenchmarkLabUCX(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("lab benchmarks need root (namespaces and TAPs)")
	}
	for _, tool := range []string{"ucx_perftest", "mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not installed (make deps-system installs ucx-utils, openmpi-bin and libopenmpi-dev as root)", tool)
		}
	}
	c := newCLI(b)
	dir := filepath.Dir(c.bin)
	buildLibibverbs(b, dir)
	if out, err := exec.Command("../../librdmacm/build.sh", filepath.Join(dir, "lib", "librdmacm.so.1")).CombinedOutput(); err != nil {
		b.Fatalf("build librdmacm.so.1: %v\n%s", err, out)
	}
	prog := filepath.Join(dir, "mpi_check")
	if out, err := exec.Command("mpicc", "-O1", "-Wall", "-Werror", "-o", prog, "../../apps/mpi/mpi_check.c").CombinedOutput(); err != nil {
		b.Fatalf("mpicc: %v\n%s", err, out)
	}
	l := upLab(b, c, "ubench", "../../topologies/four-hosts.yaml")
	const ucxPort = 13337 // ucx_perftest's default out-of-band TCP port
	env := []string{"env", "UCX_TLS=rc_verbs,ud_verbs", "UCX_NET_DEVICES=rocelab0:1"}
	// Final: iterations, latency p50, average, overall (µs), MB/s average, overall,
	// msg/s average, overall.
	ucx := func(test, size, iters string, more ...string) []string {
		_, out := l.pair(b, ucxPort, "h2", append(env, "ucx_perftest"),
			"h1", append(append(env, "ucx_perftest", "-t", test, "-s", size, "-n", iters), more...), "10.0.0.2")
		fmt.Print(out)
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
	mpiPingPong := regexp.MustCompile(`ping-pong 8 B: ([\d.]+) us`)
	for b.Loop() {
		lat, rate := ucx("tag_lat", "8", "10000"), ucx("tag_bw", "8", "10000")
		// 64 KiB with as many sends outstanding as ib_write_bw's default tx depth;
		// tag messages this large go by rendezvous (an RDMA READ by the receiver),
		// puts by RDMA WRITE as ib_write_bw's.
		bw, put := ucx("tag_bw", "65536", "2000", "-O", "128", "-w", "500"), ucx("ucp_put_bw", "65536", "2000", "-w", "500")
		realBW, okBW := tableValue(perftest("ib_write_bw", "-x", "1", "-s", "65536", "-n", "5000", "--report_gbits"), "65536", 3)
		realLat, okLat := tableValue(perftest("ib_send_lat", "-x", "1", "-s", "64", "-n", "5000"), "64", 4)
		out, err := l.exec("h1", "mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", "rocelab rsh", "-H", "h1,h2,h3,h4",
			"-np", "4", "--mca", "pml", "ucx", "-x", "UCX_TLS=rc_verbs,ud_verbs,self", prog).CombinedOutput()
		fmt.Printf("%s", out)
		m := mpiPingPong.FindSubmatch(out)
		ucxLat, errLat := strconv.ParseFloat(lat[2], 64)
		ucxRate, errRate := strconv.ParseFloat(rate[7], 64)
		ucxBW, errBW := strconv.ParseFloat(bw[6], 64) // MB/s overall
		putBW, errPut := strconv.ParseFloat(put[6], 64)
		if !okBW || !okLat || errLat != nil || errRate != nil || errBW != nil || errPut != nil || err != nil || m == nil {
			b.Fatalf("a tool printed no result (mpirun: %v)", err)
		}
		mpiLat, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(ucxLat, "ucx-tag-p50-µs")
		b.ReportMetric(ucxRate, "ucx-tag-msg/s")
		b.ReportMetric(ucxBW*8*(1<<20)/1e9, "ucx-tag-64KiB-Gb/s")
		b.ReportMetric(ucxBW*8*(1<<20)/1e9/realBW, "ucx-tag/ib-write-bw")
		b.ReportMetric(putBW*8*(1<<20)/1e9, "ucx-put-64KiB-Gb/s")
		b.ReportMetric(putBW*8*(1<<20)/1e9/realBW, "ucx-put/ib-write-bw")
		b.ReportMetric(realLat, "ib-send-lat-µs")
		b.ReportMetric(realBW, "ib-write-Gb/s")
		b.ReportMetric(mpiLat, "mpi-pingpong-8B-µs")
	}
}
