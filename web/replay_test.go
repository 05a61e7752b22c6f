package web

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/experiment"
)

// incastDir runs a small incast (4 senders of 100 KB, HPCC++) and writes its files.
func incastDir(t *testing.T) string {
	t.Helper()
	cfg := experiment.Defaults()
	cfg.Senders, cfg.FlowSize = 4, 100_000
	res, err := experiment.Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// table reads a CSV file as rows keyed by column name.
func table(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, name := range rows[0] {
			m[name] = r[i]
		}
		out = append(out, m)
	}
	return out
}

// stream reads the server-sent events of url: the views in order, and whether the
// stream ended with "end".
func stream(t *testing.T, url string) (views []View, ended bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "end":
			ended = true
		case strings.HasPrefix(line, "data: "):
			var v View
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
				t.Fatalf("event %d: %v", len(views), err)
			}
			views = append(views, v)
		case line == "":
			event = ""
		}
	}
	return views, ended
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// TestReplayEvents: the replay of a small incast streams one view per rate sample, in
// the live stream's shape, and each view holds what the run's CSVs say at that
// instant: every port's queue and bytes sent (links.csv), every running flow's paced
// rate, window, bytes in flight and U under its sender's host (rates.csv), finished
// flows as done; the topology is the run's (topology.yaml). Seeking (from, count) and
// bad parameters are checked too.
func TestReplayEvents(t *testing.T) {
	dir := incastDir(t)
	r, err := LoadReplay(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	views, ended := stream(t, srv.URL+"/events?every=1")
	if !ended {
		t.Error("the stream did not end with an end event")
	}
	links, rates, flows := table(t, filepath.Join(dir, "links.csv")), table(t, filepath.Join(dir, "rates.csv")), table(t, filepath.Join(dir, "flows.csv"))
	var instants []string // a frame's time is when its links were sampled
	for _, row := range links {
		if row["port"] == "s1:p0" {
			instants = append(instants, row["sampled_ns"])
		}
	}
	if len(views) != len(instants) || len(views) < 10 {
		t.Fatalf("%d views, links.csv has %d instants", len(views), len(instants))
	}
	byTime, byInstant := map[int64]View{}, map[int64]View{}
	for _, row := range links {
		if row["port"] == "s1:p0" {
			byInstant[int64(num(t, row["t_ns"]))] = views[len(byInstant)]
		}
	}
	for k, v := range views {
		if v.Replay == nil || v.Replay.Frame != k || v.Replay.Frames != len(views) || strconv.FormatInt(v.Time, 10) != instants[k] {
			t.Fatalf("view %d: time %d, replay %+v; want frame %d of %d at %s ns", k, v.Time, v.Replay, k, len(views), instants[k])
		}
		byTime[v.Time] = v
	}
	first := views[0].Status
	if len(first.Hosts) != 5 || first.Hosts[4].Name != "h5" || len(first.Switches) != 1 || len(first.Switches[0].Ports) != 5 {
		t.Fatalf("the replay's network is not the 4:1 star: %+v", first)
	}
	for i, p := range first.Switches[0].Ports {
		if want := "s1:p" + strconv.Itoa(i); p.Port != want || p.Peer != "h"+strconv.Itoa(i+1) || p.Rate != "100G" {
			t.Errorf("port %d: %s to %s at %s, want %s to h%d at 100G", i, p.Port, p.Peer, p.Rate, want, i+1)
		}
	}

	queued := 0
	for _, row := range links {
		v := byTime[int64(num(t, row["sampled_ns"]))]
		i, _ := strconv.Atoi(strings.TrimPrefix(row["port"], "s1:p"))
		st := v.Status.Switches[0].Ports[i].Stats
		if strconv.Itoa(st.QLen) != row["queue_bytes"] || strconv.FormatUint(st.TxBytes, 10) != row["tx_bytes"] {
			t.Fatalf("at %s ns %s: view has queue %d, tx %d; links.csv %v", row["t_ns"], row["port"], st.QLen, st.TxBytes, row)
		}
		if st.QLen > 0 {
			queued++
		}
	}
	if queued == 0 {
		t.Error("no view shows a queue")
	}

	running, withU := 0, 0
	for _, row := range rates {
		tn, id := int64(num(t, row["t_ns"])), int(num(t, row["flow"]))
		f := flows[id]
		host := "h" + strconv.Itoa(int(num(t, f["src"]))+1)
		end := int64(num(t, f["start_ns"]) + num(t, f["fct_ns"]))
		var qps []string
		for _, h := range byInstant[tn].Status.Hosts {
			for _, q := range h.QPs {
				if int(q.QPN) != id {
					continue
				}
				qps = append(qps, h.Name)
				switch {
				case h.Name != host:
					t.Errorf("at %d ns flow %d is under %s, want its sender %s", tn, id, h.Name, host)
				case tn >= end:
					if q.State != "done" {
						t.Errorf("at %d ns flow %d finished at %d ns is %s", tn, id, end, q.State)
					}
				default:
					running++
					if q.State != "RTS" || q.RateBps == nil || *q.RateBps != num(t, row["paced_rate_bps"]) ||
						q.WindowBytes == nil || *q.WindowBytes != num(t, row["window_bytes"]) ||
						strconv.FormatUint(q.InFlightBytes, 10) != row["inflight_bytes"] {
						t.Errorf("at %d ns flow %d: view %+v, rates.csv %v", tn, id, q, row)
					}
					if row["hpcc_u"] != "" {
						withU++
						if q.HPCCU == nil || *q.HPCCU != num(t, row["hpcc_u"]) {
							t.Errorf("at %d ns flow %d: U %v, rates.csv %s", tn, id, q.HPCCU, row["hpcc_u"])
						}
					}
				}
			}
		}
		if len(qps) != 1 {
			t.Errorf("at %d ns flow %d is shown %d times (%v)", tn, id, len(qps), qps)
		}
	}
	if running == 0 || withU == 0 {
		t.Errorf("%d running flow samples, %d with U", running, withU)
	}

	part, ended := stream(t, srv.URL+"/events?from=10&count=2&every=1")
	if !ended || len(part) != 2 || part[0].Replay.Frame != 10 || part[1].Replay.Frame != 11 {
		t.Errorf("from=10&count=2 gave %d views ending %v", len(part), ended)
	}
	for _, bad := range []string{"/events?from=-1", "/events?from=" + strconv.Itoa(len(views)), "/events?every=0", "/events?count=x",
		"/api/status?frame=99999"} {
		resp, err := http.Get(srv.URL + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", bad, resp.Status)
		}
	}
}

// TestReplayNeedsItsFiles: a directory that is not an experiment's, or one written
// before topology.yaml and links.csv, is refused naming what is missing.
func TestReplayNeedsItsFiles(t *testing.T) {
	if _, err := LoadReplay(t.TempDir()); err == nil || !strings.Contains(err.Error(), "summary.json") {
		t.Errorf("empty directory: %v", err)
	}
	dir := incastDir(t)
	if err := os.Remove(filepath.Join(dir, "topology.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadReplay(dir); err == nil || !strings.Contains(err.Error(), "topology.yaml") {
		t.Errorf("without topology.yaml: %v", err)
	}
	dir = incastDir(t)
	if err := os.WriteFile(filepath.Join(dir, "links.csv"), []byte("t_ns,port\n0,s1:p0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadReplay(dir); err == nil || !strings.Contains(err.Error(), "links.csv has no sampled_ns column") {
		t.Errorf("old links.csv: %v", err)
	}
}
