package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/lab"
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
// ucp_put_bw (64 KiB) beside perftest's ib_write_bw and ib_read_bw (64 KiB), over
// rc_verbs with ud_verbs (which rc_verbs needs to wire up), perftest's ib_send_lat
// (64 B) between h1 and h2, and Open MPI's ping-pong (apps/mpi/mpi_check.c, 8 B, half a
// round trip, four ranks on four hosts over UCX), all in one lab and run.
//
// The bandwidth tools move the same 64 KiB messages with the same 128 in flight
// (ib_write_bw's default tx depth; ucx_perftest's own default for ucp_put_bw is 32,
// slower by 4–97 % pair by pair here) and as many of them (bwIters, about 1.3 GB: a
// run of a tenth of a second measured the machine's other tenants more than the
// tools). ib_write_bw's first run and UCX's also report the lab process's CPU time per
// GiB moved: the lab's loop does a kernel rxe's work, and that figure tells whether it
// worked harder for one tool, or waited for it (docs/libibverbs.md, "UCX").
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
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--lab", l.name, "--json")), &st); err != nil {
		b.Fatal(err)
	}
	const (
		ucxPort   = 13337 // ucx_perftest's default out-of-band TCP port
		bwIters   = 20000
		bwWarmup  = 500
		msgSize   = 65536
		outstand  = "128"
		gbitPerMB = 8 * (1 << 20) / 1e9 // ucx_perftest's MB/s are MiB/s
	)
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
	perftest := func(tool string, args ...string) string { return l.perftestPair(b, tool, args...) }
	// labCPU runs f and returns the lab process's CPU time during it per GiB of bytes.
	labCPU := func(bytes float64, f func()) float64 {
		before := procCPU(b, st.Pid)
		f()
		return (procCPU(b, st.Pid) - before).Seconds() * 1e3 / (bytes / (1 << 30))
	}
	ucxBytes, ibBytes := float64((bwIters+bwWarmup)*msgSize), float64(bwIters*msgSize)
	iters, warmup, size := strconv.Itoa(bwIters), strconv.Itoa(bwWarmup), strconv.Itoa(msgSize)
	ibBW := func(tool string) float64 {
		v, ok := tableValue(perftest(tool, "-x", "1", "-s", size, "-n", iters, "--report_gbits"), size, 3)
		if !ok {
			b.Fatalf("%s printed no result", tool)
		}
		return v
	}
	ucxBW := func(test string) float64 {
		v, err := strconv.ParseFloat(ucx(test, size, iters, "-w", warmup, "-O", outstand)[6], 64) // MB/s overall
		if err != nil {
			b.Fatalf("ucx_perftest -t %s: %v", test, err)
		}
		return v * gbitPerMB
	}
	mpiPingPong := regexp.MustCompile(`ping-pong 8 B: ([\d.]+) us`)
	for b.Loop() {
		lat, rate := ucx("tag_lat", "8", "10000"), ucx("tag_bw", "8", "10000")
		// Tag messages this large go by rendezvous (an RDMA READ by the receiver: its
		// counterpart is ib_read_bw), puts by RDMA WRITE as ib_write_bw's. perftest's
		// runs bracket UCX's, and UCX is compared with their mean: the machine's other
		// load drifts over the seconds between them.
		var write1, read1, put, tag float64
		writeCPU := labCPU(ibBytes, func() { write1 = ibBW("ib_write_bw") })
		read1 = ibBW("ib_read_bw")
		putCPU := labCPU(ucxBytes, func() { put = ucxBW("ucp_put_bw") })
		tagCPU := labCPU(ucxBytes, func() { tag = ucxBW("tag_bw") })
		realRead, realBW := (read1+ibBW("ib_read_bw"))/2, (write1+ibBW("ib_write_bw"))/2
		realLat, okLat := tableValue(perftest("ib_send_lat", "-x", "1", "-s", "64", "-n", "5000"), "64", 4)
		out, err := l.exec("h1", "mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", "rocelab rsh", "-H", "h1,h2,h3,h4",
			"-np", "4", "--mca", "pml", "ucx", "-x", "UCX_TLS=rc_verbs,ud_verbs,self", prog).CombinedOutput()
		fmt.Printf("%s", out)
		m := mpiPingPong.FindSubmatch(out)
		ucxLat, errLat := strconv.ParseFloat(lat[2], 64)
		ucxRate, errRate := strconv.ParseFloat(rate[7], 64)
		if !okLat || errLat != nil || errRate != nil || err != nil || m == nil {
			b.Fatalf("a tool printed no result (mpirun: %v)", err)
		}
		mpiLat, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(ucxLat, "ucx-tag-p50-µs")
		b.ReportMetric(ucxRate, "ucx-tag-msg/s")
		b.ReportMetric(tag, "ucx-tag-64KiB-Gb/s")
		b.ReportMetric(tag/realBW, "ucx-tag/ib-write-bw")
		b.ReportMetric(tag/realRead, "ucx-tag/ib-read-bw")
		b.ReportMetric(put, "ucx-put-64KiB-Gb/s")
		b.ReportMetric(put/realBW, "ucx-put/ib-write-bw")
		b.ReportMetric(realBW, "ib-write-Gb/s")
		b.ReportMetric(realRead, "ib-read-Gb/s")
		b.ReportMetric(writeCPU, "lab-ms/GiB-ib-write")
		b.ReportMetric(putCPU, "lab-ms/GiB-ucx-put")
		b.ReportMetric(tagCPU, "lab-ms/GiB-ucx-tag")
		b.ReportMetric(realLat, "ib-send-lat-µs")
		b.ReportMetric(mpiLat, "mpi-pingpong-8B-µs")
	}
}

// procCPU returns the CPU time process pid has used, user and system (/proc/PID/stat's
// utime and stime, in the kernel's USER_HZ of 100 per second).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces; utime and stime are the 14th
	// and 15th fields, the 12th and 13th after the comm.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
