package web

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab"
)

// Replay serves the page for a finished virtual-time experiment (`rocelab experiment
// … --out DIR`): each rate sample of the run becomes one View, the shape the live
// stream sends, timed by the run's simulated clock, so the page draws a replay as it
// draws a lab. Only what the run recorded is in the views: per port the queue and the
// bytes sent (links.csv), per flow the paced rate, window, bytes in flight and
// HPCC++'s U (rates.csv); a replay has no drops, ECN marks or captures.
type Replay struct {
	dir     string
	summary experiment.RunSummary
	topo    *topo.Topology
	ports   []replayPort   // every switch port, switch by switch, in port order
	flows   []replayFlow   // by id
	times   []int64        // the rate samples' instants, ns
	at      []int64        // the frames' times: when the switches took the links' samples
	links   [][]portSample // [instant][port]; valid false where the port has no sample
	rates   [][]rateRow    // [instant], the flows sampled then
}

type replayPort struct {
	sw, name, peer string
	rate           uint64
}

type portSample struct {
	valid   bool
	sampled int64 // when the switch took it, ns
	queue   int
	txBytes uint64
}

type replayFlow struct {
	id, src    int
	start, end int64 // end is the completion, -1 for an unfinished flow
	hostName   string
}

type rateRow struct {
	flow         int
	rate, window float64
	inflight     uint64
	u            float64
	hasU         bool
}

// ReplayInfo is where a view stands in the replay: its frame, of how many, and the
// run's simulated time span. Views of a live lab have none.
type ReplayInfo struct {
	Frame   int    `json:"frame"`
	Frames  int    `json:"frames"`
	StartNs int64  `json:"start_ns"`
	EndNs   int64  `json:"end_ns"`
	Dir     string `json:"dir"`
}

// FrameEvery is how long the replay shows each frame unless the page asks otherwise
// (?every=MS): ten rate samples a second.
const FrameEvery = 100 * time.Millisecond

// LoadReplay reads an experiment's output directory: summary.json, topology.yaml,
// flows.csv, rates.csv (with inflight_bytes and hpcc_u) and links.csv.
func LoadReplay(dir string) (*Replay, error) {
	r := &Replay{dir: dir}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("web: replay of %s: %w", dir, err)
	}
	return r, nil
}

func (r *Replay) load() error {
	d, err := experiment.OpenRun(r.dir)
	if err != nil {
		return err
	}
	r.summary = d.Summary
	if r.topo, err = d.Topology(); err != nil {
		return err
	}
	peers := lab.Peers(r.topo)
	index := map[string]int{}
	for _, s := range r.topo.Switches {
		for i, p := range peers[s.Name] {
			name := fmt.Sprintf("%s:p%d", s.Name, i)
			index[name] = len(r.ports)
			r.ports = append(r.ports, replayPort{sw: s.Name, name: name, peer: p.Name, rate: p.Rate})
		}
	}
	if err := r.loadFlows(d); err != nil {
		return err
	}
	instant := map[int64]int{}
	at := func(t int64) int {
		i, ok := instant[t]
		if !ok {
			i = len(r.times)
			instant[t] = i
			r.times = append(r.times, t)
			r.links = append(r.links, make([]portSample, len(r.ports)))
			r.rates = append(r.rates, nil)
		}
		return i
	}
	err = d.Links(func(l experiment.LinkRow) error {
		p, ok := index[l.Port]
		if !ok {
			return fmt.Errorf("port %q is not in %s", l.Port, experiment.TopologyFile)
		}
		r.links[at(l.TNs)][p] = portSample{valid: true, sampled: l.SampledNs, queue: int(l.Queue), txBytes: l.TxBytes}
		return nil
	})
	if err != nil {
		return err
	}
	err = d.Rates(func(row experiment.RateRow) error {
		if row.Flow < 0 || row.Flow >= len(r.flows) {
			return fmt.Errorf("flow %d is not in %s", row.Flow, experiment.FlowsFile)
		}
		i := at(row.TNs)
		r.rates[i] = append(r.rates[i], rateRow{flow: row.Flow, rate: row.RateBps, window: row.WindowBytes, inflight: row.InFlight, u: row.U, hasU: row.HasU})
		return nil
	})
	if err != nil {
		return err
	}
	if len(r.times) == 0 {
		return fmt.Errorf("links.csv and rates.csv hold no samples")
	}
	// Both files are in time order already; sort the instants (and their rows) anyway,
	// so that a merge of the two never goes back in time.
	order := make([]int, len(r.times))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return r.times[order[a]] < r.times[order[b]] })
	times, links, rates := make([]int64, len(order)), make([][]portSample, len(order)), make([][]rateRow, len(order))
	for i, j := range order {
		times[i], links[i], rates[i] = r.times[j], r.links[j], r.rates[j]
	}
	r.times, r.links, r.rates = times, links, rates
	// A frame's time is its links' (the page divides the bytes they sent by it): the
	// switches sample every sample interval, the rates every quarter of the base RTT,
	// so a switch's latest sample may be up to an interval older than the rates. All
	// switches sample at the same instants; a frame takes its first port's.
	r.at = make([]int64, len(r.times))
	for k, t := range r.times {
		r.at[k] = t
		for _, s := range r.links[k] {
			if s.valid {
				r.at[k] = s.sampled
				break
			}
		}
		if k > 0 && r.at[k] <= r.at[k-1] {
			return fmt.Errorf("links.csv: the sample for %d ns was taken at %d ns, not after the one for %d ns (%d ns)", t, r.at[k], r.times[k-1], r.at[k-1])
		}
	}
	return nil
}

func (r *Replay) loadFlows(d *experiment.RunDir) error {
	flows, err := d.Flows()
	if err != nil {
		return err
	}
	for _, f := range flows {
		if f.ID != len(r.flows) {
			return fmt.Errorf("%s: flow %d out of order (want %d)", experiment.FlowsFile, f.ID, len(r.flows))
		}
		if f.Src < 0 || f.Src >= len(r.topo.Hosts) {
			return fmt.Errorf("%s: flow %d: source host %d is not in %s", experiment.FlowsFile, f.ID, f.Src, experiment.TopologyFile)
		}
		rf := replayFlow{id: f.ID, src: f.Src, start: f.StartNs, end: -1, hostName: r.topo.Hosts[f.Src].Name}
		if f.Finished {
			rf.end = f.StartNs + f.FCTNs
		}
		r.flows = append(r.flows, rf)
	}
	return nil
}

// Frames is the number of views the replay has: one per rate sample.
func (r *Replay) Frames() int { return len(r.times) }

// View is frame k of the replay: the run's state at its k-th rate sample.
func (r *Replay) View(k int) View {
	t := r.times[k]
	st := lab.Status{Name: filepath.Base(r.dir),
		Topology:  r.summary.Scenario + ": " + r.summary.Setup,
		Telemetry: r.topo.Telemetry, CongestionControl: r.summary.CC,
		Uptime: time.Duration(t).String()}
	hosts := map[string]int{}
	for i, h := range r.topo.Hosts {
		hosts[h.Name] = i
		hs := lab.HostStatus{Name: h.Name, MAC: h.MAC.String()}
		if h.IPv4.IsValid() {
			hs.IPv4 = h.IPv4.String()
		}
		if h.IPv6.IsValid() {
			hs.IPv6 = h.IPv6.String()
		}
		st.Hosts = append(st.Hosts, hs)
	}
	sampled := map[int]rateRow{}
	for _, row := range r.rates[k] {
		sampled[row.flow] = row
	}
	// The mix releases a flow's QPs when it completes (a long mix would otherwise list
	// thousands); the incast and fairness keep theirs, shown as done.
	released := r.summary.Scenario == "mix"
	for _, f := range r.flows {
		if t < f.start {
			continue
		}
		q := lab.QPStatus{QPN: uint32(f.id)}
		row, ok := sampled[f.id]
		switch {
		case f.end >= 0 && t >= f.end && released:
			continue
		case f.end >= 0 && t >= f.end:
			q.State = "done"
			zero := 0.0
			q.RateBps, q.WindowBytes = &zero, &zero
		case ok:
			q.State = "RTS"
			rate, window := row.rate, row.window
			q.RateBps = &rate
			if window > 0 { // 0: the flow has no window
				q.WindowBytes = &window
			}
			q.InFlightBytes = row.inflight
			if row.hasU {
				u := row.u
				q.HPCCU = &u
			}
		default:
			continue // started since the last sample: nothing recorded yet
		}
		hs := &st.Hosts[hosts[f.hostName]]
		hs.QPs = append(hs.QPs, q)
	}
	var sw *lab.SwitchStatus
	for i, p := range r.ports {
		if sw == nil || sw.Name != p.sw {
			st.Switches = append(st.Switches, lab.SwitchStatus{Name: p.sw})
			sw = &st.Switches[len(st.Switches)-1]
		}
		s := r.links[k][i]
		if !s.valid {
			// a port the run did not sample at this instant keeps its previous figures
			for j := k - 1; j >= 0 && !s.valid; j-- {
				s = r.links[j][i]
			}
		}
		sw.Ports = append(sw.Ports, lab.PortStatus{Port: p.name, Peer: p.peer, Rate: topo.FormatRate(p.rate),
			Stats: fabric.PortStats{TxBytes: s.txBytes, QLen: s.queue}})
	}
	return View{Time: r.at[k], Status: st, Captures: map[string]CaptureRef{},
		Replay: &ReplayInfo{Frame: k, Frames: len(r.times), StartNs: r.at[0], EndNs: r.at[len(r.at)-1], Dir: r.dir}}
}

// Handler serves the page (/), the replay stream (/events?from=K&every=MS&count=N:
// frames K, K+1, … one every MS milliseconds, N of them or to the end, then an "end"
// event) and one frame (/api/status?frame=K, default the last).
func (r *Replay) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("/", http.FileServerFS(static))
	mux.HandleFunc("/events", r.events)
	mux.HandleFunc("/api/status", func(w http.ResponseWriter, req *http.Request) {
		k, err := r.frameParam(req, "frame", r.Frames()-1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r.View(k))
	})
	mux.HandleFunc("/api/capture", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "a replay of a finished experiment has no captures", http.StatusNotFound)
	})
	return mux
}

func (r *Replay) frameParam(req *http.Request, name string, def int) (int, error) {
	s := req.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k >= r.Frames() {
		return 0, fmt.Errorf("%s=%q: want a frame from 0 to %d", name, s, r.Frames()-1)
	}
	return k, nil
}

func (r *Replay) events(w http.ResponseWriter, req *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	from, err := r.frameParam(req, "from", 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	every, count := FrameEvery, r.Frames()
	q := req.URL.Query()
	if s := q.Get("every"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 1 || ms > 60_000 {
			http.Error(w, fmt.Sprintf("every=%q: want milliseconds from 1 to 60000", s), http.StatusBadRequest)
			return
		}
		every = time.Duration(ms) * time.Millisecond
	}
	if s := q.Get("count"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			http.Error(w, fmt.Sprintf("count=%q: want at least 1 frame", s), http.StatusBadRequest)
			return
		}
		count = n
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(every)
	defer tick.Stop()
	for k := from; k < r.Frames() && k < from+count; k++ {
		if k > from {
			select {
			case <-req.Context().Done():
				return
			case <-tick.C:
			}
		}
		b, _ := json.Marshal(r.View(k))
		fmt.Fprintf(w, "id: %d\ndata: %s\n\n", k, b)
		flusher.Flush()
	}
	// "end" tells the page the stream is over on purpose (EventSource would reconnect).
	fmt.Fprintf(w, "event: end\ndata: %d\n\n", r.Frames())
	flusher.Flush()
}
