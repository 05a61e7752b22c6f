package experiment

import (
	"fmt"
	"iter"
	"maps"
	"slices"

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

// MaxMeanLateUS bounds how late, on average, a real-time run's loops may have run their
// timers for its figures to measure rocelab ([Metrics.KeptUp]). Quiet runs of the labs
// report 1–12 µs (1 Gb/s) and up to 49.5 µs (10 Gb/s 2:1 Rx-HPCC, a loop near its CPU's
// end: docs/rnic.md); runs on a machine at load 4–6 reported 200–1,100 µs and missed
// their targets. 100 µs, twice the worst quiet figure and half the best loaded one, is
// ten link delays (10 µs) and four to eight 1 Gb/s frame times: later than that, frames
// cross loops due in their peers' past and the figures measure the machine.
const MaxMeanLateUS = 100

// MaxSampleGapUS bounds the longest time a lab run went without answering its polls
// (Metrics.LongestSampleGapUS; the lab is polled every millisecond). A stall that long
// is 5 % of a run's window but moves the mean lateness little: a 1 Gb/s DCQCN 2:1
// cell that stalled 7.5 ms at 68 µs mean lateness reached 0.875 of the link. Judged
// runs went at most 2.2 ms unanswered.
const MaxSampleGapUS = 5000

// KeptUp reports whether a real-time run's machine kept up with it, so that its figures
// measure rocelab and not the machine's other work: its loops ran their timers within
// MaxMeanLateUS on average and, in a lab run, the lab answered its polls within
// MaxSampleGapUS. why says what was measured against which bound, either way. A run
// that reports no lateness (a virtual-time run) did not keep up with anything.
func (m Metrics) KeptUp() (ok bool, why string) {
	l := m.LoopLateness
	if l == nil {
		return false, "the run reports no loop lateness: whether the machine kept up is unknown"
	}
	// The 99th percentile is known only where the loops' histograms were read (0
	// where only sums were: a lab's lateness over an interval).
	detail := fmt.Sprintf("%d timers", l.Timers)
	if l.P99US > 0 {
		detail = fmt.Sprintf("p99 %.0f µs, %s", l.P99US, detail)
	}
	switch {
	case l.MeanUS > MaxMeanLateUS:
		return false, fmt.Sprintf("the machine did not keep up: timers ran %.0f µs late on average (%s), past the %d µs a real-time figure tolerates",
			l.MeanUS, detail, MaxMeanLateUS)
	case m.LongestSampleGapUS > MaxSampleGapUS:
		return false, fmt.Sprintf("the machine did not keep up: the lab went %.0f µs without answering its 1 ms polls (timers %.0f µs late on average), past the %d µs a real-time figure tolerates",
			m.LongestSampleGapUS, l.MeanUS, MaxSampleGapUS)
	}
	return true, fmt.Sprintf("the machine kept up: timers ran %.1f µs late on average (%s)", l.MeanUS, detail)
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

// queueSamples is a bottleneck's queue series in time order, walked as often as a
// figure needs: a lab's or a real-time run's slice, or a virtual-time run's change
// points decoded as they are walked (portSeries.samples), never held as a dense
// series — at 100 ns samples that was 32 bytes per 100 ns of the run.
type queueSamples = iter.Seq[QueueSample]

// chooseWindow returns the first candidate holding at least two queue samples.
func chooseWindow(queue queueSamples, candidates []span) (span, bool) {
	for _, c := range candidates {
		if c.to <= c.from {
			continue
		}
		n := 0
		for range queueOver(queue, c) {
			if n++; n >= 2 {
				return c, true
			}
		}
	}
	return span{}, false
}

// queueOver walks the samples of queue inside w.
func queueOver(queue queueSamples, w span) queueSamples {
	return func(yield func(QueueSample) bool) {
		for s := range queue {
			if s.T > w.to {
				return
			}
			if s.T >= w.from && !yield(s) {
				return
			}
		}
	}
}

// queueStats is what the figures take from a stretch of queue samples, in one walk of
// it: a virtual-time series is decoded from its change points as it is walked, and a
// walk per figure was most of a short run's metrics.
type queueStats struct {
	first, last QueueSample
	n           int
	sum         float64    // of the samples' queues
	counts      byteCounts // of their queues, if asked for
}

// statsOf walks samples once; withCounts also counts their queue lengths.
func statsOf(samples queueSamples, withCounts bool) queueStats {
	var st queueStats
	for s := range samples {
		if st.n == 0 {
			st.first = s
		}
		st.last = s
		st.n++
		st.sum += float64(s.Bytes)
		if withCounts {
			st.counts.add(s.Bytes)
		}
	}
	return st
}

// ends returns the first and the last of samples and how many there are.
func ends(samples queueSamples) (first, last QueueSample, n int) {
	st := statsOf(samples, false)
	return st.first, st.last, st.n
}

// wireRate is the bit/s a port sent between the first and the last of samples.
func wireRate(samples queueSamples) float64 { return statsOf(samples, false).wireRate() }

// wireRate is the bit/s the port sent between the first and the last sample.
func (st queueStats) wireRate() float64 {
	a, b := st.first, st.last
	if st.n < 2 || b.T <= a.T {
		return 0
	}
	return float64(b.TxBytes-a.TxBytes) * 8e9 / float64(b.T-a.T)
}

// meanQueue is the time-averaged queue over the samples: from their queue areas where
// they carry them (a lab's, read every millisecond or so, where point samples only
// estimate it), else the mean of their queues (evenly spaced, and dense in virtual
// time: 100 ns).
func meanQueue(samples queueSamples) float64 { return statsOf(samples, false).meanQueue() }

// meanQueue is meanQueue of the samples walked.
func (st queueStats) meanQueue() float64 {
	a, b := st.first, st.last
	if st.n == 0 {
		return 0
	}
	if b.Area != 0 && b.T > a.T {
		return float64(b.Area-a.Area) / float64(b.T-a.T)
	}
	return st.sum / float64(st.n)
}

// byteCounts counts how many of a series' samples hold each queue length: a queue
// takes few distinct lengths (multiples of its frames' sizes, up to its buffer), so
// an order statistic of a long series needs no copy of it.
type byteCounts struct {
	count map[int]int
	n     int
}

func (c *byteCounts) add(bytes int) {
	if c.count == nil {
		c.count = map[int]int{}
	}
	c.count[bytes]++
	c.n++
}

// nth is the k-th smallest length counted (from 0, k < n): sorted, the series'
// element k.
func (c *byteCounts) nth(k int) int {
	keys := slices.Sorted(maps.Keys(c.count))
	for _, v := range keys {
		if k -= c.count[v]; k < 0 {
			return v
		}
	}
	return keys[len(keys)-1]
}

// measure computes the metrics of res over the first non-empty candidate window, the
// bottleneck's line rate being rate bit/s.
func measure(res *Result, candidates []span, rate uint64) Metrics {
	m := Metrics{FlowsTotal: len(res.Flows)}
	queue := res.QueueSamples()
	for s := range queue {
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
	w, ok := chooseWindow(queue, candidates)
	if !ok {
		m.Window = Window{What: "the bottleneck saw no traffic"}
		return m
	}
	m.Window = Window{StartNs: int64(w.from), EndNs: int64(w.to), What: w.what}
	st := statsOf(queueOver(queue, w), true)
	m.QueueP99 = st.counts.nth((st.counts.n * 99) / 100)
	m.MeanQueue = st.meanQueue()
	m.WireRate = st.wireRate()
	m.Utilization = m.WireRate / float64(rate)
	var a, b DeliveredSample
	n := 0
	for d := range res.DeliveredSamples() {
		if d.T > w.to {
			break
		}
		if d.T >= w.from {
			if n == 0 {
				a = d
			}
			b = d
			n++
		}
	}
	if n >= 2 && b.T > a.T {
		m.Goodput = float64(b.Bytes-a.Bytes) * 8e9 / float64(b.T-a.T)
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
func firstDrain(queue queueSamples, level int, settled clock.Time) clock.Time {
	// The initial burst is the first time the queue reaches half its highest peak
	// before the first completion, and its top the highest sample before the queue
	// falls below that half again. Not the highest peak itself: a queue that
	// oscillates while the flows run (DCQCN's between its marking thresholds, above
	// all when a lab samples it every millisecond) can peak highest anywhere, and the
	// drain after that peak started a lab's window in the flows' last few
	// milliseconds. Nor a peak after the first completion (a real-time lab's stall,
	// the last flows speeding up), which would start the window in the flows' tail.
	// Without a peak above level before settled, the highest of all.
	peak, ok := highest(queue, settled)
	if !ok {
		return -1
	}
	if peak <= level {
		peak, _ = highest(queue, clock.Never)
	}
	if peak <= level {
		return -1
	}
	half := (peak + 1) / 2
	top, topBytes, i := -1, 0, 0
	for s := range queue {
		if top >= 0 && s.Bytes < half {
			break
		}
		if s.Bytes >= half && (top < 0 || s.Bytes > topBytes) {
			top, topBytes = i, s.Bytes
		}
		i++
	}
	var after byteCounts
	for s := range skip(queue, top) {
		if s.T > settled {
			break
		}
		after.add(s.Bytes)
	}
	if after.n > 0 { // no sample before settled when the queue peaked after it
		level = max(level, after.nth(after.n/4))
	}
	for s := range skip(queue, top) {
		if s.Bytes <= level {
			return s.T
		}
	}
	return -1
}

// skip walks queue from its k-th sample (from 0) on.
func skip(queue queueSamples, k int) queueSamples {
	return func(yield func(QueueSample) bool) {
		i := 0
		for s := range queue {
			if i++; i > k && !yield(s) {
				return
			}
		}
	}
}

// runEnd is where windows end: the last completion when every flow finished, else the
// last queue sample (the end of the run), with the words that say which.
func runEnd(res *Result, last clock.Time, unfinished int) (clock.Time, string) {
	if unfinished == 0 {
		return last, "the last completion"
	}
	end := clock.Time(0)
	if _, last, n := ends(res.QueueSamples()); n > 0 {
		end = last.T
	}
	return end, fmt.Sprintf("the end of the run, %d flows unfinished", unfinished)
}

// highest is the largest queue among the samples up to until (the first sample's
// if none is), and false if there are no samples.
func highest(queue queueSamples, until clock.Time) (int, bool) {
	peak, ok := 0, false
	for s := range queue {
		if ok && s.T > until {
			break
		}
		if !ok || s.Bytes > peak {
			peak, ok = s.Bytes, true
		}
	}
	return peak, ok
}
