package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeLab fetches and parses http://addr/metrics.
func scrapeLab(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return fams
}

// sample returns the value of family name's sample whose label key is val.
func sample(fams map[string]*dto.MetricFamily, name, key, val string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == key && l.GetValue() == val {
				if m.Counter != nil {
					return m.Counter.GetValue(), true
				}
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

// TestMetricsLabRealTime: `rocelab up --metrics ADDR` serves the running lab's
// counters; while write_bw runs, its QPs' rate, window and HPCC++ U show up, and the
// port carrying it counts its bytes; `rocelab metrics --lab` serves the same lab from
// outside the lab process.
func TestMetricsLabRealTime(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows the lab below real time")
	}
	c := newCLI(t)
	buildApps(t, c, "write_bw")
	name := labName("met")
	addr := freeAddr(t)
	out := c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name, "--metrics", addr)
	defer c.run("down", name)
	if !strings.Contains(out, "http://"+addr+"/metrics") {
		t.Errorf("up does not say where the metrics are:\n%s", out)
	}
	// The client (h2) writes: its data enters the switch at s1:p1.
	before, _ := sample(scrapeLab(t, addr), "rocelab_port_rx_bytes_total", "port", "s1:p1")

	server := c.cmd("exec", "--lab", name, "-d", "h1", "--", "write_bw", "-x", "1", "-D", "3")
	server.Stdout, server.Stderr = os.Stderr, os.Stderr
	if err := server.Run(); err != nil {
		t.Fatal(err)
	}
	client := c.cmd("exec", "--lab", name, "h2", "--", "write_bw", "-x", "1", "-D", "3", "10.0.0.1")
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	// The QPs exist while write_bw runs: scrape until the sender's shows (bounded).
	var u float64
	found := false
	for deadline := time.Now().Add(10 * time.Second); !found && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		fams := scrapeLab(t, addr)
		for _, m := range fams["rocelab_qp_hpcc_u"].GetMetric() {
			u, found = m.Gauge.GetValue(), true
		}
		if found {
			if _, ok := sample(fams, "rocelab_qp_window_bytes", "host", "h2"); !ok {
				t.Error("no window for h2's QP")
			}
		}
	}
	if err := client.Wait(); err != nil {
		t.Fatalf("write_bw client: %v", err)
	}
	if !found {
		t.Fatal("no QP's HPCC++ U was exported while write_bw ran")
	}
	t.Logf("a QP's U while write_bw ran: %.3f", u)
	// The lab's event loops (one per four CPUs, the nodes dealt among them) report
	// how late they ran their timers, in the metrics and in status.
	loops := map[string]uint64{}
	for _, m := range scrapeLab(t, addr)["rocelab_loop_timer_lateness_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "loop" {
				loops[l.GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	if want := max(1, runtime.NumCPU()/4); len(loops) != want {
		t.Errorf("timer lateness exported for loops %v, want %d loops", loops, want)
	}
	for loop, n := range loops {
		if n == 0 {
			t.Errorf("loop %s ran no timers during write_bw", loop)
		}
	}
	if out := c.run("status", "--lab", name); !strings.Contains(out, "LATE P99") {
		t.Errorf("status shows no loop lateness:\n%s", out)
	} else {
		t.Logf("status after write_bw:\n%s", out[strings.Index(out, "LOOP"):])
	}
	after, _ := sample(scrapeLab(t, addr), "rocelab_port_rx_bytes_total", "port", "s1:p1")
	if after-before < 1e8 {
		t.Errorf("port s1:p1 received %v bytes during 3 s of write_bw, want more than 100 MB", after-before)
	}

	outside := freeAddr(t)
	metrics := c.cmd("metrics", "--lab", name, "--listen", outside)
	if err := metrics.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { metrics.Process.Kill(); metrics.Wait() }()
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); fams == nil; time.Sleep(20 * time.Millisecond) {
		if _, err := http.Get("http://" + outside + "/metrics"); err == nil {
			fams = scrapeLab(t, outside)
		} else if time.Now().After(deadline) {
			t.Fatalf("rocelab metrics never served: %v", err)
		}
	}
	if got, ok := sample(fams, "rocelab_port_rx_bytes_total", "port", "s1:p1"); !ok || got < after {
		t.Errorf("rocelab metrics: port s1:p1 rx bytes %v (%v), want at least %v", got, ok, after)
	}
}
