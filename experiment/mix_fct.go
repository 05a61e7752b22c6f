package experiment

import (
	"fmt"
	"sort"
)

// flowRecords records every flow's outcome and the errors of those that failed or
// did not finish.
func (m *mixRun) flowRecords() {
	res := m.res
	for _, f := range m.flows {
		rec := FlowRecord{ID: f.ID, Src: f.Src, Dst: f.Dst, Size: f.Size, StartNs: int64(f.Start)}
		ideal := m.cfg.idealMixFCT(f.Size, m.v6, m.paths.of(f.Src, f.Dst))
		rec.IdealNs = ideal.Nanoseconds()
		switch {
		case f.Failed != "":
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s", f.ID, f.Failed))
		case f.Done == 0:
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d (%d bytes, h%d→h%d, arrived at %v): not finished after %v",
				f.ID, f.Size, f.Src+1, f.Dst+1, f.Start, m.cfg.Limit))
		}
		if f.Done > 0 && f.Failed == "" {
			rec.Finished = true
			rec.FCTNs = f.Done.Sub(f.Start).Nanoseconds()
			rec.Slowdown = max(1, float64(rec.FCTNs)/float64(ideal))
		}
		res.Flows = append(res.Flows, rec)
	}
}

// sizeBucket is one group of flows of similar size: the HPCC paper's Figure 11 sorts
// the flows by size and cuts them into groups of equal count (5% of the flows each),
// labelled by the largest size in the group.
type sizeBucket struct {
	From, To      float64 // percentiles of the flows by size, e.g. 0 and 5
	MinSize, Size int     // smallest and largest size in the bucket
	N             int
	P50, P95, P99 float64 // slowdown quantiles
}

// sizeBuckets groups the finished flows, sorted by size (stably: ties keep arrival
// order), between consecutive percentile edges of their count; a range holding no
// flow is left out.
func sizeBuckets(flows []FlowRecord, edges []float64) []sizeBucket {
	var done []FlowRecord
	for _, f := range flows {
		if f.Finished {
			done = append(done, f)
		}
	}
	sort.SliceStable(done, func(i, j int) bool { return done[i].Size < done[j].Size })
	n := len(done)
	var out []sizeBucket
	for k := 1; k < len(edges); k++ {
		lo, hi := edges[k-1], edges[k]
		a, b := int(lo*float64(n)/100), int(hi*float64(n)/100)
		if b <= a {
			continue
		}
		sd := make([]float64, 0, b-a)
		for _, f := range done[a:b] {
			sd = append(sd, f.Slowdown)
		}
		sort.Float64s(sd)
		out = append(out, sizeBucket{From: lo, To: hi, MinSize: done[a].Size, Size: done[b-1].Size, N: b - a,
			P50: quantile(sd, 0.5), P95: quantile(sd, 0.95), P99: quantile(sd, 0.99)})
	}
	return out
}

// percentSteps returns the edges 0, step, 2·step, …, 100.
func percentSteps(step float64) []float64 {
	var e []float64
	for p := 0.0; p < 100; p += step {
		e = append(e, p)
	}
	return append(e, 100)
}
