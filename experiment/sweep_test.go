package experiment

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/rocelab/rocelab/rnic"
)

// TestSweepSameOnAnyJobs: a sweep's outcomes, incasts and mixes side by side, come
// back in the runs' order and the same on one goroutine and on three (under the race
// detector too, where runs share no state unguarded), each that of the run alone.
func TestSweepSameOnAnyJobs(t *testing.T) {
	var runs []SweepRun
	for seed := range uint64(2) {
		for _, cc := range []rnic.Mode{rnic.ModeHPCC, rnic.ModeDCQCN} {
			in := Defaults()
			in.Senders, in.FlowSize, in.CC, in.Seed = 4, 50_000, cc, seed+1
			mix := mixConfig()
			mix.Duration, mix.CC, mix.Seed = 40*time.Microsecond, cc, seed+1
			for _, c := range []Config{in, mix} {
				runs = append(runs, SweepRun{Params: []Param{{"scenario", c.Scenario}, {"cc", string(cc)}}, Config: c})
			}
		}
	}
	var progress []int
	one := Sweep(runs, 1, nil, func(done, total int) {
		if total != len(runs) {
			t.Errorf("progress of %d runs, want %d", total, len(runs))
		}
		progress = append(progress, done)
	})
	three := Sweep(runs, 3, nil, nil)
	if !reflect.DeepEqual(one, three) {
		t.Fatal("one job and three differ")
	}
	if len(progress) != len(runs) || progress[len(progress)-1] != len(runs) {
		t.Errorf("progress %v", progress)
	}
	alone, err := Run(runs[7].Config)
	if err != nil {
		t.Fatal(err)
	}
	if o := one[7]; o.Metrics != alone.Metrics || o.Packets != alone.Packets || o.Seed != 2 || o.Params[0].Value != "mix" {
		t.Errorf("the sweep's run 7 (%v seed %d) differs from the run alone", o.Params, o.Seed)
	}
	for i, o := range one {
		if len(o.Errors) > 0 || o.Metrics.FlowsFinished == 0 {
			t.Errorf("run %d (%v, seed %s): %d flows finished, errors %v", i, o.Params, strconv.FormatUint(o.Seed, 10),
				o.Metrics.FlowsFinished, o.Errors)
		}
	}
}
