package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// holdFor is how long `experiment --lab` holds its senders at a time (lab.Hold): a
// hold outlives a killed experiment by at most this.
const holdFor = 30 * time.Second

// labCQModeration is the senders' write_bw -Q: one signalled WRITE in this many. Each
// completion event wakes a sleeping app, and the wake-up (the eventfd write in the
// lab's loop; on a VM an inter-processor interrupt) cost the loop about 7.5 µs, 15 %
// of its CPU at 10 Gb/s with a completion per 64 KiB WRITE (docs/rnic.md).
const labCQModeration = 16

// labDrainEvery is how often `experiment --lab` drains the lab's recorded rows (at
// most; labDrainInterval). Each drain is a round trip through two processes that
// share the lab's cores: drained every 20 ms, a 10 Gb/s lab's link lost about a
// millisecond of sending at every drain.
const labDrainEvery = 250 * time.Millisecond

// labIncast runs the incast scenario in a running lab with real app processes: the
// first cfg.Senders hosts (all but the last unless sendersGiven) each run rocelab's write_bw (64 KiB RDMA WRITEs) against a
// write_bw server of its own on the lab's last host, all started together, while
// the lab records, every cfg.Sample on its own loops (control op record), the
// bottleneck port's queue and bytes (the switch port towards the receiver) and each
// sender's RNIC bytes. The samples make the same Result, files and metrics as the
// virtual-time run; a flow's rate in rates.csv is its measured throughput over the
// interval (its congestion control's rate lives inside the lab process), and it lasts
// from the first to the last sample in which its sender's bytes grew. cfg.LinkRate is
// set from the port.
func labIncast(cfg experiment.Config, store netns.Store, name string, sendersGiven bool) (*experiment.Result, error) {
	status := func() (lab.Status, error) {
		r, _, err := lab.Query(store, name, lab.Request{Op: "status"})
		if err == nil && r.Status == nil {
			err = fmt.Errorf("experiment: lab %s answered status without one", name)
		}
		if err != nil {
			return lab.Status{}, err
		}
		return *r.Status, nil
	}
	st, err := status()
	if err != nil {
		return nil, err
	}
	if !sendersGiven {
		cfg.Senders = len(st.Hosts) - 1
	}
	if len(st.Hosts) < cfg.Senders+1 {
		return nil, fmt.Errorf("experiment: lab %s has %d hosts: too few for %d senders and a receiver", name, len(st.Hosts), cfg.Senders)
	}
	recv := st.Hosts[len(st.Hosts)-1]
	sw, port := -1, -1
	for i, s := range st.Switches {
		for j, p := range s.Ports {
			if p.Peer == recv.Name {
				sw, port = i, j
			}
		}
	}
	if sw < 0 {
		return nil, fmt.Errorf("experiment: lab %s: no switch port leads to the receiver %s", name, recv.Name)
	}
	if cfg.LinkRate, err = topo.ParseRate(st.Switches[sw].Ports[port].Rate); err != nil {
		return nil, fmt.Errorf("experiment: lab %s: rate of %s: %w", name, st.Switches[sw].Ports[port].Port, err)
	}
	// The summary describes the lab as its topology file has it, as the twin
	// (experiment --topology-file) reads it: the receiver link's delay and path MTU
	// (the MTU also sets the drain level that starts the window, and the headers in
	// the ideal FCT), the congestion control and telemetry the lab runs
	// (network.TopologyCC) and its real-time base RTT. Without the file (moved since up),
	// the lab's status names the congestion control and telemetry, HPCC's mode taken
	// as the labs' default, a probe per RTT.
	var baseRTT time.Duration
	if t, err := topo.Load(st.Topology); err == nil {
		for _, l := range t.Links {
			if l.Endpoints[0] == recv.Name || l.Endpoints[1] == recv.Name {
				cfg.LinkDelay, cfg.MTU = l.Delay, roce.MTUForLinkMTU(l.MTU)
			}
		}
		cc, format, err := network.TopologyCC(t)
		if err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", name, err)
		}
		cfg.CC, cfg.Telemetry, baseRTT = cc.Mode, format, network.RealTimeBaseRTT(t)
	} else {
		if cfg.CC, err = rnic.ParseCC(st.CongestionControl, ""); err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", name, err)
		}
		if cfg.Telemetry, err = telemetry.ParseFormat(st.Telemetry); err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", name, err)
		}
	}
	const msg, basePort = 64 << 10, 18600
	iters := max(1, cfg.FlowSize/msg)
	cfg.FlowSize = iters * msg
	size := fmt.Sprint(msg)

	// The apps sit next to the rocelab binary, as rocelab exec finds them.
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	writeBW := filepath.Join(filepath.Dir(self), "write_bw")
	// -e: the apps sleep on completion events between completions instead of
	// spinning, so that on a machine of few cores the lab's loops get the CPU the
	// experiment measures (ROCELAB_LAB_POLL=1 keeps perftest's default busy polling).
	// -Q: one completion per labCQModeration WRITEs rather than perftest's one per
	// large message.
	events := []string{"-e", "-Q", fmt.Sprint(labCQModeration)}
	if os.Getenv("ROCELAB_LAB_POLL") != "" {
		events = nil
	}
	app := func(args ...string) *exec.Cmd {
		c := exec.Command(writeBW, append(append([]string{"-x", "1", "-s", size, "-n", fmt.Sprint(iters)}, events...), args...)...)
		c.Env = os.Environ()
		return c
	}
	var servers []*exec.Cmd
	defer func() {
		for _, s := range servers {
			s.Process.Kill()
			s.Wait()
		}
	}()
	for i := range cfg.Senders {
		srv := app("-p", fmt.Sprint(basePort+i))
		out, err := srv.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := store.Exec(name, recv.Name, srv); err != nil {
			return nil, fmt.Errorf("experiment: write_bw server on %s: %w", recv.Name, err)
		}
		servers = append(servers, srv)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return nil, fmt.Errorf("experiment: write_bw server on %s exited before listening", recv.Name)
			}
			if strings.Contains(line, "Waiting for client") {
				break
			}
		}
		go io.Copy(io.Discard, r)
	}

	res := &experiment.Result{Config: cfg, BaseRTT: baseRTT}
	t0 := int64(-1) // the lab clock's time at the first sample: the run's zero
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	type hostBytes struct {
		t     clock.Time
		bytes []uint64
	}
	var series []hostBytes
	// The lab records the counters (not its status, which costs far more) every
	// cfg.Sample on its own loops (op "record"): a sampler polling from here got its
	// answers 4–29 ms apart on two cores, where the lab's loop ran its timers a few µs
	// late. The rows are drained every labDrainInterval and once more when the flows are over.
	swName := st.Switches[sw].Name
	take := func(c *lab.Counters) error {
		// Samples are timed by the lab's clock as it read them (lab.Counters.TimeNs).
		if t0 < 0 {
			t0 = c.TimeNs
		}
		now := clock.Time(c.TimeNs - t0)
		if len(series) > 0 && now <= series[len(series)-1].t {
			return nil // read no later than the last sample: nothing new to rate
		}
		ports := c.Switches[swName]
		if port >= len(ports) {
			return fmt.Errorf("experiment: lab %s: switch %s has no port %d", name, swName, port)
		}
		p := ports[port]
		hb := hostBytes{t: now}
		for _, h := range st.Hosts[:cfg.Senders] {
			hb.bytes = append(hb.bytes, c.Hosts[h.Name])
		}
		res.Queue = append(res.Queue, experiment.QueueSample{T: now, Bytes: p.QLen, TxBytes: p.TxBytes, Area: p.QueueArea})
		// The receiver's QPs' accepted payload: the goodput, as a virtual-time run
		// counts it at its receivers.
		res.Delivered = append(res.Delivered, experiment.DeliveredSample{T: now, Bytes: c.Received[recv.Name]})
		series = append(series, hb)
		return nil
	}
	var dropped uint64
	record := func(op string, every time.Duration) error {
		r, _, err := lab.Query(store, name, lab.Request{Op: op, EveryNs: int64(every)})
		if err != nil {
			return fmt.Errorf("experiment: lab %s: %s: %w", name, op, err)
		}
		dropped += r.RecordDropped
		for i := range r.Recorded {
			if err := take(&r.Recorded[i]); err != nil {
				return err
			}
		}
		return nil
	}
	// The senders' applications connect and post at different moments, tens of
	// milliseconds apart on a small machine: the lab holds their RC requests until
	// every one has posted, then lets them go together, so that the incast starts as
	// one (lab.Hold; a hold outlives a killed experiment by at most holdFor).
	senders := make([]string, cfg.Senders)
	for i, h := range st.Hosts[:cfg.Senders] {
		senders[i] = h.Name
	}
	hold := func(d time.Duration) (map[string]bool, error) {
		r, _, err := lab.Query(store, name, lab.Request{Op: "hold", Hosts: senders, HoldNs: int64(d)})
		if err != nil {
			return nil, fmt.Errorf("experiment: lab %s: hold the senders: %w", name, err)
		}
		return r.Held, nil
	}
	if _, err := hold(holdFor); err != nil {
		return nil, err
	}
	defer hold(0) // released below; this covers the error returns
	clients := make([]*exec.Cmd, cfg.Senders)
	outs := make([]strings.Builder, cfg.Senders)
	for i := range clients {
		c := app("-p", fmt.Sprint(basePort+i), recv.IPv4)
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := store.Exec(name, st.Hosts[i].Name, c); err != nil {
			for _, started := range clients[:i] {
				started.Process.Kill()
				started.Wait()
			}
			return nil, fmt.Errorf("experiment: write_bw on %s: %w", st.Hosts[i].Name, err)
		}
		clients[i] = c
	}
	waited := make([]error, cfg.Senders)
	exited := make(chan struct{}, cfg.Senders)
	for i, c := range clients {
		go func() { waited[i] = c.Wait(); exited <- struct{}{} }()
	}
	ended, err := awaitPosted(hold, senders, exited, time.Now().Add(holdFor-time.Second))
	var loopsBefore []lab.LoopStatus
	if err == nil {
		// The loops' lateness during the flows is what the figures below are worth.
		var before lab.Status
		before, err = status()
		loopsBefore = before.Loops
	}
	if err != nil {
		for _, c := range clients {
			c.Process.Kill()
		}
		for ; ended < len(clients); ended++ {
			<-exited
		}
		return nil, err
	}
	if err := record("record", cfg.Sample); err != nil {
		return nil, err
	}
	defer lab.Query(store, name, lab.Request{Op: "record"}) // stopped below; this covers the error returns
	go func() {
		tick := time.NewTicker(labDrainInterval(cfg.Sample))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- nil
				return
			case <-tick.C:
			}
			if err := record("recorded", 0); err != nil {
				sampled <- err
				return
			}
		}
	}()
	if _, err := hold(0); err != nil {
		// The hold runs out by itself: the flows start late, not never.
		res.Errors = append(res.Errors, err.Error())
	}
	for ; ended < len(clients); ended++ {
		<-exited
	}
	for i, err := range waited {
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: write_bw on %s: %v: %s", i, st.Hosts[i].Name, err, outs[i].String()))
		}
	}
	close(stop)
	if err := <-sampled; err != nil {
		return nil, err
	}
	if err := record("record", 0); err != nil { // stops the recorder: the rows after the flows
		return nil, err
	}
	if dropped > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("the lab dropped %d of its samples (lab.MaxRecorded)", dropped))
	}

	// A flow lasts from the first to the last interval in which its sender sent RDMA
	// payload (write_bw's setup before it, a TCP exchange, is not the flow's).
	var last clock.Time
	for i := range cfg.Senders {
		start, end := clock.Time(-1), clock.Time(0)
		for k := 1; k < len(series); k++ {
			prev, cur := series[k-1], series[k]
			d := cur.bytes[i] - prev.bytes[i]
			rate := float64(d) * 8e9 / float64(cur.t-prev.t)
			res.Rates = append(res.Rates, experiment.RateSample{T: cur.t, Flow: i, Rate: rate})
			if d > 0 {
				if start < 0 {
					start = prev.t
				}
				end = cur.t
			}
		}
		if start < 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s sent nothing", i, st.Hosts[i].Name))
			continue
		}
		ideal := experiment.IdealFCT(&cfg, cfg.FlowSize)
		res.Flows = append(res.Flows, experiment.FlowRecord{ID: i, Src: i, Dst: cfg.Senders, Size: cfg.FlowSize,
			StartNs: int64(start), FCTNs: int64(end - start), IdealNs: ideal.Nanoseconds(),
			Slowdown: float64(end-start) / float64(ideal), Finished: true})
		last = max(last, end)
	}
	res.Measure(last, cfg.Senders-len(res.Flows))
	for k := 1; k < len(series); k++ {
		gap := float64(series[k].t-series[k-1].t) / 1e3
		res.Metrics.LongestSampleGapUS = max(res.Metrics.LongestSampleGapUS, gap)
	}
	after, err := status()
	if err != nil {
		return nil, err
	}
	var late clock.Lateness
	for i, l := range after.Loops {
		x := l.Lateness()
		if i < len(loopsBefore) {
			x = x.Since(loopsBefore[i].Lateness())
		}
		late.Add(x)
	}
	if len(after.Loops) > 0 {
		res.Metrics.LoopLateness = experiment.NewLoopLateness(late)
	}
	return res, nil
}

// awaitPosted polls the senders' hold (hold renews it) until every host has posted
// requests it keeps back, one of the applications has ended without (it failed; its
// exit is then counted in ended), or deadline passes, when the hold is about to run out.
func awaitPosted(hold func(time.Duration) (map[string]bool, error), hosts []string, exited <-chan struct{}, deadline time.Time) (ended int, err error) {
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-exited:
			return 1, nil
		case <-poll.C:
			held, err := hold(holdFor)
			if err != nil {
				return 0, err
			}
			if time.Now().After(deadline) || !slices.ContainsFunc(hosts, func(h string) bool { return !held[h] }) {
				return 0, nil
			}
		}
	}
}

// labDrainInterval is how often to drain a lab recording every sample: labDrainEvery,
// or sooner when a quarter of lab.MaxRecorded rows would come before it.
func labDrainInterval(sample time.Duration) time.Duration {
	return max(sample, min(labDrainEvery, lab.MaxRecorded/4*sample))
}
