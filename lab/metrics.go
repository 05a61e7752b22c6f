package lab

import (
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
)

// Metrics exports a lab's counters to Prometheus: each scrape reads a fresh Status
// from source (the lab's own Status in the lab process, the control socket in
// `rocelab metrics`), so the figures are those `rocelab status` would show at that
// moment. docs/observability.md lists every metric.
type Metrics struct {
	source func() (Status, error)
	failed prometheus.Counter
}

// NewMetrics returns a collector over source.
func NewMetrics(source func() (Status, error)) *Metrics {
	return &Metrics{source: source, failed: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rocelab_scrape_errors_total", Help: "Scrapes that could not read the lab's status."})}
}

// Handler serves the metrics at any path (mount it at /metrics).
func (m *Metrics) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

type portMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*fabric.PortStats) float64
}

type rnicMetric struct {
	desc  *prometheus.Desc
	value func(*rnic.Stats) uint64
}

var (
	portLabels = []string{"lab", "port", "peer"}
	hostLabels = []string{"lab", "host"}
	qpLabels   = []string{"lab", "host", "qpn"}

	portMetrics = []portMetric{
		portCounter("tx_frames_total", "Frames the switch port sent.", func(s *fabric.PortStats) uint64 { return s.TxFrames }),
		portCounter("tx_bytes_total", "Bytes the switch port sent.", func(s *fabric.PortStats) uint64 { return s.TxBytes }),
		portCounter("rx_frames_total", "Frames the switch port received.", func(s *fabric.PortStats) uint64 { return s.RxFrames }),
		portCounter("rx_bytes_total", "Bytes the switch port received.", func(s *fabric.PortStats) uint64 { return s.RxBytes }),
		portCounter("rx_errors_total", "Malformed frames the port dropped on arrival.", func(s *fabric.PortStats) uint64 { return s.RxErrors }),
		portCounter("drops_total", "Frames dropped at the port's egress queue (tail drops and PFC headroom overflows).", func(s *fabric.PortStats) uint64 { return s.Drops }),
		portCounter("ecn_marks_total", "Frames the port marked CE.", func(s *fabric.PortStats) uint64 { return s.ECNMarks }),
		portCounter("pfc_pause_sent_total", "PFC frames (XOFF and XON) the port sent upstream.", func(s *fabric.PortStats) uint64 { return s.PauseSent }),
		portCounter("pfc_pause_received_total", "PFC frames the port received from its peer.", func(s *fabric.PortStats) uint64 { return s.PauseRcvd }),
		portCounter("telemetry_stamped_total", "Frames that carried telemetry and got this hop's record.", func(s *fabric.PortStats) uint64 { return s.Stamped }),
		portCounter("stamp_errors_total", "Telemetry-carrying frames the stamper rejected as malformed (forwarded unstamped).", func(s *fabric.PortStats) uint64 { return s.StampErrors }),
		portCounter("panics_total", "Frames dropped because handling or stamping them panicked (a bug).", func(s *fabric.PortStats) uint64 { return s.Panics }),
		{prometheus.NewDesc("rocelab_port_queue_bytes", "Bytes queued at the port's egress now.", portLabels, nil),
			prometheus.GaugeValue, func(s *fabric.PortStats) float64 { return float64(s.QLen) }},
	}

	rnicMetrics = []rnicMetric{
		rnicCounter("tx_frames_total", "Frames the soft-RNIC sent.", func(s *rnic.Stats) uint64 { return s.TxFrames }),
		rnicCounter("tx_bytes_total", "Bytes the soft-RNIC sent.", func(s *rnic.Stats) uint64 { return s.TxBytes }),
		rnicCounter("rx_frames_total", "Frames the soft-RNIC received.", func(s *rnic.Stats) uint64 { return s.RxFrames }),
		rnicCounter("rx_bytes_total", "Bytes the soft-RNIC received.", func(s *rnic.Stats) uint64 { return s.RxBytes }),
		rnicCounter("rx_malformed_total", "Frames that failed to parse or carried bad telemetry (dropped).", func(s *rnic.Stats) uint64 { return s.RxMalformed }),
		rnicCounter("rx_bad_icrc_total", "RoCEv2 packets whose ICRC did not verify (dropped).", func(s *rnic.Stats) uint64 { return s.RxBadICRC }),
		rnicCounter("rx_unknown_qp_total", "RoCEv2 packets for a QP the device does not have (dropped).", func(s *rnic.Stats) uint64 { return s.RxUnknownQP }),
		rnicCounter("rx_unclaimed_total", "Frames the device does not terminate and has no host for (RxNotForUs).", func(s *rnic.Stats) uint64 { return s.RxNotForUs }),
		rnicCounter("tx_telemetry_errors_total", "Telemetry a frame could not carry (sent without it).", func(s *rnic.Stats) uint64 { return s.TxTelemetryErrors }),
		rnicCounter("probes_sent_total", "Telemetry probes sent (HPCC probe mode).", func(s *rnic.Stats) uint64 { return s.ProbesSent }),
		rnicCounter("probe_responses_total", "Telemetry responses and Rx-HPCC window updates sent.", func(s *rnic.Stats) uint64 { return s.ProbeResponses }),
		rnicCounter("cnps_sent_total", "DCQCN congestion notification packets sent.", func(s *rnic.Stats) uint64 { return s.CNPsSent }),
		rnicCounter("cnps_received_total", "DCQCN congestion notification packets received.", func(s *rnic.Stats) uint64 { return s.CNPsRcvd }),
		rnicCounter("loopback_frames_total", "Frames the soft-RNIC sent to its own QPs, looped back inside it (in tx_frames and rx_frames too).", func(s *rnic.Stats) uint64 { return s.LoopbackFrames }),
		rnicCounter("host_frames_total", "Frames the host's kernel sent through the device.", func(s *rnic.Stats) uint64 { return s.HostFrames }),
		rnicCounter("panics_total", "Received frames dropped because handling them panicked (a bug).", func(s *rnic.Stats) uint64 { return s.Panics }),
		rnicCounter("host_dropped_total", "Of the kernel's frames, those dropped (backlog full or too long).", func(s *rnic.Stats) uint64 { return s.HostDropped }),
		rnicCounter("cm_sent_total", "CM MADs sent on the GSI QP, retransmissions included.", func(s *rnic.Stats) uint64 { return s.CMSent }),
		rnicCounter("cm_received_total", "CM MADs received on the GSI QP.", func(s *rnic.Stats) uint64 { return s.CMRcvd }),
		rnicCounter("cm_retries_total", "REQ, REP and DREQ resent for want of an answer.", func(s *rnic.Stats) uint64 { return s.CMRetries }),
		rnicCounter("cm_malformed_total", "GSI packets that are not valid CM MADs (dropped).", func(s *rnic.Stats) uint64 { return s.CMMalformed }),
		rnicCounter("cm_unhandled_total", "CM MADs for no known connection or of a kind the agent ignores.", func(s *rnic.Stats) uint64 { return s.CMUnhandled }),
	}

	qpRate     = prometheus.NewDesc("rocelab_qp_rate_bps", "The QP's paced rate in bit/s as congestion control set it (+Inf: unpaced).", qpLabels, nil)
	qpWindow   = prometheus.NewDesc("rocelab_qp_window_bytes", "The bytes the QP may have in flight (+Inf: unlimited).", qpLabels, nil)
	qpInFlight = prometheus.NewDesc("rocelab_qp_inflight_bytes", "Request payload bytes sent and not yet acknowledged.", qpLabels, nil)
	qpU        = prometheus.NewDesc("rocelab_qp_hpcc_u", "HPCC++'s U: normalized inflight of the most loaded hop (1 = a BDP in flight); HPCC modes only.", qpLabels, nil)

	loopLateness = prometheus.NewDesc("rocelab_loop_timer_lateness_seconds",
		"How late the event loop ran its timers after their time (a loop the cores cannot keep up with runs them milliseconds late).",
		[]string{"lab", "loop"}, nil)

	captureFrames  = prometheus.NewDesc("rocelab_capture_frames_total", "Frames the port's running or last capture wrote.", []string{"lab", "port"}, nil)
	captureDropped = prometheus.NewDesc("rocelab_capture_dropped_total", "Frames the port's running or last capture left out (its reader fell behind).", []string{"lab", "port"}, nil)
)

func portCounter(name, help string, v func(*fabric.PortStats) uint64) portMetric {
	return portMetric{prometheus.NewDesc("rocelab_port_"+name, help, portLabels, nil), prometheus.CounterValue,
		func(s *fabric.PortStats) float64 { return float64(v(s)) }}
}

func rnicCounter(name, help string, v func(*rnic.Stats) uint64) rnicMetric {
	return rnicMetric{prometheus.NewDesc("rocelab_rnic_"+name, help, hostLabels, nil), v}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, p := range portMetrics {
		ch <- p.desc
	}
	for _, r := range rnicMetrics {
		ch <- r.desc
	}
	for _, d := range []*prometheus.Desc{qpRate, qpWindow, qpInFlight, qpU, captureFrames, captureDropped, loopLateness} {
		ch <- d
	}
	m.failed.Describe(ch)
}

// Collect implements prometheus.Collector.
// The scrape-error counter is sent from here, after a failed read has counted: a
// registry gathers its collectors concurrently, and registered on its own the counter
// was sometimes read before the failure that should have raised it.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	st, err := m.source()
	if err != nil {
		m.failed.Inc()
		ch <- m.failed
		return
	}
	ch <- m.failed
	capture := func(port string, c *CaptureStatus) {
		if c != nil {
			ch <- prometheus.MustNewConstMetric(captureFrames, prometheus.CounterValue, float64(c.Frames), st.Name, port)
			ch <- prometheus.MustNewConstMetric(captureDropped, prometheus.CounterValue, float64(c.Dropped), st.Name, port)
		}
	}
	for _, s := range st.Switches {
		for _, p := range s.Ports {
			for _, pm := range portMetrics {
				ch <- prometheus.MustNewConstMetric(pm.desc, pm.kind, pm.value(&p.Stats), st.Name, p.Port, p.Peer)
			}
			capture(p.Port, p.Capture)
		}
	}
	for _, h := range st.Hosts {
		capture(h.Name+":p0", h.Capture)
		if h.RNIC == nil {
			continue
		}
		for _, rm := range rnicMetrics {
			ch <- prometheus.MustNewConstMetric(rm.desc, prometheus.CounterValue, float64(rm.value(h.RNIC)), st.Name, h.Name)
		}
		for _, q := range h.QPs {
			qpn := strconv.FormatUint(uint64(q.QPN), 10)
			ch <- prometheus.MustNewConstMetric(qpRate, prometheus.GaugeValue, orInf(q.RateBps), st.Name, h.Name, qpn)
			ch <- prometheus.MustNewConstMetric(qpWindow, prometheus.GaugeValue, orInf(q.WindowBytes), st.Name, h.Name, qpn)
			ch <- prometheus.MustNewConstMetric(qpInFlight, prometheus.GaugeValue, float64(q.InFlightBytes), st.Name, h.Name, qpn)
			if q.HPCCU != nil {
				ch <- prometheus.MustNewConstMetric(qpU, prometheus.GaugeValue, *q.HPCCU, st.Name, h.Name, qpn)
			}
		}
	}
	for _, l := range st.Loops {
		// The buckets' bounds are clock.LateBound's.
		buckets := map[float64]uint64{}
		var cum uint64
		for i, n := range l.LateBuckets[:len(l.LateBuckets)-1] {
			cum += n
			buckets[clock.LateBound(i).Seconds()] = cum
		}
		ch <- prometheus.MustNewConstHistogram(loopLateness, l.Timers, l.LateSumUS/1e6, buckets, st.Name, l.Loop)
	}
}

// orInf is *v, or +Inf for nil (unpaced, unlimited).
func orInf(v *float64) float64 {
	if v == nil {
		return math.Inf(1)
	}
	return *v
}
