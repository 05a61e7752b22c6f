package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
// metrics and a record per flow, and writes the files.
func TestExperimentMixJSON(t *testing.T) {
	dir := t.TempDir()
	out, err := runExperiment(t, "mix", "--cdf", "fbhadoop", "--flows", "20", "--load", "0.5", "--json", "--out", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"bottleneck_peak_queue_bytes", "bottleneck_queue_p99_bytes", "bottleneck_mean_queue_bytes_last_half",
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
		{[]string{"mix", "--duration", "soon"}, "--duration: duration \"soon\""},
		{[]string{"mix", "--link-rate", "fast"}, "--link-rate: rate \"fast\""},
		{[]string{"mix", "--senders", "4"}, "--senders does not apply to the mix scenario"},
		{[]string{"incast", "--load", "0.5"}, "--load does not apply to the incast scenario"},
		{[]string{"incast", "--eta", "NaN"}, "--eta NaN: want a target utilization in (0, 1]"},
		{[]string{"incast", "--eta", "0"}, "--eta 0: want a target utilization in (0, 1]"},
		{[]string{"incast", "--eta", "1.5"}, "--eta 1.5"},
		{[]string{"incast", "--mode", "every-n", "--every-n", "0"}, "--every-n 0: want at least 1"},
		{[]string{"incast", "--every-n", "-1"}, "--every-n -1: want at least 1"},
		{[]string{"incast", "--senders", "100000"}, "--senders 100000: want 1 to 1024"},
		{[]string{"mix", "--topology", "fat-tree", "--k", "100"}, "at most 65536 hosts"},
	} {
		out, err := runExperiment(t, append(tc.args, "--out", t.TempDir())...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q\n%s", tc.args, err, tc.want, out)
		}
	}
}
