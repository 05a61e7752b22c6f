package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/experiment"
)

// runExperiment executes a fresh `experiment` command in-process.
func runExperiment(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newExperimentCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestExperimentMixJSON: `experiment mix --json` prints one JSON object with the
// metrics and a record per flow, and writes the files (the plots: --plots).
func TestExperimentMixJSON(t *testing.T) {
	dir := t.TempDir()
	out, err := runExperiment(t, "mix", "--cdf", "fbhadoop", "--flows", "20", "--load", "0.5", "--json", "--out", dir, "--plots")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"bottleneck_peak_queue_bytes", "bottleneck_queue_p99_bytes", "bottleneck_mean_queue_bytes", "bottleneck_wire_rate_bps", "goodput_bps", "flows_finished", "window",
		"bottleneck_utilization", "jain_fairness", "flows"} {
		if _, ok := v[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	flows, _ := v["flows"].([]any)
	if len(flows) != 20 {
		t.Fatalf("%d flows", len(flows))
	}
	f, _ := flows[0].(map[string]any)
	for _, k := range []string{"id", "size_bytes", "start_ns", "fct_ns", "slowdown"} {
		if _, ok := f[k]; !ok {
			t.Errorf("flow record without %q: %v", k, f)
		}
	}
	for _, name := range []string{"flows.csv", "fct_buckets.csv", "queue.csv", "fct.png", "fct.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// TestExperimentMixThreads: `experiment mix` runs on the parallel driver by default
// and says so, and writes what `--threads 2` writes; `--threads 0` runs on the
// sequential driver and says so.
func TestExperimentMixThreads(t *testing.T) {
	args := []string{"mix", "--cdf", "fbhadoop", "--flows", "20", "--load", "0.5"}
	var outs [2]map[string][]byte
	for i, threads := range [][]string{nil, {"--threads", "2"}} {
		dir := t.TempDir()
		out, err := runExperiment(t, append(append(args, threads...), "--out", dir)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, "driver            parallel: 4 partitions") {
			t.Errorf("%q: the summary does not name the parallel driver and its partitions:\n%s", threads, out)
		}
		outs[i] = map[string][]byte{}
		for _, name := range []string{"flows.csv", "rates.csv", "links.csv", "summary.json"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			outs[i][name] = b
		}
	}
	for name, b := range outs[0] {
		if !bytes.Equal(b, outs[1][name]) {
			t.Errorf("%s differs between the default (one thread) and --threads 2", name)
		}
	}
	out, err := runExperiment(t, append(args, "--threads", "0", "--out", t.TempDir())...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "driver            sequential") {
		t.Errorf("--threads 0: the summary does not name the sequential driver:\n%s", out)
	}
}

// TestExperimentBadFlags: mistakes are errors that name the flag and the choices.
func TestExperimentBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ring"}, `unknown scenario "ring"`},
		{[]string{}, "want one scenario"},
		{[]string{"mix", "--cc", "tcp"}, `--cc "tcp": want hpcc, dcqcn or none`},
		{[]string{"mix", "--mode", "fast"}, `--mode "fast"`},
		{[]string{"mix", "--telemetry", "sflow"}, `--telemetry "sflow"`},
		{[]string{"mix", "--topology", "torus"}, `--topology "torus": want leaf-spine, fat-tree or fat-tree-3tier`},
		{[]string{"mix", "--topology", "fat-tree", "--k", "5"}, "--k 5"},
		{[]string{"mix", "--load", "0"}, "--load 0"},
		{[]string{"mix", "--cdf", "/nonexistent/cdf.txt"}, "websearch"},
		{[]string{"mix", "--duration", "soon"}, `"soon" for "--duration" flag: duration "soon"`},
		{[]string{"mix", "--link-rate", "fast"}, `"fast" for "--link-rate" flag: rate "fast"`},
		{[]string{"mix", "--senders", "4"}, "--senders does not apply to the mix scenario"},
		{[]string{"incast", "--load", "0.5"}, "--load does not apply to the incast scenario"},
		{[]string{"incast", "--preset", "omnet"}, `--preset "omnet": want ns3`},
		{[]string{"incast", "--ecn", "400KB,100KB,0.2"}, "K_min ≤ K_max"},
		{[]string{"incast", "--ecn", "400KB,1600KB"}, "want K_min,K_max,P_max"},
		{[]string{"incast", "--payload", "2000"}, "--payload 2000"},
		{[]string{"mix", "--flows", "/nonexistent/flows.txt"}, "--flows: open /nonexistent/flows.txt"},
		{[]string{"mix", "--flows", "f.txt", "--load", "0.5"}, "--load does not apply with a flow file"},
		{[]string{"mix", "--topology-file", "t.txt", "--k", "4"}, "--k does not apply with --topology-file"},
		{[]string{"incast", "--eta", "NaN"}, "--eta NaN: want a target utilization in (0, 1]"},
		{[]string{"incast", "--eta", "0"}, "--eta 0: want a target utilization in (0, 1]"},
		{[]string{"incast", "--eta", "1.5"}, "--eta 1.5"},
		{[]string{"incast", "--mode", "every-n", "--every-n", "0"}, "--every-n 0: want at least 1"},
		{[]string{"incast", "--every-n", "-1"}, "--every-n -1: want at least 1"},
		{[]string{"incast", "--senders", "100000"}, "--senders 100000: want 1 to 1024"},
		{[]string{"mix", "--topology", "fat-tree", "--k", "100"}, "at most 65536 hosts"},
		{[]string{"mix", "--threads", "-1"}, "--threads -1: want 0 (the sequential driver) or more"},
		{[]string{"incast", "--threads", "2"}, "--threads does not apply to the incast scenario"},
	} {
		out, err := runExperiment(t, append(tc.args, "--out", t.TempDir())...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestExperimentFlowsCommand runs the command docs/hpcc.md shows, exactly: a flow file
// whose first line counts the flows that follow, each "src dst 3 100 size seconds"
// with both hosts in [0, 320), starting at 2 s; the same seed gives the same file.
func TestExperimentFlowsCommand(t *testing.T) {
	args := strings.Fields("flows --cdf websearch --load 0.3 --duration 5ms --hosts 320 --seed 1")
	out, err := runExperiment(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	flows, err := experiment.ParseSimFlows(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	// 320 hosts at 30% of 100 Gb/s for 5 ms with a 1.71 MB mean: about 3500 flows.
	if len(flows) < 3000 || len(flows) > 4000 {
		t.Errorf("%d flows, want about 3500", len(flows))
	}
	for _, f := range flows {
		if f.Src < 0 || f.Src >= 320 || f.Dst < 0 || f.Dst >= 320 || f.Priority != 3 || f.DPort != 100 ||
			f.Start < 2*time.Second || f.Start > 2*time.Second+5*time.Millisecond {
			t.Fatalf("flow %+v out of the simulator's conventions", f)
		}
	}
	again, _ := runExperiment(t, args...)
	if again != out {
		t.Error("the same seed gave another flow file")
	}
}

// TestExperimentCompare: two runs side by side as text and as JSON with snake_case
// keys; B/A of identical runs is 1.
func TestExperimentCompare(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if out, err := runExperiment(t, "incast", "--senders", "2", "--flow-size", "100KB", "--preset", "ns3", "--out", dir); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	out, err := runExperiment(t, "compare", a, b)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"bottleneck_wire_rate_bps", "goodput_bps", "p50 A", "1.000"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare without %q:\n%s", want, out)
		}
	}
	out, err = runExperiment(t, "compare", a, b, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"a", "b", "dir_a", "dir_b", "metrics", "slowdown"} {
		if _, ok := v[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if strings.ContainsAny(strings.Join(jsonKeys(v), ""), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		t.Errorf("keys not snake_case: %v", jsonKeys(v))
	}
}

// jsonKeys lists every object key in v, recursively.
func jsonKeys(v any) []string {
	var keys []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			keys = append(keys, k)
			keys = append(keys, jsonKeys(e)...)
		}
	case []any:
		for _, e := range x {
			keys = append(keys, jsonKeys(e)...)
		}
	}
	return keys
}

// TestExperimentPresetYieldsToFlags: --preset ns3 sets what the flags leave unset; a
// flag given explicitly wins (here --telemetry int over the preset's hpcc hops).
func TestExperimentPresetYieldsToFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "ns3"}, "HPCC++ per-ack (hpcc telemetry), preset ns3"},
		{[]string{"--preset", "ns3", "--telemetry", "int"}, "HPCC++ per-ack (int-md telemetry), preset ns3"},
		{[]string{"--preset", "ns3", "--cc", "dcqcn", "--ecn", "100KB,200KB,0.5"}, "DCQCN, preset ns3"},
	} {
		dir := t.TempDir()
		args := append([]string{"incast", "--senders", "2", "--flow-size", "50KB", "--out", dir}, tc.args...)
		if out, err := runExperiment(t, args...); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var s experiment.RunSummary
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		if s.CC != tc.want {
			t.Errorf("%v: cc %q, want %q", tc.args, s.CC, tc.want)
		}
	}
}

// TestExperimentStarTopologyFile: `experiment incast --topology-file` runs a lab's star
// topology as its virtual-time twin, exactly the run its links, congestion control and
// telemetry given as flags make (every output file the same), with all but the last
// host sending unless --senders says otherwise; and refuses, with the reason, a file
// that is no star the incast can run and the flags the file replaces.
func TestExperimentStarTopologyFile(t *testing.T) {
	const file = "../../topologies/incast-1g.yaml"
	fromFile, fromFlags := t.TempDir(), t.TempDir()
	common := []string{"incast", "--flow-size", "256KiB", "--seed", "3"}
	for _, run := range []struct {
		dir  string
		args []string
	}{
		{fromFile, []string{"--topology-file", file}},
		{fromFlags, []string{"--senders", "2", "--link-rate", "1G", "--link-delay", "10us", "--mtu", "1024",
			"--cc", "hpcc", "--mode", "probe", "--telemetry", "int", "--ecn", "4KB,16KB,0.2", "--base-rtt", "65.888us"}},
	} {
		if out, err := runExperiment(t, slices.Concat(common, run.args, []string{"--out", run.dir})...); err != nil {
			t.Fatalf("%v: %v\n%s", run.args, err, out)
		}
	}
	for _, name := range []string{"summary.json", "flows.csv", "queue.csv", "rates.csv"} {
		a, err := os.ReadFile(filepath.Join(fromFile, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(fromFlags, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "summary.json" { // the wall clock differs
			a, b = dropWallClock(t, a), dropWallClock(t, b)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between --topology-file and the same star as flags", name)
		}
	}
	one := t.TempDir()
	if out, err := runExperiment(t, "incast", "--topology-file", file, "--senders", "1", "--flow-size", "64KiB", "--json", "--out", one); err != nil {
		t.Fatalf("--senders 1: %v\n%s", err, out)
	} else if !strings.Contains(out, `"flows_total": 1,`) {
		t.Errorf("--senders 1 with the file: the run did not use one sender:\n%.400s", out)
	}

	dir := t.TempDir()
	write := func(name, y string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hosts := "hosts:\n  - {name: h1, ipv4: 10.0.0.1}\n  - {name: h2, ipv4: 10.0.0.2}\n"
	mixed := write("mixed.yaml", "telemetry: int\ncongestion_control: hpcc\n"+hosts+"switches:\n  - name: s1\nlinks:\n"+
		"  - {endpoints: [h1, s1], rate: 1G, delay: 10us}\n  - {endpoints: [h2, s1], rate: 10G, delay: 10us}\n")
	blind := write("blind.yaml", "telemetry: none\ncongestion_control: hpcc\n"+hosts+"switches:\n  - name: s1\nlinks:\n"+
		"  - {endpoints: [h1, s1], rate: 1G}\n  - {endpoints: [h2, s1], rate: 1G}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology-file", "../../topologies/dumbbell.yaml"}, "a star has one switch"},
		{[]string{"--topology-file", "../../topologies/incast.yaml"}, "switch s1 has PFC"},
		{[]string{"--topology-file", mixed}, "link h2–s1 differs from h1–s1"},
		{[]string{"--topology-file", blind}, "congestion control hpcc needs telemetry"},
		{[]string{"--topology-file", file, "--senders", "3"}, "--senders 3: the topology has 3 hosts, room for 2 senders"},
		{[]string{"--topology-file", file, "--link-rate", "10G"}, "--link-rate does not apply with --topology-file"},
		{[]string{"--topology-file", file, "--mode", "rx"}, "--mode does not apply with --topology-file"},
		{[]string{"--topology-file", file, "--lab", "x"}, "--lab does not apply with --topology-file"},
		{[]string{"--topology-file", "/nonexistent.yaml"}, "--topology-file: open /nonexistent.yaml"},
	} {
		out, err := runExperiment(t, slices.Concat([]string{"incast"}, tc.args, []string{"--out", t.TempDir()})...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q\n%s", tc.args, err, tc.want, out)
		}
	}
}

// dropWallClock returns a summary.json without its wall-clock figures.
func dropWallClock(t *testing.T, data []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if strings.Contains(k, "wall") {
			delete(m, k)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExperimentJSONWritesFilesOnlyIfAsked: `--json` alone writes no files (not even
// the default --out directory); with --out it writes the data files, and the plots
// only with --plots.
func TestExperimentJSONWritesFilesOnlyIfAsked(t *testing.T) {
	t.Chdir(t.TempDir())
	small := []string{"incast", "--senders", "2", "--flow-size", "20KB"}
	if out, err := runExperiment(t, append(small, "--json")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat("experiment-out"); !os.IsNotExist(err) {
		t.Errorf("--json without --out wrote experiment-out (stat: %v)", err)
	}
	for _, c := range []struct {
		args  []string
		plots bool
	}{{[]string{"--json", "--out", "a"}, false}, {[]string{"--out", "b"}, false}, {[]string{"--json", "--out", "c", "--plots"}, true}} {
		if out, err := runExperiment(t, append(small, c.args...)...); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		dir := c.args[slices.Index(c.args, "--out")+1]
		if _, err := os.Stat(filepath.Join(dir, "queue.csv")); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "queue.png")); (err == nil) != c.plots {
			t.Errorf("%v: queue.png: %v, want plots %v", c.args, err, c.plots)
		}
	}
}

// TestExperimentSweep: `experiment sweep` runs every grid point with every seed, its
// --json array is the same on one job and on two, and each run's figures are those
// `experiment --json` gives for the same flags and seed.
func TestExperimentSweep(t *testing.T) {
	args := []string{"sweep", "incast", "--senders", "4", "--flow-size", "50KB", "--seeds", "2-3",
		"--grid", "cc=hpcc,dcqcn", "--grid", "ecn=20KB,80KB,0.2;40KB,160KB,0.5", "--json"}
	var outs [2]string
	for i, jobs := range []string{"1", "2"} {
		out, err := runExperiment(t, append(args, "--jobs", jobs)...)
		if err != nil {
			t.Fatalf("--jobs %s: %v\n%s", jobs, err, out)
		}
		outs[i] = out
	}
	if outs[0] != outs[1] {
		t.Fatalf("one job and two differ:\n%s\n%s", outs[0], outs[1])
	}
	var runs []experiment.SweepOutcome
	if err := json.Unmarshal([]byte(outs[0]), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 8 {
		t.Fatalf("%d runs, want 2 cc × 2 ecn × 2 seeds", len(runs))
	}
	last := runs[len(runs)-1]
	if got := runName(last.Params, last.Seed); got != "cc=dcqcn,ecn=40KB,160KB,0.5,seed=3" {
		t.Errorf("the last run is %s", got)
	}
	one, err := runExperiment(t, "incast", "--senders", "4", "--flow-size", "50KB", "--cc", "dcqcn", "--ecn", "40KB,160KB,0.5",
		"--seed", "3", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, one)
	}
	var single experiment.JSON
	if err := json.Unmarshal([]byte(one), &single); err != nil {
		t.Fatal(err)
	}
	if single.Metrics != last.Metrics {
		t.Errorf("sweep's run %+v, experiment's %+v", last.Metrics, single.Metrics)
	}
	table, err := runExperiment(t, slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--json" })...)
	if err != nil || strings.Count(table, "\n") != 2+4 {
		t.Errorf("the table: want a title, a head and 4 rows: %v\n%s", err, table)
	}
	for _, bad := range [][]string{{"--grid", "seed=1,2"}, {"--grid", "nosuch=1"}, {"--grid", "cc=hpcc", "--cc", "dcqcn"},
		{"--seeds", "0"}, {"--seeds", "3", "--seed", "2"}, {"--realtime"}, {"--jobs", "0"}} {
		if out, err := runExperiment(t, append([]string{"sweep", "incast", "--flow-size", "10KB"}, bad...)...); err == nil {
			t.Errorf("%v: no error\n%s", bad, out)
		}
	}
}
