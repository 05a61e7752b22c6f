package experiment

import (
	"math"
	"testing"
	"time"

	"github.com/rocelab/rocelab/roce"
)

// meanRates returns each flow's mean pacing rate over [from, to].
func meanRates(t *testing.T, res *Result, from, to time.Duration) []float64 {
	t.Helper()
	sum := make([]float64, len(res.Flows))
	n := make([]int, len(res.Flows))
	if err := res.EachRate(func(s RateSample) {
		if s.T.Duration() >= from && s.T.Duration() <= to {
			sum[s.Flow] += s.Rate
			n[s.Flow]++
		}
	}); err != nil {
		t.Fatal(err)
	}
	for i := range sum {
		sum[i] /= float64(max(n[i], 1))
	}
	return sum
}

// TestFairnessTwoFlows starts a second long flow while the first one owns the
// bottleneck: both must converge to within 10% of the fair share.
func TestFairnessTwoFlows(t *testing.T) {
	cfg := Defaults()
	cfg.Scenario, cfg.Senders, cfg.FlowSize = "fairness", 2, 16_000_000
	cfg.MTU = roce.MTU4096
	cfg.Stagger = 200 * time.Microsecond
	cfg.Sample = time.Microsecond
	res := runOK(t, cfg)
	end := time.Duration(math.MaxInt64)
	for _, f := range res.Flows {
		end = min(end, time.Duration(f.StartNs+f.FCTNs))
	}
	from := cfg.Stagger + (end-cfg.Stagger)/2 // the second half of the overlap
	rates := meanRates(t, res, from, end)
	fair := (rates[0] + rates[1]) / 2
	t.Logf("overlap [%v, %v]: rates %.2f / %.2f Gb/s, fair share %.2f Gb/s; %+v", from, end, rates[0]/1e9, rates[1]/1e9, fair/1e9, res.Metrics)
	for i, r := range rates {
		if math.Abs(r-fair) > 0.1*fair {
			t.Errorf("flow %d at %.2f Gb/s, more than 10%% from the fair share %.2f Gb/s", i, r/1e9, fair/1e9)
		}
	}
	if total := rates[0] + rates[1]; total < 0.85*float64(cfg.LinkRate) {
		t.Errorf("the two flows share %.1f Gb/s of %d Gb/s", total/1e9, cfg.LinkRate/1e9)
	}
}
