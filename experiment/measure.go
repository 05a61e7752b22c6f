package experiment

import (
	"fmt"
	"sort"

	"github.com/rocelab/rocelab/internal/clock"
)

// Every figure the summary gives over a span of time names its window, and the window
// is chosen so that it holds traffic: the first of a scenario's candidate windows
// that holds at least two samples of the bottleneck queue. The incast and fairness
// scenarios start after the first drain of the bottleneck queue (the initial burst of
// line-rate windows is over) and fall back to the first byte the bottleneck sent; the
// mix covers its arrivals and falls back to the first arrival. A window ends at the
// last completion or, when flows are unfinished, at the end of the run.

// Window is the span a windowed figure covers.
type Window struct {
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
	What    string `json:"what"` // "after the first drain to the last completion"
}

// String is the window as the summary prints it: "71.2–760.7 µs (after …)".
func (w Window) String() string {
	if w.EndNs <= w.StartNs {
		return "none: " + w.What
	}
	return fmt.Sprintf("%.1f–%.1f µs (%s)", float64(w.StartNs)/1e3, float64(w.EndNs)/1e3, w.What)
}

// Metrics are the summary figures (the --json keys).
type Metrics struct {
	FlowsTotal    int `json:"flows_total"`
	FlowsFinished int `json:"flows_finished"`
	// PeakQueue is over the whole run; the other queue and rate figures over Window.
	PeakQueue int     `json:"bottleneck_peak_queue_bytes"`
	Window    Window  `json:"window"`
	QueueP99  int     `json:"bottleneck_queue_p99_bytes"`
	MeanQueue float64 `json:"bottleneck_mean_queue_bytes"`
	// WireRate counts every byte the bottleneck port sent (headers and telemetry
	// included); Utilization is WireRate over the port's line rate.
	WireRate    float64 `json:"bottleneck_wire_rate_bps"`
	Utilization float64 `json:"bottleneck_utilization"`
	// Goodput is the payload delivered to the receivers, all flows together (in the
	// incast and fairness scenarios every flow crosses the bottleneck).
	Goodput float64 `json:"goodput_bps"`
	// Jain is Jain's index over the finished flows' throughputs (size / FCT).
	Jain float64 `json:"jain_fairness"`
	// LoopLateness is how late the event loops ran their timers during a real-time
	// run (nil in virtual time, where no loop is ever late).
	LoopLateness *LoopLateness `json:"loop_lateness,omitempty"`
	// LongestSampleGapUS is, in a lab run (experiment --lab), the longest interval
	// between two of the samples polled from the lab, in µs: a loop too busy to answer
	// stretches it past the --sample asked for, and the queue and rates with it.
	LongestSampleGapUS float64 `json:"longest_sample_gap_us,omitempty"`
}

// LoopLateness summarizes clock.Lateness over a real-time run's loops: the mean, and
// the median and 99th-percentile lateness (each the upper bound of its bucket), in µs,
// over Timers, and the loops' MaxLag (clock.RealOptions): up to that late a loop
// still runs its events at their own times.
type LoopLateness struct {
	Timers   uint64  `json:"timers"`
	MeanUS   float64 `json:"mean_us"`
	P50US    float64 `json:"p50_us"`
	P99US    float64 `json:"p99_us"`
	MaxLagUS float64 `json:"max_lag_us"`
}

// NewLoopLateness summarizes x (the last bucket's bound is its start).
func NewLoopLateness(x clock.Lateness) *LoopLateness {
	l := &LoopLateness{Timers: x.Timers(), P50US: x.QuantileUS(0.5), P99US: x.QuantileUS(0.99),
		MaxLagUS: float64(x.MaxLag) / 1e3}
	if l.Timers > 0 {
		l.MeanUS = float64(x.Sum) / 1e3 / float64(l.Timers)
	}
	return l
}

// DeliveredSample is the payload every flow's receiver had accepted by T.
type DeliveredSample struct {
	T     clock.Time
	Bytes uint64
}

// span is a candidate window.
type span struct {
	from, to clock.Time
	what     string
}

// chooseWindow returns the first candidate holding at least two queue samples.
func chooseWindow(queue []QueueSample, candidates []span) (span, bool) {
	for _, c := range candidates {
		if c.to <= c.from {
			continue
		}
		n := 0
		for _, s := range queue {
			if s.T >= c.from && s.T <= c.to {
				n++
			}
		}
		if n >= 2 {
			return c, true
		}
	}
	return span{}, false
}

// queueOver returns the samples of queue inside w.
func queueOver(queue []QueueSample, w span) []QueueSample {
	lo := sort.Search(len(queue), func(i int) bool { return queue[i].T >= w.from })
	hi := sort.Search(len(queue), func(i int) bool { return queue[i].T > w.to })
	return queue[lo:hi]
}

// wireRate is the bit/s a port sent between the first and the last of samples.
func wireRate(samples []QueueSample) float64 {
	if len(samples) < 2 {
		return 0
	}
	a, b := samples[0], samples[len(samples)-1]
	if b.T <= a.T {
		return 0
	}
	return float64(b.TxBytes-a.TxBytes) * 8e9 / float64(b.T-a.T)
}

// meanQueue is the time-averaged queue over the samples: from their queue areas where
// they carry them (a lab's, read every millisecond or so, where point samples only
// estimate it), else the mean of their queues (evenly spaced, and dense in virtual
// time: 100 ns).
func meanQueue(samples []QueueSample) float64 {
	if len(samples) == 0 {
		return 0
	}
	if a, b := samples[0], samples[len(samples)-1]; b.Area != 0 && b.T > a.T {
		return float64(b.Area-a.Area) / float64(b.T-a.T)
	}
	sum := 0.0
	for _, s := range samples {
		sum += float64(s.Bytes)
	}
	return sum / float64(len(samples))
}

// measure computes the metrics of res over the first non-empty candidate window, the
// bottleneck's line rate being rate bit/s.
func measure(res *Result, candidates []span, rate uint64) Metrics {
	m := Metrics{FlowsTotal: len(res.Flows)}
	for _, s := range res.Queue {
		m.PeakQueue = max(m.PeakQueue, s.Bytes)
	}
	var s, s2 float64
	for _, f := range res.Flows {
		if !f.Finished {
			continue
		}
		m.FlowsFinished++
		x := float64(f.Size) / float64(max(f.FCTNs, 1))
		s += x
		s2 += x * x
	}
	if s2 > 0 {
		m.Jain = s * s / (float64(m.FlowsFinished) * s2)
	}
	w, ok := chooseWindow(res.Queue, candidates)
	if !ok {
		m.Window = Window{What: "the bottleneck saw no traffic"}
		return m
	}
	m.Window = Window{StartNs: int64(w.from), EndNs: int64(w.to), What: w.what}
	in := queueOver(res.Queue, w)
	qs := make([]int, len(in))
	for i, q := range in {
		qs[i] = q.Bytes
	}
	sort.Ints(qs)
	m.QueueP99 = qs[(len(qs)*99)/100]
	m.MeanQueue = meanQueue(in)
	m.WireRate = wireRate(in)
	m.Utilization = m.WireRate / float64(rate)
	lo := sort.Search(len(res.Delivered), func(i int) bool { return res.Delivered[i].T >= w.from })
	hi := sort.Search(len(res.Delivered), func(i int) bool { return res.Delivered[i].T > w.to })
	if hi-lo >= 2 {
		a, b := res.Delivered[lo], res.Delivered[hi-1]
		if b.T > a.T {
			m.Goodput = float64(b.Bytes-a.Bytes) * 8e9 / float64(b.T-a.T)
		}
	}
	return m
}

// firstDrain is the first sample after the initial burst's top at which the queue
// holds at most level bytes, or at most the lower quartile of the queue between that
// top and settled, whichever is more: with more flows than the bandwidth-delay product has
// packets, every flow at HPCC's minimum window, the queue settles at a standing level
// of a few packets that it never leaves while the flows run, and its first drain is
// reaching that level. settled is when the flows stop being all active (the first
// completion). It returns -1 if the queue never drains.
func firstDrain(queue []QueueSample, level int, settled clock.Time) clock.Time {
	if len(queue) == 0 {
		return -1
	}
	// The initial burst is the first time the queue reaches half its highest peak
	// before the first completion, and its top the highest sample before the queue
	// falls below that half again. Not the highest peak itself: a queue that
	// oscillates while the flows run (DCQCN's between its marking thresholds, above
	// all when a lab samples it every millisecond) can peak highest anywhere, and the
	// drain after that peak started a lab's window in the flows' last few
	// milliseconds. Nor a peak after the first completion (a real-time lab's stall,
	// the last flows speeding up), which would start the window in the flows' tail.
	// Without a peak above level before settled, the highest of all.
	peak := highest(queue, settled)
	if queue[peak].Bytes <= level {
		peak = highest(queue, clock.Never)
	}
	if queue[peak].Bytes <= level {
		return -1
	}
	half := (queue[peak].Bytes + 1) / 2
	start := 0
	for queue[start].Bytes < half {
		start++
	}
	top := start
	for i := start; i < len(queue) && queue[i].Bytes >= half; i++ {
		if queue[i].Bytes > queue[top].Bytes {
			top = i
		}
	}
	var after []int
	for _, s := range queue[top:] {
		if s.T > settled {
			break
		}
		after = append(after, s.Bytes)
	}
	if len(after) > 0 { // no sample before settled when the queue peaked after it
		sort.Ints(after)
		level = max(level, after[len(after)/4])
	}
	for _, s := range queue[top:] {
		if s.Bytes <= level {
			return s.T
		}
	}
	return -1
}

// runEnd is where windows end: the last completion when every flow finished, else the
// last queue sample (the end of the run), with the words that say which.
func runEnd(res *Result, last clock.Time, unfinished int) (clock.Time, string) {
	if unfinished == 0 {
		return last, "the last completion"
	}
	end := clock.Time(0)
	if n := len(res.Queue); n > 0 {
		end = res.Queue[n-1].T
	}
	return end, fmt.Sprintf("the end of the run, %d flows unfinished", unfinished)
}

// highest is the index of the largest queue among the samples up to until (the first
// sample's if none is).
func highest(queue []QueueSample, until clock.Time) int {
	peak := 0
	for i, s := range queue {
		if s.T > until {
			break
		}
		if s.Bytes > queue[peak].Bytes {
			peak = i
		}
	}
	return peak
}
