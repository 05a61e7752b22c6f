package experiment

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
)

// Param is one parameter a sweep varies and its value in a run ("cc", "dcqcn").
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SweepRun is one run of a sweep: its grid point's parameters and its configuration
// (seed included).
type SweepRun struct {
	Params []Param
	Config Config
}

// SweepOutcome is what a sweep keeps of a run: its figures, not its series, so
// that a sweep's memory is that of the runs under way.
type SweepOutcome struct {
	Params  []Param `json:"params"`
	Seed    uint64  `json:"seed"`
	Metrics Metrics `json:"metrics"`
	// The FCT slowdown quantiles over the finished flows (0 if none finished).
	SlowdownP50 float64  `json:"slowdown_p50"`
	SlowdownP95 float64  `json:"slowdown_p95"`
	SlowdownP99 float64  `json:"slowdown_p99"`
	Events      uint64   `json:"events"`
	Packets     uint64   `json:"packets"`
	Errors      []string `json:"errors,omitempty"` // the run's, or why it did not run
}

// Sweep runs runs on jobs goroutines (at least one), each in its own virtual time,
// and returns their outcomes in the order of runs: the same whatever the number of
// jobs. keep, if not nil, is given each run's Result before it is dropped (to
// write its files; an error joins the outcome's). progress, if not nil, is called
// after each run with how many are done, one call at a time.
func Sweep(runs []SweepRun, jobs int, keep func(i int, res *Result) error, progress func(done, total int)) []SweepOutcome {
	out := make([]SweepOutcome, len(runs))
	next := make(chan int)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for range max(1, min(jobs, len(runs))) {
		wg.Go(func() {
			for i := range next {
				out[i] = sweepOne(i, runs[i], keep)
				if progress != nil {
					mu.Lock()
					done++
					progress(done, len(runs))
					mu.Unlock()
				}
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// sweepOne runs one run of a sweep.
func sweepOne(i int, run SweepRun, keep func(int, *Result) error) SweepOutcome {
	o := SweepOutcome{Params: run.Params, Seed: run.Config.Seed}
	cfg := run.Config
	cfg.FiguresOnly = cfg.FiguresOnly || keep == nil // nothing will write its files
	res, err := Run(cfg)
	if err != nil {
		o.Errors = []string{err.Error()}
		return o
	}
	o.Metrics, o.Errors, o.Events, o.Packets = res.Metrics, res.Errors, res.Events, res.Packets
	var sd []float64
	for _, f := range res.Flows {
		if f.Finished {
			sd = append(sd, f.Slowdown)
		}
	}
	if len(sd) > 0 {
		slices.Sort(sd)
		o.SlowdownP50, o.SlowdownP95, o.SlowdownP99 = quantile(sd, 0.5), quantile(sd, 0.95), quantile(sd, 0.99)
	}
	if keep != nil {
		if err := keep(i, res); err != nil {
			o.Errors = append(o.Errors, err.Error())
		}
	}
	if err := res.Close(); err != nil {
		o.Errors = append(o.Errors, err.Error())
	}
	return o
}

// WriteSweepTable prints a sweep's summary: a row per grid point (consecutive
// outcomes with the same parameters, its seeds), each figure the mean over the
// seeds and, for more than one, its range.
func WriteSweepTable(w io.Writer, outcomes []SweepOutcome) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var names []string
	if len(outcomes) > 0 {
		for _, p := range outcomes[0].Params {
			names = append(names, p.Name)
		}
	}
	head := append(slices.Clone(names), "seeds", "flows done", "slowdown p50", "slowdown p99", "mean queue KB",
		"utilization %", "goodput Gb/s", "Jain", "errors")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for start := 0; start < len(outcomes); {
		end := start + 1
		for end < len(outcomes) && slices.Equal(outcomes[end].Params, outcomes[start].Params) {
			end++
		}
		group := outcomes[start:end]
		var row []string
		for _, p := range group[0].Params {
			row = append(row, p.Value)
		}
		finished, total, errs := 0, 0, 0
		for _, o := range group {
			finished += o.Metrics.FlowsFinished
			total += o.Metrics.FlowsTotal
			errs += len(o.Errors)
		}
		row = append(row, fmt.Sprint(len(group)), fmt.Sprintf("%d/%d", finished, total),
			spread(group, "%.2f", func(o SweepOutcome) float64 { return o.SlowdownP50 }),
			spread(group, "%.2f", func(o SweepOutcome) float64 { return o.SlowdownP99 }),
			spread(group, "%.1f", func(o SweepOutcome) float64 { return o.Metrics.MeanQueue / 1e3 }),
			spread(group, "%.1f", func(o SweepOutcome) float64 { return 100 * o.Metrics.Utilization }),
			spread(group, "%.1f", func(o SweepOutcome) float64 { return o.Metrics.Goodput / 1e9 }),
			spread(group, "%.4f", func(o SweepOutcome) float64 { return o.Metrics.Jain }),
			fmt.Sprint(errs))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		start = end
	}
	tw.Flush()
}

// spread formats a figure over a grid point's seeds: "1.23" for one seed or seeds
// that agree, else "mean [min–max]".
func spread(group []SweepOutcome, format string, f func(SweepOutcome) float64) string {
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, o := range group {
		v := f(o)
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	mean := fmt.Sprintf(format, sum/float64(len(group)))
	if l, h := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi); l != h {
		return mean + " [" + l + "–" + h + "]"
	}
	return mean
}
