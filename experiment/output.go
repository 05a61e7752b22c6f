package experiment

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// WriteFiles writes the time series and completion records as CSV and the plots as PNG
// and SVG into dir:
//
//	queue.csv        t_ns, bottleneck queue bytes, bytes it has sent (tx_bytes)
//	rates.csv        t_ns, flow, paced_rate_bps, window_bytes, measured_rate_bps (the
//	                 flow's payload delivered to its receiver since its previous sample),
//	                 inflight_bytes, hpcc_u (HPCC++'s U; empty outside the HPCC modes
//	                 and while the flow is not running)
//	links.csv        t_ns, port, sampled_ns, queue_bytes, tx_bytes: every switch egress
//	                 port (s1:p0, numbered as topology.yaml's links give them) at each
//	                 rate sample t_ns: the switch's latest sample, taken at sampled_ns
//	                 (t_ns or up to one sample interval before)
//	topology.yaml    the network the run built, as a lab topology (hosts h1…)
//	flows.csv        id, src, dst, size_bytes, start_ns, finished, fct_ns,
//	                 ideal_fct_ns, slowdown (fct_ns and slowdown empty when unfinished)
//	fct_buckets.csv  (mix) from_pct, to_pct, min_size_bytes, max_size_bytes, flows,
//	                 slowdown p50, p95, p99 per 5% of the flows by size
//	ports.csv        (mix) port, name, rate_bps, peak_queue_bytes (whole run),
//	                 mean_queue_bytes, tx_bytes, utilization (in the summary's window)
//	                 of every switch egress port
//	port_queues.csv  (mix) t_ns, port, queue_bytes: every port's queue at the samples
//	                 where it changed
//	summary.json     scenario, cc, setup and the metrics (`experiment compare` reads it)
//	queue.png/svg    bottleneck queue vs time
//	rates.png/svg    per-flow rate vs time
//	fct.png/svg      FCT slowdown by flow size at p50, p95, p99
//
// Hosts are numbered from 0 in src and dst (host h1 is 0).
func (r *Result) WriteFiles(dir string) error {
	if err := r.WriteData(dir); err != nil {
		return err
	}
	return r.WritePlots(dir)
}

// errFiguresOnly is what writing a FiguresOnly run's files returns.
var errFiguresOnly = errors.New("experiment: the run kept its figures only (Config.FiguresOnly): it has no data files or plots to write")

// WriteData writes WriteFiles' files but the plots: the CSVs, summary.json and
// topology.yaml.
func (r *Result) WriteData(dir string) error {
	if r.Config.FiguresOnly {
		return errFiguresOnly
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fl := [][]string{flowColumns}
	for _, f := range r.Flows {
		fct, sd := "", ""
		if f.Finished {
			fct, sd = itoa(f.FCTNs), ftoa(f.Slowdown)
		}
		fl = append(fl, []string{itoa(int64(f.ID)), itoa(int64(f.Src)), itoa(int64(f.Dst)), itoa(int64(f.Size)), itoa(f.StartNs),
			strconv.FormatBool(f.Finished), fct, itoa(f.IdealNs), sd})
	}
	files := map[string][][]string{FlowsFile: fl}
	if r.MixInfo != nil {
		b := [][]string{{"from_pct", "to_pct", "min_size_bytes", "max_size_bytes", "flows", "slowdown_p50", "slowdown_p95", "slowdown_p99"}}
		for _, k := range sizeBuckets(r.Flows, percentSteps(5)) {
			b = append(b, []string{ftoa(k.From), ftoa(k.To), itoa(int64(k.MinSize)), itoa(int64(k.Size)), itoa(int64(k.N)),
				ftoa(k.P50), ftoa(k.P95), ftoa(k.P99)})
		}
		files["fct_buckets.csv"] = b
		ps := [][]string{{"port", "name", "rate_bps", "peak_queue_bytes", "mean_queue_bytes", "tx_bytes", "utilization"}}
		for i, p := range r.MixInfo.PortStats {
			ps = append(ps, []string{itoa(int64(i)), p.Name, strconv.FormatUint(p.Rate, 10), itoa(int64(p.PeakQueue)),
				ftoa(p.MeanQueue), strconv.FormatUint(p.TxBytes, 10), ftoa(p.Utilization)})
		}
		files["ports.csv"] = ps
	}
	for name, rows := range files {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return err
		}
	}
	if err := r.writeQueue(filepath.Join(dir, "queue.csv")); err != nil {
		return err
	}
	if err := r.writeRates(filepath.Join(dir, RatesFile)); err != nil {
		return err
	}
	if err := r.writeLinks(filepath.Join(dir, LinksFile)); err != nil {
		return err
	}
	if r.MixInfo != nil {
		if err := r.writePortQueues(filepath.Join(dir, "port_queues.csv")); err != nil {
			return err
		}
	}
	sum, err := json.MarshalIndent(r.summaryJSON(), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(sum, '\n'), 0o644); err != nil {
		return err
	}
	if r.Topology != nil {
		if err := os.WriteFile(filepath.Join(dir, TopologyFile), r.Topology.YAML(), 0o644); err != nil {
			return err
		}
	}
	return r.seriesErr() // a series cut short by its scratch file
}

// WritePlots draws WriteFiles' plots into dir: each costs more than the simulation
// of a short run (the three of a 500 KB incast 0.1 CPU-s, its simulation 0.03).
func (r *Result) WritePlots(dir string) error {
	if r.Config.FiguresOnly {
		return errFiguresOnly
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := r.plot(dir); err != nil {
		return err
	}
	return r.seriesErr()
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

// The files that can have tens of millions of rows — rates.csv, links.csv and
// port_queues.csv on the 1,024-host fat tree, queue.csv on a long incast (750,000
// rows in 75 ms at 100 ns) — are written row by row as their samples are read,
// never held as rows.

// writeQueue writes queue.csv.
func (r *Result) writeQueue(path string) error {
	return writeRows(path, []string{"t_ns", "queue_bytes", "tx_bytes"}, func(row *csvRow) error {
		for s := range r.QueueSamples() {
			row.int(int64(s.T)).int(int64(s.Bytes)).uint(s.TxBytes).end()
		}
		return nil
	})
}

// writeRates writes rates.csv.
func (r *Result) writeRates(path string) error {
	return writeRows(path, rateColumns,
		func(row *csvRow) error {
			return r.EachRate(func(s RateSample) {
				row.int(int64(s.T)).int(int64(s.Flow)).float(s.Rate).float(s.Window).float(s.Measured).uint(s.InFlight)
				if s.HasU {
					row.float(s.U)
				} else {
					row.str("")
				}
				row.end()
			})
		})
}

// writeLinks writes links.csv: a row per port per rate sample (17 M rows for the
// 1,024-host fat tree over 10 ms).
func (r *Result) writeLinks(path string) error {
	return writeRows(path, linkColumns, func(row *csvRow) error {
		r.Links(func(s LinkSample) {
			row.int(int64(s.T)).str(s.Port).int(int64(s.Sampled)).int(int64(s.Bytes)).uint(s.TxBytes).end()
		})
		return nil
	})
}

// writePortQueues writes the mix's port_queues.csv.
func (r *Result) writePortQueues(path string) error {
	return writeRows(path, []string{"t_ns", "port", "queue_bytes"}, func(row *csvRow) error {
		r.MixInfo.EachPortQueue(func(s PortQueueSample) {
			row.int(int64(s.T)).int(int64(s.Port)).int(int64(s.Bytes)).end()
		})
		return nil
	})
}

// writeRows writes a CSV file of the header and the rows rows writes, each as it
// comes.
func writeRows(path string, header []string, rows func(*csvRow) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	row := &csvRow{w: bufio.NewWriterSize(f, 64<<10)}
	for _, h := range header {
		row.str(h)
	}
	row.end()
	err = rows(row)
	if ferr := row.w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// csvRow writes a CSV row field by field, formatted into one buffer, the bytes
// encoding/csv writes for the same fields as strings (numbers as itoa and ftoa
// format them; a string quoted where csv would quote it): no string per field,
// which were most of the files' cost (1.15 M rows of 7 fields in a 75 ms incast's
// rates.csv). A write error is the bufio.Writer's, returned by its Flush.
type csvRow struct {
	w      *bufio.Writer
	buf    []byte
	fields int // in the row so far
}

func (r *csvRow) sep() {
	if r.fields++; r.fields > 1 {
		r.buf = append(r.buf, ',')
	}
}

func (r *csvRow) int(v int64) *csvRow {
	r.sep()
	r.buf = strconv.AppendInt(r.buf, v, 10)
	return r
}

func (r *csvRow) uint(v uint64) *csvRow {
	r.sep()
	r.buf = strconv.AppendUint(r.buf, v, 10)
	return r
}

func (r *csvRow) float(v float64) *csvRow {
	r.sep()
	r.buf = strconv.AppendFloat(r.buf, v, 'g', 8, 64)
	return r
}

// str appends s, quoted as encoding/csv quotes a field: one holding a comma, a quote
// or a line break, starting with a space, or `\.`.
func (r *csvRow) str(s string) *csvRow {
	if r.sep(); s == "" || !fieldNeedsQuotes(s) {
		r.buf = append(r.buf, s...)
		return r
	}
	r.buf = append(r.buf, '"')
	r.buf = append(r.buf, strings.ReplaceAll(s, `"`, `""`)...)
	r.buf = append(r.buf, '"')
	return r
}

// end writes the row and starts the next.
func (r *csvRow) end() {
	r.buf = append(r.buf, '\n')
	r.w.Write(r.buf)
	r.buf, r.fields = r.buf[:0], 0
}

// fieldNeedsQuotes is encoding/csv's rule for a non-empty field with ',' separators.
func fieldNeedsQuotes(s string) bool {
	if s == `\.` || strings.ContainsAny(s, ",\"\r\n") {
		return true
	}
	c, _ := utf8.DecodeRuneInString(s)
	return unicode.IsSpace(c)
}

// Links calls fn with every switch egress port's queue and bytes sent at each rate
// sample (links.csv's rows), in time order and, within a rate sample, in the lab's
// port order (by switch, then port).
func (r *Result) Links(fn func(LinkSample)) { r.links.each(fn) }

// WriteSummary prints the one-screen summary.
func (r *Result) WriteSummary(w io.Writer) {
	if r.MixInfo != nil {
		r.writeMixSummary(w)
		return
	}
	c := &r.Config
	fmt.Fprintf(w, "%s: %d senders × %d bytes, %d Gb/s links, %v delay, MTU %d", c.Scenario, c.Senders,
		c.FlowSize, c.LinkRate/1e9, c.LinkDelay, c.MTU)
	if c.Payload > 0 {
		fmt.Fprintf(w, " (payload %d)", c.Payload)
	}
	fmt.Fprintf(w, ", cc %s, base RTT %v, seed %d\n", c.ccName(), r.BaseRTT, c.Seed)
	r.writeMetrics(w, topoRate(c.LinkRate))
	r.writeSlowdown(w)
	if r.Events > 0 { // a lab's run simulates nothing: its nodes run in its own process
		fmt.Fprintf(w, "  simulated events  %d\n", r.Events)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  ERROR %s\n", e)
	}
}

// ccName names the congestion control as a reader knows it: "HPCC++ per-ack
// (int-md)", "DCQCN", "none"; with the preset in brackets.
func (c *Config) ccName() string {
	var s string
	switch c.CC {
	case "dcqcn":
		s = "DCQCN"
	case "none":
		s = "none"
	default:
		s = fmt.Sprintf("HPCC++ %s (%s telemetry)", c.CC, c.Telemetry)
	}
	if c.Preset != "" {
		s += ", preset " + c.Preset
	}
	return s
}

// writeMetrics prints the flows finished and the windowed bottleneck figures.
func (r *Result) writeMetrics(w io.Writer, rate string) {
	m := &r.Metrics
	fmt.Fprintf(w, "  flows             %d of %d finished\n", m.FlowsFinished, m.FlowsTotal)
	fmt.Fprintf(w, "  window            %s\n", m.Window)
	fmt.Fprintf(w, "  bottleneck queue  peak %d B over the whole run; in the window mean %.0f B, p99 %d B\n",
		m.PeakQueue, m.MeanQueue, m.QueueP99)
	fmt.Fprintf(w, "  bottleneck rate   wire %.1f Gb/s (%.1f%% of %s, headers and telemetry included) in the window\n",
		m.WireRate/1e9, 100*m.Utilization, rate)
	if l := m.LoopLateness; l != nil {
		fmt.Fprintf(w, "  loop lateness     mean %.1f µs, p50 < %g µs, p99 < %g µs over %d timers\n", l.MeanUS, l.P50US, l.P99US,
			l.Timers)
		// The p99 bucket's lower bound: 1% of the timers ran at least that late. Up
		// to MaxLag late a loop runs its events at their own times, and the figures
		// are those of a loop that kept up; a loop at real time (several loops, MaxLag
		// 1 ns) shapes them once it is a base RTT late.
		const shapes = ": this machine's CPU, not only the topology, shapes these figures (docs/rnic.md)\n"
		late, lag := time.Duration(l.P99US/2)*time.Microsecond, time.Duration(l.MaxLagUS*1e3)
		switch rtt := r.BaseRTT; {
		case lag > rtt && late >= lag:
			fmt.Fprintf(w, "  WARNING           1%% of the loops' timers ran more than %v late, beyond the %v a loop may fall "+
				"behind and still run its events at their own times"+shapes, late, lag)
		case lag <= rtt && rtt > 0 && late > rtt:
			fmt.Fprintf(w, "  WARNING           1%% of the loops' timers ran more than %v late, longer than the base RTT (%v)"+shapes,
				late, rtt)
		}
	}
	if g := time.Duration(m.LongestSampleGapUS * 1e3); g > 4*r.Config.Sample {
		fmt.Fprintf(w, "  WARNING           the lab answered its samples up to %v apart, asked for every %v: its loop was "+
			"behind, and the queue and rates here are that coarse (docs/rnic.md)\n", g.Round(time.Microsecond), r.Config.Sample)
	}
	if r.MixInfo != nil {
		fmt.Fprintf(w, "  goodput           %.1f Gb/s of payload delivered, all flows of the network, in the window\n", m.Goodput/1e9)
	} else {
		fmt.Fprintf(w, "  goodput           %.1f Gb/s of payload delivered, all flows (all cross the bottleneck), in the window\n", m.Goodput/1e9)
	}
	if m.FlowsFinished > 0 {
		fmt.Fprintf(w, "  fairness (Jain)   %.4f over the finished flows' throughputs (size / FCT)\n", m.Jain)
	}
}

// writeSlowdown prints the slowdown quantiles over the finished flows.
func (r *Result) writeSlowdown(w io.Writer) {
	var sd []float64
	var end int64
	for _, f := range r.Flows {
		if f.Finished {
			sd = append(sd, f.Slowdown)
			end = max(end, f.StartNs+f.FCTNs)
		}
	}
	if len(sd) == 0 {
		fmt.Fprintf(w, "  FCT slowdown      none: no flow finished\n")
		return
	}
	sort.Float64s(sd)
	fmt.Fprintf(w, "  FCT slowdown      p50 %.2f, p95 %.2f, p99 %.2f over the %d finished flows; the last done at %.1f µs\n",
		quantile(sd, 0.5), quantile(sd, 0.95), quantile(sd, 0.99), len(sd), float64(end)/1e3)
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

// writeMixSummary prints the mix scenario's summary: the workload, the bottleneck and
// its queue, and the FCT slowdown by flow size.
func (r *Result) writeMixSummary(w io.Writer) {
	c, x := &r.Config, r.MixInfo
	fmt.Fprintf(w, "mix: %s (%d hosts), %s: %d flows, %s in %v\n",
		x.Topology, x.Hosts, x.Workload, len(r.Flows), bytesString(float64(x.Offered)), x.Window)
	fabricRate := c.FabricRate
	if fabricRate == 0 {
		fabricRate = c.LinkRate
	}
	if c.TopologyFile != "" {
		fmt.Fprintf(w, "  network           rates and delays of %s (hosts up to %s), MTU %d", c.TopologyFile, topoRate(c.LinkRate), c.MTU)
	} else {
		fmt.Fprintf(w, "  network           hosts %s, fabric %s, %v per link, MTU %d", topoRate(c.LinkRate), topoRate(fabricRate),
			c.LinkDelay, c.MTU)
	}
	if c.Payload > 0 {
		fmt.Fprintf(w, " (payload %d)", c.Payload)
	}
	fmt.Fprintf(w, ", cc %s, seed %d\n", c.ccName(), c.Seed)
	if x.Partitions > 0 {
		fmt.Fprintf(w, "  driver            parallel: %d partitions, %d windows (the same output on any number of threads)\n", x.Partitions, x.Windows)
	} else {
		fmt.Fprintf(w, "  driver            sequential\n")
	}
	fmt.Fprintf(w, "  base RTT          %v to %v by path; HPCC T %v\n", x.RTTMin, x.RTTMax, r.BaseRTT)
	fmt.Fprintf(w, "  bottleneck        %s at %s: of %d switch egress ports, the largest peak queue\n",
		x.Bottleneck, topoRate(x.BottleneckRate), x.Ports)
	r.writeMetrics(w, topoRate(x.BottleneckRate))
	r.writeSlowdown(w)
	if r.Metrics.FlowsFinished > 0 {
		fmt.Fprintf(w, "    %-14s  %-21s  %5s  %6s  %6s  %6s\n", "size class", "sizes", "flows", "p50", "p95", "p99")
		for _, b := range mixClasses(r.Flows) {
			fmt.Fprintf(w, "    %-14s  %-21s  %5d  %6.2f  %6.2f  %6.2f\n", fmt.Sprintf("%g–%g%%", b.From, b.To),
				bytesString(float64(b.MinSize))+" – "+bytesString(float64(b.Size)), b.N, b.P50, b.P95, b.P99)
		}
	}
	if r.Events > 0 { // a lab's run simulates nothing: its nodes run in its own process
		fmt.Fprintf(w, "  simulated events  %d\n", r.Events)
	}
	for i, e := range r.Errors {
		if i == 5 {
			fmt.Fprintf(w, "  ... and %d more errors\n", len(r.Errors)-i)
			break
		}
		fmt.Fprintf(w, "  ERROR %s\n", e)
	}
}

// mixClasses are the summary's rows: the flows cut by size at their 50th, 80th and
// 95th percentiles.
func mixClasses(flows []FlowRecord) []sizeBucket {
	return sizeBuckets(flows, []float64{0, 50, 80, 95, 100})
}

// bytesString formats a size in decimal units: 950 B, 12.3 KB, 1.71 MB.
func bytesString(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.3g GB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.3g MB", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3g KB", n/1e3)
	}
	return fmt.Sprintf("%.0f B", n)
}

// topoRate formats bit/s as "100 Gb/s".
func topoRate(r uint64) string {
	if r%1e9 == 0 {
		return fmt.Sprintf("%d Gb/s", r/1e9)
	}
	return fmt.Sprintf("%.3g Gb/s", float64(r)/1e9)
}
