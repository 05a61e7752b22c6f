package experiment

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden.txt from this build's outputs")

// goldenFile holds the SHA-256 of every data output of the goldenRuns.
const goldenFile = "testdata/golden.txt"

// goldenRuns are short runs that between them take every telemetry format and
// HPCC mode, DCQCN's marking and CNPs, the ns-3 preset, the fairness scenario and
// both mix topologies (the leaf-spine and the HPCC paper's 320-host fat tree) through
// the per-packet path, on the sequential driver, and the leaf-spine and the fat tree
// on the parallel one.
func goldenRuns() map[string]Config {
	runs := map[string]Config{}
	incast := func(mode rnic.Mode, format telemetry.Format) Config {
		c := Defaults()
		c.Senders, c.FlowSize = 8, 100_000
		c.CC, c.Telemetry = mode, format
		return c
	}
	for _, m := range []rnic.Mode{rnic.ModeHPCC, rnic.ModeHPCCProbe, rnic.ModeRxHPCC, rnic.ModeHPCCEveryN, rnic.ModeDCQCN} {
		runs["incast-"+string(m)] = incast(m, telemetry.FormatINTMD)
	}
	for _, f := range []telemetry.Format{telemetry.FormatIOAM, telemetry.FormatIFA, telemetry.FormatHPCC} {
		runs["incast-hpcc-"+string(f)] = incast(rnic.ModeHPCC, f)
	}
	ns3 := NS3(Defaults())
	ns3.Senders, ns3.FlowSize = 8, 100_000
	runs["incast-ns3"] = ns3
	dcqcn := Defaults() // enough to cross the RED thresholds: ECN marks, CNPs
	dcqcn.FlowSize, dcqcn.CC = 150_000, rnic.ModeDCQCN
	runs["incast-dcqcn-16"] = dcqcn

	fair := Defaults()
	fair.Scenario, fair.Senders, fair.FlowSize, fair.Stagger = "fairness", 3, 200_000, 5*time.Microsecond
	runs["fairness"] = fair

	mix := mixConfig()
	mix.Duration, mix.MTU = 60*time.Microsecond, roce.MTU1024
	runs["mix-hpcc-parallel"] = mix // the default driver: parallel, one thread
	mix.Threads = 0                 // the sequential driver
	runs["mix-hpcc"] = mix
	mix.CC = rnic.ModeDCQCN
	runs["mix-dcqcn"] = mix

	fat3 := MixDefaults()
	fat3.Topology, fat3.Load, fat3.Duration = "fat-tree-3tier", 0.3, 40*time.Microsecond
	fat3.Threads = 0
	runs["fat3-hpcc"] = fat3
	fat3.Threads = 2
	runs["fat3-hpcc-parallel"] = fat3
	return runs
}

// goldenOutputs names the files whose hashes are kept: every data file, the summary
// and the JSON. The plots (PNG, SVG) are drawn from the same series, and their bytes
// depend on the plotting and compression libraries' versions as well.
func goldenOutputs(t *testing.T, cfg Config) map[string][]byte {
	out := outputs(t, cfg)
	for name := range out {
		if strings.HasSuffix(name, ".png") || strings.HasSuffix(name, ".svg") {
			delete(out, name)
		}
	}
	return out
}

// TestGoldenOutputs: the goldenRuns' outputs hash as recorded in testdata/golden.txt,
// so that no change to the per-packet path (or anything else) alters an output byte
// unnoticed. A change meant to alter outputs rewrites the file with
// `go test ./experiment -run TestGoldenOutputs -update-golden` and says why in its
// commit.
func TestGoldenOutputs(t *testing.T) {
	if testing.Short() || raceEnabled {
		// 1 s, 16 s under the race detector; the outputs do not depend on it, and
		// make test's second pass runs this without it.
		t.Skip("runs sixteen short experiments: not in -short or -race runs")
	}
	got := map[string]string{}
	for name, cfg := range goldenRuns() {
		for file, b := range goldenOutputs(t, cfg) {
			got[name+" "+file] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if *updateGolden {
		var b bytes.Buffer
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s\n", k, got[k])
		}
		if err := os.WriteFile(filepath.FromSlash(goldenFile), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(filepath.FromSlash(goldenFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("%s: malformed line %q", goldenFile, sc.Text())
		}
		want[fields[0]+" "+fields[1]] = fields[2]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch w, ok := want[k]; {
		case !ok:
			t.Errorf("%s: not in %s", k, goldenFile)
		case w != got[k]:
			t.Errorf("%s: sha256 %s, want %s", k, got[k], w)
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: in %s but not written", k, goldenFile)
		}
	}
}
