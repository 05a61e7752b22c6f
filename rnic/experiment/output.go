package experiment

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// WriteFiles writes the time series and completion records as CSV and the plots as PNG
// and SVG into dir:
//
//	queue.csv      t_ns, bottleneck queue bytes
//	rates.csv      t_ns, flow, rate_bps, window_bytes
//	flows.csv      id, src, size_bytes, start_ns, fct_ns, slowdown
//	queue.png/svg  bottleneck queue vs time
//	rates.png/svg  per-flow rate vs time
//	fct.png/svg    FCT slowdown by flow size at p50, p95, p99
func (r *Result) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	q := [][]string{{"t_ns", "queue_bytes"}}
	for _, s := range r.Queue {
		q = append(q, []string{itoa(int64(s.T)), itoa(int64(s.Bytes))})
	}
	rt := [][]string{{"t_ns", "flow", "rate_bps", "window_bytes"}}
	for _, s := range r.Rates {
		rt = append(rt, []string{itoa(int64(s.T)), itoa(int64(s.Flow)), ftoa(s.Rate), ftoa(s.Window)})
	}
	fl := [][]string{{"id", "src", "size_bytes", "start_ns", "fct_ns", "slowdown"}}
	for _, f := range r.Flows {
		fl = append(fl, []string{itoa(int64(f.ID)), itoa(int64(f.Src)), itoa(int64(f.Size)), itoa(f.StartNs), itoa(f.FCTNs), ftoa(f.Slowdown)})
	}
	for name, rows := range map[string][][]string{"queue.csv": q, "rates.csv": rt, "flows.csv": fl} {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return err
		}
	}
	return r.plot(dir)
}

func itoa(v int64) string   { return strconv.FormatInt(v, 10) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteSummary prints the one-screen summary.
func (r *Result) WriteSummary(w io.Writer) {
	c := &r.Config
	fmt.Fprintf(w, "%s: %d senders × %d bytes, %d Gb/s links, %v delay, MTU %d, cc %s", c.Scenario, c.Senders,
		c.FlowSize, c.LinkRate/1e9, c.LinkDelay, c.MTU, c.CC)
	if c.Telemetry != "" && c.CC != "dcqcn" && c.CC != "none" {
		fmt.Fprintf(w, " (%s)", c.Telemetry)
	}
	fmt.Fprintf(w, ", base RTT %v, seed %d\n", r.BaseRTT, c.Seed)
	m := &r.Metrics
	fmt.Fprintf(w, "  bottleneck queue  peak %d B, p99 %d B (after one base RTT), mean over the second half %.0f B\n",
		m.PeakQueue, m.QueueP99, m.MeanQueueLast)
	fmt.Fprintf(w, "  utilization       %.1f%% while flows last\n", 100*m.Utilization)
	fmt.Fprintf(w, "  fairness (Jain)   %.4f\n", m.Jain)
	sd := make([]float64, 0, len(r.Flows))
	var maxFCT int64
	for _, f := range r.Flows {
		sd = append(sd, f.Slowdown)
		maxFCT = max(maxFCT, f.StartNs+f.FCTNs)
	}
	sort.Float64s(sd)
	if len(sd) > 0 {
		fmt.Fprintf(w, "  FCT slowdown      p50 %.2f, p95 %.2f, p99 %.2f; last flow done at %.1f µs\n",
			quantile(sd, 0.5), quantile(sd, 0.95), quantile(sd, 0.99), float64(maxFCT)/1e3)
	}
	fmt.Fprintf(w, "  simulated events  %d\n", r.Events)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  ERROR %s\n", e)
	}
}

// JSON is the --json object.
type JSON struct {
	Metrics
	Flows  []FlowRecord `json:"flows"`
	Errors []string     `json:"errors,omitempty"`
}

// quantile returns the q-quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
