package experiment

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// TestCDFBuiltins: the shipped distributions parse, have the means the simulator's
// getAvg gives, and inverse-CDF sampling reproduces the mean (within 2% over 100k
// samples; the standard error is 0.7% for WebSearch, 1.3% for FB Hadoop) and the
// median.
func TestCDFBuiltins(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mean, median float64
		largest      int
	}{
		{"websearch", 1_711_250, 73_076.92, 30_000_000},
		{"fbhadoop", 120_420.75, 700, 10_000_000},
	} {
		c, err := LoadCDF(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if m := c.Mean(); math.Abs(m-tc.mean) > 0.01 {
			t.Errorf("%s: mean %v, want %v", tc.name, m, tc.mean)
		}
		if q := c.Quantile(50); math.Abs(q-tc.median) > 0.01 {
			t.Errorf("%s: median %v, want %v", tc.name, q, tc.median)
		}
		r := rand.New(rand.NewPCG(1, 2))
		const n = 100_000
		sum := 0.0
		below := 0
		for range n {
			s := c.Sample(r)
			if s < 1 || s > tc.largest {
				t.Fatalf("%s: sample %d outside [1, %d]", tc.name, s, tc.largest)
			}
			if float64(s) <= tc.median {
				below++
			}
			sum += float64(s)
		}
		mean := sum / n
		t.Logf("%s: sample mean %.0f, CDF mean %.0f (%+.2f%%), %.1f%% at or below the median", tc.name, mean, c.Mean(),
			100*(mean/c.Mean()-1), 100*float64(below)/n)
		if math.Abs(mean/c.Mean()-1) > 0.02 {
			t.Errorf("%s: sample mean %.0f is more than 2%% from the CDF's %.0f", tc.name, mean, c.Mean())
		}
		if f := float64(below) / n; math.Abs(f-0.5) > 0.01 {
			t.Errorf("%s: %.3f of the samples at or below the median", tc.name, f)
		}
	}
}

// TestParseCDF: a file in the simulator's format loads; malformed ones are errors that
// name the problem and the line.
func TestParseCDF(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "uniform.txt")
	if err := os.WriteFile(good, []byte("# uniform 1 KB to 3 KB\n1000 0\n\n3000 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCDF(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mean() != 2000 || c.Quantile(25) != 1500 {
		t.Errorf("uniform: mean %v, quartile %v", c.Mean(), c.Quantile(25))
	}
	for _, tc := range []struct{ in, want string }{
		{"0 0\n100\n", "line 2: want \"size_bytes cumulative_percent\""},
		{"0 0\nx 100\n", "line 2: size \"x\""},
		{"0 0\n100 101\n", "line 2: percentile \"101\""},
		{"0 0\n100 50\n100 100\n", "line 3: point (100, 100) does not increase"},
		{"0 0\n100 50\n200 40\n300 100\n", "line 3: point (200, 40) does not increase"},
		{"0 5\n100 100\n", "first point is at 5 %"},
		{"0 0\n100 99\n", "last point is at 99 %"},
		{"0 0\n", "at least two points"},
	} {
		_, err := ParseCDF("bad", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
	if _, err := LoadCDF(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "websearch") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestMixArrivals: the generator offers the load asked for (FB Hadoop over 50 ms:
// about 25,000 flows), never sends a host to itself, spreads destinations evenly, is
// in time order, and --flows cuts the same sequence.
func TestMixArrivals(t *testing.T) {
	cfg := MixDefaults()
	cfg.CDF, cfg.Duration, cfg.Load = "fbhadoop", 50*time.Millisecond, 0.4
	c, _ := LoadCDF(cfg.CDF)
	const hosts = 16
	flows := mixArrivals(&cfg, c, hosts)
	var bytes float64
	perDst := make([]int, hosts)
	for i, f := range flows {
		if f.Src == f.Dst || f.Dst < 0 || f.Dst >= hosts || f.ID != i {
			t.Fatalf("flow %+v", *f)
		}
		if i > 0 && f.Start < flows[i-1].Start {
			t.Fatalf("flow %d arrives at %v, before flow %d at %v", i, f.Start, i-1, flows[i-1].Start)
		}
		if f.Start.Duration() > cfg.Duration {
			t.Fatalf("flow %d arrives at %v, after the window", i, f.Start)
		}
		bytes += float64(f.Size)
		perDst[f.Dst]++
	}
	load := bytes * 8 / (hosts * float64(cfg.LinkRate) * cfg.Duration.Seconds())
	t.Logf("%d flows, offered load %.4f (asked %.2f), per destination %v", len(flows), load, cfg.Load, perDst)
	if math.Abs(load/cfg.Load-1) > 0.05 {
		t.Errorf("offered load %.4f, want %.2f within 5%%", load, cfg.Load)
	}
	for d, n := range perDst {
		if want := float64(len(flows)) / hosts; math.Abs(float64(n)/want-1) > 0.1 {
			t.Errorf("host %d receives %d flows, want about %.0f", d, n, want)
		}
	}
	cfg.Flows = 100
	first := mixArrivals(&cfg, c, hosts)
	if len(first) != 100 {
		t.Fatalf("--flows 100 gave %d flows", len(first))
	}
	for i, f := range first {
		if *f != *flows[i] {
			t.Fatalf("--flows: flow %d is %+v, the windowed run's %+v", i, *f, *flows[i])
		}
	}
}

// mixConfig is the small mix the tests run: FB Hadoop flows at 50% load on the
// default 16-host leaf-spine for 300 µs (about 250 flows, 35 MB), in 4 KB packets to
// keep the event count down under the race detector.
func mixConfig() Config {
	cfg := MixDefaults()
	cfg.CDF, cfg.Load, cfg.Duration = "fbhadoop", 0.5, 300*time.Microsecond
	cfg.MTU = roce.MTU4096
	return cfg
}

// checkMix fails the test on any error and on any flow without a completion.
func checkMix(t *testing.T, res *Result) {
	t.Helper()
	for _, e := range res.Errors {
		t.Error(e)
	}
	for _, f := range res.Flows {
		if f.FCTNs <= 0 || f.Slowdown < 1 || f.IdealNs <= 0 {
			t.Errorf("flow %+v", f)
		}
	}
}

// TestMixDeterministic: the same configuration and seed give the same files, byte for
// byte, and every flow completes with its data verified at the receiver.
func TestMixDeterministic(t *testing.T) {
	cfg := mixConfig()
	cfg.Duration = 100 * time.Microsecond
	cfg.Verify = true
	var dirs []string
	for range 2 {
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkMix(t, res)
		if len(res.Flows) < 30 {
			t.Fatalf("only %d flows", len(res.Flows))
		}
		dir := t.TempDir()
		if err := res.WriteFiles(dir); err != nil {
			t.Fatal(err)
		}
		var sum bytes.Buffer
		res.WriteSummary(&sum)
		t.Logf("\n%s", sum.String())
		dirs = append(dirs, dir)
	}
	names, _ := os.ReadDir(dirs[0])
	want := []string{"fct.png", "fct.svg", "fct_buckets.csv", "flows.csv", "links.csv", "port_queues.csv", "ports.csv", "queue.csv",
		"queue.png", "queue.svg", "rates.csv", "rates.png", "rates.svg", "summary.json", "topology.yaml"}
	if len(names) != len(want) {
		t.Errorf("files %v, want %v", names, want)
	}
	for _, n := range want {
		a, err := os.ReadFile(filepath.Join(dirs[0], n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same seed", n)
		}
	}
}

// smallP99 is the p99 slowdown of the smaller half of the flows by size.
func smallP99(res *Result) float64 { return sizeBuckets(res.Flows, []float64{0, 50})[0].P99 }

// TestMixHPCCvsDCQCN runs the same arrivals (mixConfig, seed 1: 246 flows, 35 MB) under
// HPCC++ per-ACK and under DCQCN: HPCC keeps the queues shorter, so the small flows,
// whose FCT is mostly queueing, finish closer to their ideal. Measured: HPCC peak queue
// 136 KB, small-flow (smaller half) p99 slowdown 2.10; DCQCN (marking at 400 KB/1600 KB)
// 830 KB and 4.75. With the earlier 100 KB/400 KB marking and before the pacer's
// re-timing, over seeds 1–10 HPCC was lower on both counts every time (peaks
// 97–228 KB against 191–672 KB, at most 0.59 of DCQCN's; small-flow p99 1.74–3.77
// against 2.55–8.11); that sweep was not repeated.
// In 1 KB packets the order held for seeds 1–14 too, but with a 200 µs window one
// seed in eight reversed it: the window is not shorter.
func TestMixHPCCvsDCQCN(t *testing.T) {
	cfg := mixConfig()
	h, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkMix(t, h)
	cfg.CC = rnic.ModeDCQCN
	d, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkMix(t, d)
	if len(h.Flows) != len(d.Flows) || h.MixInfo.Offered != d.MixInfo.Offered {
		t.Fatalf("different arrivals: %d flows / %d bytes against %d / %d", len(h.Flows), h.MixInfo.Offered, len(d.Flows), d.MixInfo.Offered)
	}
	t.Logf("%d flows, %d bytes", len(h.Flows), h.MixInfo.Offered)
	t.Logf("HPCC:  peak %d B at %s, small-flow p99 slowdown %.2f, %+v", h.Metrics.PeakQueue, h.MixInfo.Bottleneck, smallP99(h), h.Metrics)
	t.Logf("DCQCN: peak %d B at %s, small-flow p99 slowdown %.2f, %+v", d.Metrics.PeakQueue, d.MixInfo.Bottleneck, smallP99(d), d.Metrics)
	if h.Metrics.PeakQueue > d.Metrics.PeakQueue*3/4 {
		t.Errorf("HPCC peak queue %d B is not well below DCQCN's %d B", h.Metrics.PeakQueue, d.Metrics.PeakQueue)
	}
	if smallP99(h) >= smallP99(d) {
		t.Errorf("HPCC small-flow p99 slowdown %.2f is not below DCQCN's %.2f", smallP99(h), smallP99(d))
	}
}

// TestMixFatTreeIOAM runs 40 flows on a k=4 fat-tree (paths of 2, 4 and 6 links) with
// IOAM telemetry, so over IPv6, in the probe mode: all complete intact.
func TestMixFatTreeIOAM(t *testing.T) {
	cfg := mixConfig()
	cfg.Topology, cfg.K, cfg.Flows, cfg.Duration = "fat-tree", 4, 40, 0
	cfg.CC, cfg.Telemetry = rnic.ModeHPCCProbe, telemetry.FormatIOAM
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkMix(t, res)
	x := res.MixInfo
	t.Logf("%+v %+v", *x, res.Metrics)
	if len(res.Flows) != 40 || x.Hosts != 16 || x.Ports != 4*4+8*4+8*4 {
		t.Errorf("%d flows, %d hosts, %d ports", len(res.Flows), x.Hosts, x.Ports)
	}
	// Six links against two: three times the propagation and serialization.
	if x.RTTMax != 3*x.RTTMin || res.BaseRTT != x.RTTMax {
		t.Errorf("base RTTs %v to %v, HPCC T %v", x.RTTMin, x.RTTMax, res.BaseRTT)
	}
}

// TestMixIdealFCT: a flow alone on the network takes its ideal FCT, a little less: the
// simulator's standalone FCT counts a full frame's serialization per link in the base
// RTT, and the first frame's again in the bytes at line rate.
func TestMixIdealFCT(t *testing.T) {
	for _, size := range []string{"fbhadoop", "websearch"} {
		cfg := mixConfig()
		cfg.CDF, cfg.Flows, cfg.Duration, cfg.CC = size, 1, 0, rnic.ModeNone
		cfg.MTU = roce.MTU1024
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkMix(t, res)
		f := res.Flows[0]
		raw := float64(f.FCTNs) / float64(f.IdealNs)
		t.Logf("%d bytes h%d→h%d: FCT %d ns, ideal %d ns, ratio %.4f", f.Size, f.Src+1, f.Dst+1, f.FCTNs, f.IdealNs, raw)
		if raw > 1.001 || raw < 0.95 {
			t.Errorf("a flow alone took %.4f of its ideal FCT", raw)
		}
	}
}

// TestMixConfigErrors: bad parameters are errors that name the flag.
func TestMixConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Topology = "ring" }, `--topology "ring"`},
		{func(c *Config) { c.Topology, c.K = "fat-tree", 3 }, "--k 3"},
		{func(c *Config) { c.Leaves = 0 }, "leaf-spine 0×2"},
		{func(c *Config) { c.Leaves, c.HostsPerLeaf = 1, 1 }, "two hosts"},
		{func(c *Config) { c.Load = 0 }, "--load 0"},
		{func(c *Config) { c.Load = 1.5 }, "--load 1.5"},
		{func(c *Config) { c.Duration, c.Flows = 0, 0 }, "--duration"},
		{func(c *Config) { c.Flows = -1 }, "--flows -1"},
		{func(c *Config) { c.CDF = "nosuch" }, `--cdf "nosuch"`},
		{func(c *Config) { c.MTU = 1500 }, "--mtu 1500"},
		{func(c *Config) { c.Telemetry = "int-mx" }, `--telemetry "int-mx"`},
		{func(c *Config) { c.Duration = time.Nanosecond }, "no flow arrives"},
		{func(c *Config) { c.Threads = -2 }, "--threads -2"},
	} {
		cfg := mixConfig()
		tc.set(&cfg)
		_, err := Run(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}
