package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rocelab/rocelab/experiment"
)

// sweepFlags are `experiment sweep`'s own flags.
type sweepFlags struct {
	seeds string
	grid  []string
	jobs  int
}

func (s *sweepFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&s.seeds, "seeds", "", "seeds to run each grid point with: N (1 to N), A-B or a list A,B,C (default: --seed)")
	f.StringArrayVar(&s.grid, "grid", nil, "NAME=V1,V2,...: run each value of the experiment flag NAME (repeat for a grid: every combination); "+
		"values holding commas (--ecn's) are separated by ';'")
	f.IntVar(&s.jobs, "jobs", runtime.NumCPU(), "runs at once, each on its own goroutine (default: the machine's cores)")
}

// sweepOnly are the flags a grid may not vary: the sweep's own and those that are not
// a run's parameters.
var sweepOnly = []string{"seeds", "grid", "jobs", "seed", "out", "json", "plots", "lab", "realtime", "help"}

// newSweepCmd returns `experiment sweep`. It parses its flags itself, once per run,
// so that each run's configuration is what `experiment` makes of the same flags.
func newSweepCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sweep incast|fairness|mix [--seeds N] [--grid NAME=V1,V2]... [experiment flags]",
		Short: "Run a scenario over seeds and a grid of parameters in one process on all cores: one progress line, one table",
		Long: `Runs the scenario once per seed (--seeds) and combination of --grid values, --jobs
runs at once in virtual time, and prints one table: a row per grid point with each
figure's mean over the seeds and, for several, its range. Every other flag is
experiment's and applies to every run. The table (and --json's array of runs) is the
same whatever --jobs is; a run's figures are those 'experiment' prints for it.
--out DIR writes each run's files into DIR/NAME=VALUE,...,seed=N (plots with --plots).`,
		Example: `  rocelab experiment sweep incast --seeds 8 --grid cc=hpcc,dcqcn --grid flow-size=100KB,1MB
  rocelab experiment sweep mix --seeds 1-4 --grid load=0.3,0.5,0.7 --cdf websearch --json
  rocelab experiment sweep incast --preset ns3 --cc dcqcn --grid 'ecn=100KB,400KB,0.2;400KB,1600KB,0.2'`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, raw []string) error {
			return runSweep(cmd, raw)
		},
	}
	// For the help only: the flags are parsed per run (runSweep).
	newExperimentFlags().bind(cmd.Flags())
	new(sweepFlags).bind(cmd.Flags())
	return cmd
}

// parseSweep parses raw, then the overrides after it, into a fresh set of flags.
func parseSweep(raw, overrides []string) (*experimentFlags, *sweepFlags, *pflag.FlagSet, error) {
	e, s := newExperimentFlags(), new(sweepFlags)
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.bind(fs)
	s.bind(fs)
	fs.BoolP("help", "h", false, "")
	err := fs.Parse(slices.Concat(raw, overrides))
	return e, s, fs, err
}

func runSweep(cmd *cobra.Command, raw []string) error {
	e, s, fs, err := parseSweep(raw, nil)
	if errors.Is(err, pflag.ErrHelp) {
		return cmd.Help()
	}
	if err != nil {
		return fmt.Errorf("experiment sweep: %w", err)
	}
	if help, _ := fs.GetBool("help"); help {
		return cmd.Help()
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("experiment sweep: want one scenario (incast, fairness or mix), got %d arguments", fs.NArg())
	}
	if e.labName != "" || e.realTime {
		return fmt.Errorf("experiment sweep: runs in virtual time: no --lab or --realtime")
	}
	if s.jobs < 1 {
		return fmt.Errorf("experiment sweep: --jobs %d: want at least 1", s.jobs)
	}
	seeds := []uint64{e.cfg.Seed}
	if fs.Changed("seeds") {
		if fs.Changed("seed") {
			return fmt.Errorf("experiment sweep: give --seed or --seeds, not both")
		}
		if seeds, err = parseSeeds(s.seeds); err != nil {
			return fmt.Errorf("experiment sweep: --seeds %q: %w", s.seeds, err)
		}
	}
	points, err := parseGrid(s.grid, fs)
	if err != nil {
		return fmt.Errorf("experiment sweep: %w", err)
	}
	runs, dirs, err := sweepRuns(raw, points, seeds)
	if err != nil {
		return err
	}
	files := outputs{plots: e.plots}
	if fs.Changed("out") || e.plots {
		files.dir = e.out
	}
	var keep func(int, *experiment.Result) error
	if files.dir != "" {
		keep = func(i int, res *experiment.Result) error {
			return outputs{dir: filepath.Join(files.dir, dirs[i]), plots: files.plots}.write(res)
		}
	}
	start := time.Now()
	pr := newProgress(cmd.ErrOrStderr())
	var onDone func(done, total int)
	if pr != nil {
		onDone = pr.runs
	}
	outcomes := experiment.Sweep(runs, s.jobs, keep, onDone)
	if pr != nil {
		pr.clear()
	}
	return reportSweep(cmd.OutOrStdout(), e.asJSON, outcomes, fmt.Sprintf("sweep: %s, %d runs (%d grid points × %d seeds), %d at once, %v wall clock",
		fs.Arg(0), len(runs), len(points), len(seeds), min(s.jobs, len(runs)), time.Since(start).Round(time.Millisecond)))
}

// sweepRuns makes each grid point's run for each seed, parsing the flags as experiment
// would with the point's values and the seed, and names each run's directory.
func sweepRuns(raw []string, points [][]experiment.Param, seeds []uint64) ([]experiment.SweepRun, []string, error) {
	var runs []experiment.SweepRun
	var dirs []string
	for _, point := range points {
		var overrides []string
		for _, p := range point {
			overrides = append(overrides, "--"+p.Name+"="+p.Value)
		}
		for _, seed := range seeds {
			over := append(slices.Clone(overrides), "--seed="+strconv.FormatUint(seed, 10))
			e, _, fs, err := parseSweep(raw, over)
			if err != nil {
				return nil, nil, fmt.Errorf("experiment sweep: %s: %w", strings.Join(over, " "), err)
			}
			cfg, _, err := e.config(fs, fs.Arg(0))
			if err != nil {
				return nil, nil, fmt.Errorf("experiment sweep: %s: %w", strings.Join(over, " "), err)
			}
			runs = append(runs, experiment.SweepRun{Params: point, Config: cfg})
			dirs = append(dirs, runName(point, seed))
		}
	}
	return runs, dirs, nil
}

// reportSweep prints the outcomes (as JSON, or the headline and the table) and fails if
// any run had errors, naming each in the table's form.
func reportSweep(w io.Writer, asJSON bool, outcomes []experiment.SweepOutcome, headline string) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(outcomes); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w, headline)
		experiment.WriteSweepTable(w, outcomes)
	}
	failed := 0
	for _, o := range outcomes {
		if len(o.Errors) > 0 {
			failed++
			if !asJSON {
				fmt.Fprintf(w, "  ERROR %s: %s\n", runName(o.Params, o.Seed), o.Errors[0])
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("experiment sweep: %d of %d runs had errors", failed, len(outcomes))
	}
	return nil
}

// runName names a run (its directory under --out): "cc=dcqcn,seed=3".
func runName(point []experiment.Param, seed uint64) string {
	var parts []string
	for _, p := range point {
		parts = append(parts, p.Name+"="+strings.ReplaceAll(p.Value, "/", "_"))
	}
	return strings.Join(append(parts, "seed="+strconv.FormatUint(seed, 10)), ",")
}

// parseSeeds reads --seeds: N (1 to N), A-B, or A,B,C.
func parseSeeds(s string) ([]uint64, error) {
	const most = 1 << 16
	var seeds []uint64
	switch {
	case strings.Contains(s, ","):
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("want N, A-B or A,B,C: %w", err)
			}
			seeds = append(seeds, v)
		}
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, err1 := strconv.ParseUint(a, 10, 64)
		hi, err2 := strconv.ParseUint(b, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("want N, A-B or A,B,C: %w", err)
		}
		if hi < lo || hi-lo >= most {
			return nil, fmt.Errorf("want A ≤ B and at most %d seeds", most)
		}
		for v := lo; v <= hi; v++ {
			seeds = append(seeds, v)
		}
	default:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("want N (1 to %d), A-B or A,B,C", most)
		}
		for v := range n {
			seeds = append(seeds, v+1)
		}
	}
	if len(seeds) > most {
		return nil, fmt.Errorf("at most %d seeds", most)
	}
	return seeds, nil
}

// parseGrid reads the --grid flags into every combination of their values, the first
// flag's varying slowest; no flag gives one point without parameters.
func parseGrid(grid []string, fs *pflag.FlagSet) ([][]experiment.Param, error) {
	points := [][]experiment.Param{nil}
	seen := map[string]bool{}
	for _, g := range grid {
		name, values, ok := strings.Cut(g, "=")
		name = strings.TrimPrefix(name, "--")
		switch {
		case !ok || values == "":
			return nil, fmt.Errorf("--grid %q: want NAME=V1,V2 (values of an experiment flag)", g)
		case fs.Lookup(name) == nil:
			return nil, fmt.Errorf("--grid %q: no experiment flag --%s", g, name)
		case slices.Contains(sweepOnly, name):
			return nil, fmt.Errorf("--grid %q: --%s is not a run's parameter (seeds: --seeds)", g, name)
		case seen[name]:
			return nil, fmt.Errorf("--grid %q: --%s is already varied", g, name)
		case fs.Changed(name):
			return nil, fmt.Errorf("--grid %q: --%s is also given alone", g, name)
		}
		seen[name] = true
		sep := ","
		if strings.Contains(values, ";") {
			sep = ";"
		}
		var next [][]experiment.Param
		for _, p := range points {
			for _, v := range strings.Split(values, sep) {
				next = append(next, append(slices.Clone(p), experiment.Param{Name: name, Value: v}))
			}
		}
		if points = next; len(points) > 1<<16 {
			return nil, fmt.Errorf("--grid: more than %d grid points", 1<<16)
		}
	}
	return points, nil
}

// runs redraws the line for a sweep: runs done of all, and the time left at the
// rate so far.
func (pr *progress) runs(done, total int) {
	el := pr.now().Sub(pr.start)
	eta := (time.Duration(float64(el) * float64(total-done) / float64(done))).Round(time.Second)
	fmt.Fprintf(pr.w, "\r\033[K  sweep: %d/%d runs done · %v · ETA ~%v", done, total, el.Round(time.Second), eta)
	pr.shown = true
}
