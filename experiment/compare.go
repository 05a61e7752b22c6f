package experiment

import (
	"fmt"
	"io"
	"strconv"
)

// RunSummary is a run's summary.json: what ran and its metrics, for `experiment
// compare`.
type RunSummary struct {
	Scenario string  `json:"scenario"`
	CC       string  `json:"cc"`
	Setup    string  `json:"setup"` // the summary's first line
	Metrics  Metrics `json:"metrics"`
}

// summaryJSON is the run's RunSummary.
func (r *Result) summaryJSON() RunSummary {
	s := RunSummary{Scenario: r.Config.Scenario, CC: r.Config.ccName(), Metrics: r.Metrics}
	if x := r.MixInfo; x != nil {
		s.Setup = fmt.Sprintf("%s (%d hosts), %s", x.Topology, x.Hosts, x.Workload)
	} else {
		s.Setup = fmt.Sprintf("%d senders × %d bytes", r.Config.Senders, r.Config.FlowSize)
	}
	return s
}

// Comparison is two runs side by side: B's figures over A's.
type Comparison struct {
	A        RunSummary      `json:"a"`
	B        RunSummary      `json:"b"`
	DirA     string          `json:"dir_a"`
	DirB     string          `json:"dir_b"`
	Metrics  []CompareRow    `json:"metrics"`
	Slowdown []CompareBucket `json:"slowdown"`
}

// CompareRow is one metric of both runs and B/A (0 when A's is 0).
type CompareRow struct {
	Name  string  `json:"name"`
	A     float64 `json:"a"`
	B     float64 `json:"b"`
	Ratio float64 `json:"ratio"`
}

// CompareBucket is one size class's slowdown quantiles in both runs: the flows of
// each run cut at the same percentiles of their sizes (50, 80, 95), finished flows
// only.
type CompareBucket struct {
	Class  string     `json:"class"` // "0–50%"
	SizesA string     `json:"sizes_a"`
	SizesB string     `json:"sizes_b"`
	FlowsA int        `json:"flows_a"`
	FlowsB int        `json:"flows_b"`
	P50    CompareRow `json:"p50"`
	P95    CompareRow `json:"p95"`
	P99    CompareRow `json:"p99"`
}

func ratio(a, b float64) CompareRow {
	r := CompareRow{A: a, B: b}
	if a != 0 {
		r.Ratio = b / a
	}
	return r
}

// Compare reads the summary.json and flows.csv of two runs' output directories.
func Compare(dirA, dirB string) (*Comparison, error) {
	c := &Comparison{DirA: dirA, DirB: dirB}
	var flows [2][]FlowRecord
	for i, dir := range []string{dirA, dirB} {
		s, f, err := readRun(dir)
		if err != nil {
			return nil, err
		}
		flows[i] = f
		if i == 0 {
			c.A = s
		} else {
			c.B = s
		}
	}
	a, b := &c.A.Metrics, &c.B.Metrics
	for _, m := range []struct {
		name string
		a, b float64
	}{
		{"flows_finished", float64(a.FlowsFinished), float64(b.FlowsFinished)},
		{"bottleneck_peak_queue_bytes", float64(a.PeakQueue), float64(b.PeakQueue)},
		{"bottleneck_mean_queue_bytes", a.MeanQueue, b.MeanQueue},
		{"bottleneck_queue_p99_bytes", float64(a.QueueP99), float64(b.QueueP99)},
		{"bottleneck_wire_rate_bps", a.WireRate, b.WireRate},
		{"goodput_bps", a.Goodput, b.Goodput},
		{"jain_fairness", a.Jain, b.Jain},
	} {
		row := ratio(m.a, m.b)
		row.Name = m.name
		c.Metrics = append(c.Metrics, row)
	}
	ka, kb := mixClasses(flows[0]), mixClasses(flows[1])
	for i := range max(len(ka), len(kb)) {
		var x, y sizeBucket
		if i < len(ka) {
			x = ka[i]
		}
		if i < len(kb) {
			y = kb[i]
		}
		from, to := x.From, x.To
		if i >= len(ka) {
			from, to = y.From, y.To
		}
		c.Slowdown = append(c.Slowdown, CompareBucket{Class: fmt.Sprintf("%g–%g%%", from, to),
			SizesA: sizeRange(x), SizesB: sizeRange(y), FlowsA: x.N, FlowsB: y.N,
			P50: ratio(x.P50, y.P50), P95: ratio(x.P95, y.P95), P99: ratio(x.P99, y.P99)})
	}
	return c, nil
}

func sizeRange(b sizeBucket) string {
	if b.N == 0 {
		return ""
	}
	return bytesString(float64(b.MinSize)) + " – " + bytesString(float64(b.Size))
}

// readRun reads a run's summary.json and flows.csv.
func readRun(dir string) (RunSummary, []FlowRecord, error) {
	d, err := OpenRun(dir)
	if err != nil {
		return RunSummary{}, nil, fmt.Errorf("experiment: compare: %w", err)
	}
	flows, err := d.Flows()
	if err != nil {
		return RunSummary{}, nil, fmt.Errorf("experiment: compare: %s: %w", dir, err)
	}
	return d.Summary, flows, nil
}

// WriteText prints the comparison as two tables.
func (c *Comparison) WriteText(w io.Writer) {
	fmt.Fprintf(w, "A  %s: %s, %s, %s\n", c.DirA, c.A.Scenario, c.A.Setup, c.A.CC)
	fmt.Fprintf(w, "B  %s: %s, %s, %s\n", c.DirB, c.B.Scenario, c.B.Setup, c.B.CC)
	fmt.Fprintf(w, "window A  %s\nwindow B  %s\n\n", c.A.Metrics.Window, c.B.Metrics.Window)
	fmt.Fprintf(w, "%-30s %14s %14s %8s\n", "metric", "A", "B", "B/A")
	for _, m := range c.Metrics {
		fmt.Fprintf(w, "%-30s %14s %14s %8s\n", m.Name, strconv.FormatFloat(m.A, 'g', 6, 64), strconv.FormatFloat(m.B, 'g', 6, 64), ratioText(m))
	}
	fmt.Fprintf(w, "\nFCT slowdown over finished flows, by size class (flows cut at the 50th, 80th and 95th percentile of size)\n")
	fmt.Fprintf(w, "%-9s %-21s %-21s %5s %5s  %6s %6s %6s  %6s %6s %6s  %6s %6s %6s\n", "class", "sizes A", "sizes B", "n A", "n B",
		"p50 A", "p50 B", "B/A", "p95 A", "p95 B", "B/A", "p99 A", "p99 B", "B/A")
	for _, k := range c.Slowdown {
		fmt.Fprintf(w, "%-9s %-21s %-21s %5d %5d", k.Class, k.SizesA, k.SizesB, k.FlowsA, k.FlowsB)
		for _, q := range []CompareRow{k.P50, k.P95, k.P99} {
			fmt.Fprintf(w, "  %6.2f %6.2f %6s", q.A, q.B, ratioText(q))
		}
		fmt.Fprintln(w)
	}
}

func ratioText(r CompareRow) string {
	if r.A == 0 {
		return "–"
	}
	return strconv.FormatFloat(r.Ratio, 'f', 3, 64)
}
