package lab

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/rnic"
)

// scrape serves m over HTTP as Prometheus would scrape it and returns the text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parse reads the exposition with the Prometheus client library's own parser.
func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no %s sample with labels %v", name, want)
	return 0
}

// TestMetrics: a lab's status as Prometheus metrics, scraped over HTTP and parsed by
// the client library's parser: port counters and queue, RNIC counters, per-QP rate,
// window and U (an unpaced QP's rate is +Inf), capture figures; a status that cannot
// be read counts a scrape error instead of failing. promtool, when installed (make
// deps-system as root), checks the exposition too.
func TestMetrics(t *testing.T) {
	rate, window, u := 25e9, 37500.0, 0.93
	st := Status{Name: "lab1",
		Hosts: []HostStatus{{Name: "h1", RNIC: &rnic.Stats{TxFrames: 10, RxMalformed: 1},
			Capture: &CaptureStatus{Frames: 7, Dropped: 2},
			QPs: []QPStatus{{QPN: 17, State: "RTS", RateBps: &rate, WindowBytes: &window, InFlightBytes: 4096, HPCCU: &u},
				{QPN: 18, State: "RTS"}}}},
		Switches: []SwitchStatus{{Name: "s1", Ports: []PortStatus{{Port: "s1:p0", Peer: "h1",
			Stats: fabric.PortStats{TxFrames: 5, TxBytes: 500, Drops: 3, ECNMarks: 4, PauseSent: 2, QLen: 1234}}}}},
		Loops: []LoopStatus{{Loop: "s1", Timers: 12, LateSumUS: 300,
			LateBuckets: []uint64{5, 4, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}}}
	fail := false
	m := NewMetrics(func() (Status, error) {
		if fail {
			return Status{}, errors.New("lab gone")
		}
		return st, nil
	})
	text := scrape(t, m)
	fams := parse(t, text)
	port := map[string]string{"lab": "lab1", "port": "s1:p0", "peer": "h1"}
	qp := map[string]string{"lab": "lab1", "host": "h1", "qpn": "17"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
		kind   dto.MetricType
	}{
		{"rocelab_port_tx_frames_total", port, 5, dto.MetricType_COUNTER},
		{"rocelab_port_tx_bytes_total", port, 500, dto.MetricType_COUNTER},
		{"rocelab_port_drops_total", port, 3, dto.MetricType_COUNTER},
		{"rocelab_port_ecn_marks_total", port, 4, dto.MetricType_COUNTER},
		{"rocelab_port_pfc_pause_sent_total", port, 2, dto.MetricType_COUNTER},
		{"rocelab_port_queue_bytes", port, 1234, dto.MetricType_GAUGE},
		{"rocelab_rnic_tx_frames_total", map[string]string{"host": "h1"}, 10, dto.MetricType_COUNTER},
		{"rocelab_rnic_rx_malformed_total", map[string]string{"host": "h1"}, 1, dto.MetricType_COUNTER},
		{"rocelab_qp_rate_bps", qp, rate, dto.MetricType_GAUGE},
		{"rocelab_qp_window_bytes", qp, window, dto.MetricType_GAUGE},
		{"rocelab_qp_inflight_bytes", qp, 4096, dto.MetricType_GAUGE},
		{"rocelab_qp_hpcc_u", qp, u, dto.MetricType_GAUGE},
		{"rocelab_qp_rate_bps", map[string]string{"qpn": "18"}, math.Inf(1), dto.MetricType_GAUGE},
		{"rocelab_capture_dropped_total", map[string]string{"port": "h1:p0"}, 2, dto.MetricType_COUNTER},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
		if k := fams[c.name].GetType(); k != c.kind {
			t.Errorf("%s is a %v, want a %v", c.name, k, c.kind)
		}
	}
	// Loop lateness: a histogram whose cumulative buckets are clock.LateBound's, the
	// last bucket's timers only in the count.
	if f := fams["rocelab_loop_timer_lateness_seconds"]; f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 {
		t.Errorf("loop lateness: %v", f)
	} else {
		h := f.Metric[0].Histogram
		if h.GetSampleCount() != 12 || math.Abs(h.GetSampleSum()-300e-6) > 1e-12 {
			t.Errorf("loop lateness: %d timers, sum %v s; want 12 and 300 µs", h.GetSampleCount(), h.GetSampleSum())
		}
		for _, b := range h.Bucket {
			want := map[float64]uint64{1e-6: 5, 2e-6: 9, 4e-6: 9, 8e-6: 11}[b.GetUpperBound()]
			switch {
			case math.IsInf(b.GetUpperBound(), 1):
				want = 12
			case b.GetUpperBound() > 8e-6:
				want = 11
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("loop lateness bucket ≤ %v s: %d timers, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}
	if f := fams["rocelab_qp_hpcc_u"]; len(f.Metric) != 1 {
		t.Errorf("U exported for %d QPs, want only the HPCC one", len(f.Metric))
	}

	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool not installed (make deps-system installs it as root): skipped its check")
	}

	fail = true
	fams = parse(t, scrape(t, m))
	if got := value(t, fams, "rocelab_scrape_errors_total", nil); got != 1 {
		t.Errorf("scrape errors %v after a failed status, want 1", got)
	}
	if fams["rocelab_port_tx_frames_total"] != nil {
		t.Error("a failed status still exported port metrics")
	}
}
