package experiment

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunDirReadsWhatWriteDataWrote: a run written with WriteData reads back through
// RunDir as the Result had it — the summary, the topology, every flow record, every rate
// sample (times, flows, rates, windows, in-flight bytes and U to the written precision)
// and a links.csv row per port per sample — and a table missing a column is refused by
// name.
func TestRunDirReadsWhatWriteDataWrote(t *testing.T) {
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize = 2, 20_000
	res := runOK(t, cfg)
	defer res.Close()
	dir := t.TempDir()
	if err := res.WriteData(dir); err != nil {
		t.Fatal(err)
	}
	d, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Summary.Scenario != res.summaryJSON().Scenario || d.Summary.Metrics.FlowsFinished != res.Metrics.FlowsFinished {
		t.Errorf("summary %+v, want the result's %+v", d.Summary, res.summaryJSON())
	}
	tp, err := d.Topology()
	if err != nil || len(tp.Hosts) != cfg.Senders+1 {
		t.Fatalf("topology: %v, %v", tp, err)
	}
	flows, err := d.Flows()
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != len(res.Flows) {
		t.Fatalf("%d flows read, %d written", len(flows), len(res.Flows))
	}
	for i, f := range flows {
		w := res.Flows[i]
		if f.ID != w.ID || f.Src != w.Src || f.Dst != w.Dst || f.Size != w.Size || f.StartNs != w.StartNs ||
			f.Finished != w.Finished || f.FCTNs != w.FCTNs || f.IdealNs != w.IdealNs || !near(f.Slowdown, w.Slowdown) {
			t.Errorf("flow %d read %+v, written %+v", i, f, w)
		}
	}
	var want []RateSample
	if err := res.EachRate(func(s RateSample) { want = append(want, s) }); err != nil {
		t.Fatal(err)
	}
	var got []RateRow
	if err := d.Rates(func(r RateRow) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d rate rows read, %d samples written", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.TNs != int64(time.Duration(w.T)) || r.Flow != w.Flow || !near(r.RateBps, w.Rate) || !near(r.WindowBytes, w.Window) ||
			r.InFlight != w.InFlight || r.HasU != w.HasU || !near(r.U, w.U) {
			t.Fatalf("rate row %d read %+v, written %+v", i, r, w)
		}
	}
	ports := map[string]bool{}
	rows := 0
	if err := d.Links(func(r LinkRow) error { ports[r.Port] = true; rows++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ports) == 0 || rows%len(ports) != 0 {
		t.Errorf("links.csv: %d rows over %d ports, want a row per port per sample", rows, len(ports))
	}

	// A table without a column the reader needs is refused by its name.
	path := filepath.Join(dir, RatesFile)
	data, _ := os.ReadFile(path)
	header, rest, _ := strings.Cut(string(data), "\n")
	cols := slices.DeleteFunc(strings.Split(header, ","), func(c string) bool { return c == "hpcc_u" })
	if err := os.WriteFile(path, []byte(strings.Join(cols, ",")+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Rates(func(RateRow) error { return nil }); err == nil || !strings.Contains(err.Error(), "no hpcc_u column") {
		t.Errorf("rates.csv without hpcc_u: %v, want an error naming the column", err)
	}
}

// near compares two figures as the CSVs round them.
func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-6*max(1, a, b, -a, -b)
}
