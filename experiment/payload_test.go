package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rocelab/rocelab/roce"
)

// outputs runs cfg and returns every file it writes, its summary and its JSON, by name.
func outputs(t *testing.T, cfg Config) map[string][]byte {
	t.Helper()
	res := runOK(t, cfg)
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		if out[f.Name()], err = os.ReadFile(filepath.Join(dir, f.Name())); err != nil {
			t.Fatal(err)
		}
	}
	var sum bytes.Buffer
	res.WriteSummary(&sum)
	out["summary"] = sum.Bytes()
	if out["json"], err = json.Marshal(JSON{Metrics: res.Metrics, Flows: res.Flows, Errors: res.Errors}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPayloadFreeSameOutput: a payload-free run (no data bytes, no ICRC, MRs that are
// lengths) gives byte for byte the files, summary and JSON of the run that moves and
// checks every byte (Verify), on the 16:1 incast and on a mix.
func TestPayloadFreeSameOutput(t *testing.T) {
	incast := Defaults()
	incast.FlowSize = 100_000
	mix := mixConfig()
	mix.Duration = 100 * time.Microsecond
	mix.MTU = roce.MTU1024
	for name, cfg := range map[string]Config{"incast": incast, "mix": mix} {
		t.Run(name, func(t *testing.T) {
			cfg.Verify = true
			verified := outputs(t, cfg)
			cfg.Verify = false
			free := outputs(t, cfg)
			if len(verified) != len(free) || len(free) < 8 {
				t.Fatalf("%d files with Verify, %d without", len(verified), len(free))
			}
			for n, b := range verified {
				if !bytes.Equal(b, free[n]) {
					t.Errorf("%s differs between the verified and the payload-free run", n)
				}
			}
		})
	}
}

// TestFiguresOnlySameFigures: a run that keeps its figures only (no rate samples, no
// links table, in a star no queue series but the bottleneck's) gives the same
// metrics, flows and errors as the run that keeps everything, in every scenario, and
// refuses to write files it does not have.
func TestFiguresOnlySameFigures(t *testing.T) {
	incast := NS3(Defaults())
	incast.FlowSize = 200_000
	fairness := Defaults()
	fairness.Scenario, fairness.Senders, fairness.FlowSize, fairness.Stagger = "fairness", 3, 300_000, 20*time.Microsecond
	mix := mixConfig()
	mix.Duration = 100 * time.Microsecond
	for name, cfg := range map[string]Config{"incast": incast, "fairness": fairness, "mix": mix} {
		t.Run(name, func(t *testing.T) {
			figures := func(cfg Config) ([]byte, *Result) {
				res, err := Run(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { res.Close() })
				b, err := json.Marshal(JSON{Metrics: res.Metrics, Flows: res.Flows, Errors: res.Errors})
				if err != nil {
					t.Fatal(err)
				}
				return b, res
			}
			all, _ := figures(cfg)
			cfg.FiguresOnly = true
			only, res := figures(cfg)
			if !bytes.Equal(all, only) {
				t.Fatalf("figures differ:\nall  %s\nonly %s", all, only)
			}
			if res.Metrics.FlowsFinished == 0 || res.Metrics.Window.EndNs == 0 {
				t.Fatalf("a run that says nothing: %s", only)
			}
			if err := res.WriteData(t.TempDir()); !errors.Is(err, errFiguresOnly) {
				t.Fatalf("WriteData of a figures-only run: %v", err)
			}
		})
	}
}
