package perftest

import (
	"math"
	"sort"
)

// Times are perftest's cycle counts, here nanoseconds from an epoch of the run (never
// zero, so that an unset entry of the arrays is distinguishable). Like perftest's
// cycles_t they are unsigned: differences with an entry that was never set wrap
// around, which the peak search relies on.
const nsPerSecond = 1e9

// bwTimes is what a bandwidth run leaves for print_report_bw: perftest's tposted and
// tcompleted arrays and the counters.
type bwTimes struct {
	size       int
	iters      uint64 // per QP; with -D the completions counted in the sample window
	qps        int
	cqMod      int
	byDuration bool
	noPeak     bool
	tposted    []uint64 // the post time of each WR, over all QPs in posting order (tposted[0] only with -N/-D)
	tcompleted []uint64 // the time of each signalled completion, at the WR count it completes
}

// bwReport is print_report_bw's computation: the average over the whole run (or the
// sample window of -D) and the peak, the shortest time per message over any run of
// messages that ends at a signalled completion.
func bwReport(t bwTimes, gbits bool) BWReport {
	n := t.iters
	if !t.byDuration {
		n *= uint64(t.qps)
	}
	formatFactor := float64(0x100000) // MB/sec is MiB/s in perftest
	if gbits {
		formatFactor = 125000000
	}
	optDelta := t.tcompleted[0] - t.tposted[0]
	if !t.noPeak {
		mod := uint64(t.cqMod)
		for i := uint64(0); i < n; i++ {
			for j := (i+1+mod-1)/mod*mod - 1; j < n; j += mod {
				if d := (t.tcompleted[j] - t.tposted[i]) / (j - i + 1); d < optDelta {
					optDelta = d
				}
			}
			// The last WR is signalled whatever the moderation.
			if n%mod != 0 {
				j := n - 1
				if d := (t.tcompleted[j] - t.tposted[i]) / (j - i + 1); d < optDelta {
					optDelta = d
				}
			}
		}
	}
	last := uint64(0)
	if !t.noPeak {
		last = n - 1
	}
	sum := float64(t.tcompleted[last] - t.tposted[0])
	rep := BWReport{Size: uint64(t.size), Iters: n,
		BWAvg:   float64(t.size) * float64(n) * nsPerSecond / (sum * formatFactor),
		MsgRate: float64(n) * nsPerSecond / (sum * 1e6)}
	if !t.noPeak {
		// perftest computes the peak in integers: size × cycles per second over the
		// best time per message × the unit.
		rep.BWPeak = float64(uint64(t.size)*uint64(nsPerSecond)) / float64(optDelta*uint64(formatFactor))
	}
	return rep
}

// sum is print_full_bw_report with the peer's report: both directions added up.
func (r BWReport) sum(o BWReport) BWReport {
	return BWReport{Size: r.Size, Iters: r.Iters, BWPeak: r.BWPeak + o.BWPeak, BWAvg: r.BWAvg + o.BWAvg, MsgRate: r.MsgRate + o.MsgRate}
}

// LatReport is one latency line (µs; one-way, the round trip halved, for SEND and
// WRITE; the round trip for READ).
type LatReport struct {
	Size, Iters                              int
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

// LatDurReport is a latency line of a -D run.
type LatDurReport struct {
	Size, Iters int
	Avg, TPS    float64 // µs per operation, operations per second
}

// latTail is LAT_MEASURE_TAIL: the largest samples left out of the statistics.
const latTail = 2

// latReport is print_report_lat: the deltas between consecutive posts, sorted, the
// two largest dropped. It keeps perftest's arithmetic: the median of integer cycle
// counts, and a standard deviation over deviations and squares truncated to C ints
// (so it is 0 for sub-µs jitter, and NaN, printed "-nan", once a square overflows).
// unsorted and sorted return the samples in µs for -U and -H.
func latReport(size, iters int, tposted []uint64, rttFactor int) (rep LatReport, unsorted, sorted []float64) {
	n := iters - 1
	delta := make([]uint64, n)
	for i := range delta {
		delta[i] = tposted[i+1] - tposted[i]
	}
	quot := 1e3 * float64(rttFactor) // ns per µs, times the round trips per sample
	unsorted = make([]float64, n)
	for i, d := range delta {
		unsorted[i] = float64(d) / quot
	}
	sort.Slice(delta, func(i, j int) bool { return delta[i] < delta[j] })
	m := n - latTail
	var median uint64
	if (m-1)%2 != 0 {
		median = (delta[m/2] + delta[m/2-1]) / 2
	} else {
		median = delta[m/2]
	}
	var sum float64
	for _, d := range delta[:m] {
		sum += float64(d) / quot
	}
	avg := sum / float64(m)
	var sq float64
	for _, d := range delta[:m] {
		v := cInt(avg - float64(d)/quot)
		sq += float64(cInt(math.Pow(float64(v), 2)))
	}
	sorted = make([]float64, m)
	for i, d := range delta[:m] {
		sorted[i] = float64(d) / quot
	}
	i99, i999 := int(math.Ceil(float64(m)*0.99)), int(math.Ceil(float64(m)*0.999))
	rep = LatReport{Size: size, Iters: iters, Min: float64(delta[0]) / quot, Max: float64(delta[m]) / quot,
		Typical: float64(median) / quot, Avg: avg, Stdev: math.Sqrt(sq / float64(m)),
		P99: float64(delta[i99]) / quot, P999: float64(delta[i999]) / quot}
	return rep, unsorted, sorted
}

// cInt is a C conversion of a double to int on x86: out of range gives INT_MIN.
func cInt(x float64) int32 {
	if math.IsNaN(x) || x >= 1<<31 || x < -(1<<31) {
		return math.MinInt32
	}
	return int32(x)
}

// latDurReport is print_report_lat_duration: the sample window's time per operation
// (halved for SEND and WRITE) and the operations per second.
func latDurReport(size int, iters uint64, windowNS uint64, rttFactor int) LatDurReport {
	us := float64(windowNS) / 1e3
	return LatDurReport{Size: size, Iters: int(iters), Avg: us / float64(rttFactor) / float64(iters),
		TPS: float64(iters) / (us / 1e6)}
}
