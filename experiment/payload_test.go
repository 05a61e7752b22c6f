package experiment

import (
	"bytes"
	"encoding/json"
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
