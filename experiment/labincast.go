package experiment

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// RunningLab is a lab running in real time as RunLabIncast drives it: its description,
// the hold and record operations of its control socket, and processes started in its
// hosts. Package main implements it over package lab's control client, so that this
// package stays free of the kernel runtime (namespaces, netlink).
type RunningLab interface {
	// Status describes the lab and how late its loops have run their timers so far.
	Status() (LabStatus, error)
	// Hold keeps back the RC and UC request packets of hosts for d from now (0
	// releases them) and says, per host, whether requests its apps posted are held.
	Hold(hosts []string, d time.Duration) (held map[string]bool, err error)
	// Record starts recording the counters every `every` on the lab's own loops, or
	// stops (every 0); Recorded drains. Each returns the rows recorded since the last
	// drain, oldest first, and how many the lab dropped.
	Record(every time.Duration) ([]LabCounters, uint64, error)
	Recorded() ([]LabCounters, uint64, error)
	// Start starts cmd in host (as cmd.Start does, in the host's namespaces).
	Start(host string, cmd *exec.Cmd) error
}

// LabStatus is what RunLabIncast reads of a lab's status.
type LabStatus struct {
	Name string
	// Topology is the path of the lab's topology file; it may have moved since.
	Topology                     string
	CongestionControl, Telemetry string
	Hosts                        []LabHost
	Switches                     []LabSwitch
	Loops                        []clock.Lateness
}

// LabHost is one of a lab's hosts.
type LabHost struct{ Name, IPv4 string }

// LabSwitch is one of a lab's switches with its ports, by number.
type LabSwitch struct {
	Name  string
	Ports []LabPort
}

// LabPort is a switch port: its name (s1:p3), the node at the link's far end and the
// link's rate as the topology writes it.
type LabPort struct{ Port, Peer, Rate string }

// LabCounters is one row the lab recorded: at lab-clock time TimeNs, the RDMA payload
// each host's RNIC sent and its QPs accepted, and each switch port's counters.
type LabCounters struct {
	TimeNs         int64
	Sent, Received map[string]uint64
	Switches       map[string][]LabPortCounters
}

// LabPortCounters is a switch port's queue, bytes sent and ∫ queue dt (byte·ns).
type LabPortCounters struct {
	QLen               int
	TxBytes, QueueArea uint64
}

// LabIncastOptions are RunLabIncast's settings beyond the Config.
type LabIncastOptions struct {
	// WriteBW is the path of rocelab's write_bw app.
	WriteBW string
	// SendersGiven keeps cfg.Senders; otherwise every host but the last sends.
	SendersGiven bool
	// Poll makes the apps busy-poll their CQs, as perftest does by default, instead of
	// sleeping on completion events with one signalled WRITE in LabCQModeration.
	Poll bool
	// HoldFor is how long a hold lasts (renewed while the senders connect): a hold
	// outlives a killed experiment by at most this.
	HoldFor time.Duration
	// DrainEvery is how often, at most, the recorded rows are drained (each drain is a
	// round trip through two processes that share the lab's cores: drained every
	// 20 ms, a 10 Gb/s lab's link lost about a millisecond of sending at every drain).
	DrainEvery time.Duration
	// MaxRecorded is how many rows the lab keeps between drains.
	MaxRecorded int
}

// LabCQModeration is the senders' write_bw -Q: one signalled WRITE in this many. Each
// completion event wakes a sleeping app, and the wake-up (the eventfd write in the
// lab's loop; on a VM an inter-processor interrupt) cost the loop about 7.5 µs, 15 %
// of its CPU at 10 Gb/s with a completion per 64 KiB WRITE (docs/rnic.md).
const LabCQModeration = 16

// labIncastBasePort is the first write_bw server's TCP port; sender i uses base + i.
const labIncastBasePort = 18600

// RunLabIncast runs the incast scenario in a running lab with real app processes: the
// first cfg.Senders hosts each run rocelab's write_bw (64 KiB RDMA WRITEs) against a
// write_bw server of its own on the lab's last host, all released together, while the
// lab records, every cfg.Sample on its own loops, the bottleneck port's queue and bytes
// (the switch port towards the receiver) and each sender's RNIC bytes. The samples make
// the same Result, files and metrics as the virtual-time run; a flow's rate in
// rates.csv is its measured throughput over the interval (its congestion control's rate
// lives inside the lab process), and it lasts from the first to the last sample in
// which its sender's bytes grew. cfg.LinkRate is set from the port.
func RunLabIncast(cfg Config, l RunningLab, opt LabIncastOptions) (*Result, error) {
	st, err := l.Status()
	if err != nil {
		return nil, err
	}
	in, err := newLabIncast(&cfg, st, opt)
	if err != nil {
		return nil, err
	}
	in.lab = l
	stopServers, err := in.startServers()
	defer stopServers()
	if err != nil {
		return nil, err
	}
	return in.run()
}

// labIncast is one RunLabIncast: the lab, the hosts' roles, and the samples taken.
type labIncast struct {
	cfg      *Config
	opt      LabIncastOptions
	lab      RunningLab
	st       LabStatus
	senders  []string
	recv     LabHost
	swName   string
	port     int
	iters    int
	res      *Result
	t0       int64 // the lab clock's time at the first sample: the run's zero
	series   []hostBytes
	dropped  uint64
	loopsRun []clock.Lateness // the loops' lateness when the flows started
}

// hostBytes is one sample of the senders' RNIC bytes.
type hostBytes struct {
	t     clock.Time
	bytes []uint64
}

// newLabIncast reads the roles and the configuration off the lab's status: the
// receiver (the last host), its switch port, and the summary's parameters as the
// lab's topology file has them, as the twin (experiment --topology-file) reads it: the
// receiver link's delay and path MTU, the congestion control and telemetry the lab
// runs and its real-time base RTT. Without the file (moved since up), the status
// names the congestion control and telemetry, HPCC's mode taken as the labs' default.
func newLabIncast(cfg *Config, st LabStatus, opt LabIncastOptions) (*labIncast, error) {
	if !opt.SendersGiven {
		cfg.Senders = len(st.Hosts) - 1
	}
	if len(st.Hosts) < cfg.Senders+1 || cfg.Senders < 1 {
		return nil, fmt.Errorf("experiment: lab %s has %d hosts: too few for %d senders and a receiver", st.Name, len(st.Hosts), cfg.Senders)
	}
	in := &labIncast{cfg: cfg, opt: opt, st: st, recv: st.Hosts[len(st.Hosts)-1], port: -1}
	for _, s := range st.Switches {
		for j, p := range s.Ports {
			if p.Peer == in.recv.Name {
				in.swName, in.port = s.Name, j
				var err error
				if cfg.LinkRate, err = topo.ParseRate(p.Rate); err != nil {
					return nil, fmt.Errorf("experiment: lab %s: rate of %s: %w", st.Name, p.Port, err)
				}
			}
		}
	}
	if in.port < 0 {
		return nil, fmt.Errorf("experiment: lab %s: no switch port leads to the receiver %s", st.Name, in.recv.Name)
	}
	var baseRTT time.Duration
	if t, err := topo.Load(st.Topology); err == nil {
		for _, l := range t.Links {
			if l.Endpoints[0] == in.recv.Name || l.Endpoints[1] == in.recv.Name {
				cfg.LinkDelay, cfg.MTU = l.Delay, roce.MTUForLinkMTU(l.MTU)
			}
		}
		cc, format, err := network.TopologyCC(t)
		if err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", st.Name, err)
		}
		cfg.CC, cfg.Telemetry, baseRTT = cc.Mode, format, network.RealTimeBaseRTT(t)
	} else {
		if cfg.CC, err = rnic.ParseCC(st.CongestionControl, ""); err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", st.Name, err)
		}
		if cfg.Telemetry, err = telemetry.ParseFormat(st.Telemetry); err != nil {
			return nil, fmt.Errorf("experiment: lab %s: %w", st.Name, err)
		}
	}
	const msg = 64 << 10
	in.iters = max(1, cfg.FlowSize/msg)
	cfg.FlowSize = in.iters * msg
	for _, h := range st.Hosts[:cfg.Senders] {
		in.senders = append(in.senders, h.Name)
	}
	in.res = &Result{Config: *cfg, BaseRTT: baseRTT}
	in.t0 = -1
	return in, nil
}

// app is a write_bw command with the run's message size and count. -e: the apps sleep
// on completion events between completions instead of spinning, so that on a machine
// of few cores the lab's loops get the CPU the experiment measures; -Q: one completion
// per LabCQModeration WRITEs rather than perftest's one per large message.
func (in *labIncast) app(args ...string) *exec.Cmd {
	base := []string{"-x", "1", "-s", fmt.Sprint(64 << 10), "-n", fmt.Sprint(in.iters)}
	if !in.opt.Poll {
		base = append(base, "-e", "-Q", fmt.Sprint(LabCQModeration))
	}
	return exec.Command(in.opt.WriteBW, append(base, args...)...)
}

// startServers starts a write_bw server per sender on the receiver and waits until
// each listens. The returned function stops them; it is never nil.
func (in *labIncast) startServers() (stop func(), err error) {
	var servers []*exec.Cmd
	stop = func() {
		for _, s := range servers {
			s.Process.Kill()
			s.Wait()
		}
	}
	for i := range in.senders {
		srv := in.app("-p", fmt.Sprint(labIncastBasePort+i))
		out, err := srv.StdoutPipe()
		if err != nil {
			return stop, err
		}
		if err := in.lab.Start(in.recv.Name, srv); err != nil {
			return stop, fmt.Errorf("experiment: write_bw server on %s: %w", in.recv.Name, err)
		}
		servers = append(servers, srv)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return stop, fmt.Errorf("experiment: write_bw server on %s exited before listening", in.recv.Name)
			}
			if strings.Contains(line, "Waiting for client") {
				break
			}
		}
		go io.Copy(io.Discard, r)
	}
	return stop, nil
}

// hold holds (or releases, d 0) the senders.
func (in *labIncast) hold(d time.Duration) (map[string]bool, error) {
	held, err := in.lab.Hold(in.senders, d)
	if err != nil {
		return nil, fmt.Errorf("experiment: lab %s: hold the senders: %w", in.st.Name, err)
	}
	return held, nil
}

// run starts the senders held, releases them together once every one has posted (their
// apps connect and post tens of milliseconds apart on a small machine: held, the
// incast starts as one), samples until all have exited, and makes the Result.
func (in *labIncast) run() (*Result, error) {
	if _, err := in.hold(in.opt.HoldFor); err != nil {
		return nil, err
	}
	defer in.hold(0) // released below; this covers the error returns
	clients, outs, err := in.startClients()
	if err != nil {
		return nil, err
	}
	waited := make([]error, len(clients))
	exited := make(chan struct{}, len(clients))
	for i, c := range clients {
		go func() { waited[i] = c.Wait(); exited <- struct{}{} }()
	}
	ended, err := in.awaitPosted(exited, time.Now().Add(in.opt.HoldFor-time.Second))
	if err == nil {
		var before LabStatus
		before, err = in.lab.Status() // the loops' lateness during the flows is what the figures are worth
		in.loopsRun = before.Loops
	}
	if err == nil {
		err = in.record(in.lab.Record(in.cfg.Sample))
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
	defer in.lab.Record(0) // stopped below; this covers the error returns
	stop, sampled := make(chan struct{}), make(chan error, 1)
	go in.drain(stop, sampled)
	if _, err := in.hold(0); err != nil {
		in.res.Errors = append(in.res.Errors, err.Error()) // the hold runs out by itself: the flows start late, not never
	}
	for ; ended < len(clients); ended++ {
		<-exited
	}
	for i, err := range waited {
		if err != nil {
			in.res.Errors = append(in.res.Errors, fmt.Sprintf("flow %d: write_bw on %s: %v: %s", i, in.senders[i], err, outs[i].String()))
		}
	}
	close(stop)
	if err := <-sampled; err != nil {
		return nil, err
	}
	if err := in.record(in.lab.Record(0)); err != nil { // stops the recorder: the rows after the flows
		return nil, err
	}
	if in.dropped > 0 {
		in.res.Errors = append(in.res.Errors, fmt.Sprintf("the lab dropped %d of its samples (lab.MaxRecorded)", in.dropped))
	}
	return in.result()
}

// startClients starts the senders' write_bw clients.
func (in *labIncast) startClients() ([]*exec.Cmd, []strings.Builder, error) {
	clients := make([]*exec.Cmd, len(in.senders))
	outs := make([]strings.Builder, len(in.senders))
	for i, h := range in.senders {
		c := in.app("-p", fmt.Sprint(labIncastBasePort+i), in.recv.IPv4)
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := in.lab.Start(h, c); err != nil {
			for _, started := range clients[:i] {
				started.Process.Kill()
				started.Wait()
			}
			return nil, nil, fmt.Errorf("experiment: write_bw on %s: %w", h, err)
		}
		clients[i] = c
	}
	return clients, outs, nil
}

// awaitPosted polls the senders' hold (which renews it) until every sender has posted
// requests it keeps back, one of the apps has ended without (it failed; its exit is
// then counted in ended), or deadline passes, when the hold is about to run out.
func (in *labIncast) awaitPosted(exited <-chan struct{}, deadline time.Time) (ended int, err error) {
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-exited:
			return 1, nil
		case <-poll.C:
			held, err := in.hold(in.opt.HoldFor)
			if err != nil {
				return 0, err
			}
			if time.Now().After(deadline) || !slices.ContainsFunc(in.senders, func(h string) bool { return !held[h] }) {
				return 0, nil
			}
		}
	}
}

// drain drains the lab's recorded rows every labDrainInterval until stop closes, and
// reports how it ended on sampled.
func (in *labIncast) drain(stop <-chan struct{}, sampled chan<- error) {
	tick := time.NewTicker(in.drainInterval())
	defer tick.Stop()
	for {
		select {
		case <-stop:
			sampled <- nil
			return
		case <-tick.C:
		}
		if err := in.record(in.lab.Recorded()); err != nil {
			sampled <- err
			return
		}
	}
}

// drainInterval is how often to drain a lab recording every sample: DrainEvery, or
// sooner when a quarter of MaxRecorded rows would come before it.
func (in *labIncast) drainInterval() time.Duration {
	s := in.cfg.Sample
	return max(s, min(in.opt.DrainEvery, time.Duration(in.opt.MaxRecorded/4)*s))
}

// record takes the rows a Record or Recorded call returned.
func (in *labIncast) record(rows []LabCounters, dropped uint64, err error) error {
	if err != nil {
		return fmt.Errorf("experiment: lab %s: record: %w", in.st.Name, err)
	}
	in.dropped += dropped
	for i := range rows {
		if err := in.take(&rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// take adds one row, timed by the lab's clock as it read the counters.
func (in *labIncast) take(c *LabCounters) error {
	if in.t0 < 0 {
		in.t0 = c.TimeNs
	}
	now := clock.Time(c.TimeNs - in.t0)
	if len(in.series) > 0 && now <= in.series[len(in.series)-1].t {
		return nil // read no later than the last sample: nothing new to rate
	}
	ports := c.Switches[in.swName]
	if in.port >= len(ports) {
		return fmt.Errorf("experiment: lab %s: switch %s has no port %d", in.st.Name, in.swName, in.port)
	}
	p := ports[in.port]
	hb := hostBytes{t: now}
	for _, h := range in.senders {
		hb.bytes = append(hb.bytes, c.Sent[h])
	}
	in.res.Queue = append(in.res.Queue, QueueSample{T: now, Bytes: p.QLen, TxBytes: p.TxBytes, Area: p.QueueArea})
	// The receiver's QPs' accepted payload: the goodput, as a virtual-time run counts
	// it at its receivers.
	in.res.Delivered = append(in.res.Delivered, DeliveredSample{T: now, Bytes: c.Received[in.recv.Name]})
	in.series = append(in.series, hb)
	return nil
}

// result makes the flows from the samples: a flow lasts from the first to the last
// interval in which its sender sent RDMA payload (write_bw's setup before it, a TCP
// exchange, is not the flow's), and adds the loops' lateness during the flows.
func (in *labIncast) result() (*Result, error) {
	res, cfg := in.res, in.cfg
	var last clock.Time
	for i, h := range in.senders {
		start, end := clock.Time(-1), clock.Time(0)
		for k := 1; k < len(in.series); k++ {
			prev, cur := in.series[k-1], in.series[k]
			d := cur.bytes[i] - prev.bytes[i]
			res.Rates = append(res.Rates, RateSample{T: cur.t, Flow: i, Rate: float64(d) * 8e9 / float64(cur.t-prev.t)})
			if d > 0 {
				if start < 0 {
					start = prev.t
				}
				end = cur.t
			}
		}
		if start < 0 {
			res.Errors = append(res.Errors, fmt.Sprintf("flow %d: %s sent nothing", i, h))
			continue
		}
		ideal := IdealFCT(cfg, cfg.FlowSize)
		res.Flows = append(res.Flows, FlowRecord{ID: i, Src: i, Dst: cfg.Senders, Size: cfg.FlowSize,
			StartNs: int64(start), FCTNs: int64(end - start), IdealNs: ideal.Nanoseconds(),
			Slowdown: float64(end-start) / float64(ideal), Finished: true})
		last = max(last, end)
	}
	res.Measure(last, cfg.Senders-len(res.Flows))
	for k := 1; k < len(in.series); k++ {
		gap := float64(in.series[k].t-in.series[k-1].t) / 1e3
		res.Metrics.LongestSampleGapUS = max(res.Metrics.LongestSampleGapUS, gap)
	}
	after, err := in.lab.Status()
	if err != nil {
		return nil, err
	}
	var late clock.Lateness
	for i, x := range after.Loops {
		if i < len(in.loopsRun) {
			x = x.Since(in.loopsRun[i])
		}
		late.Add(x)
	}
	if len(after.Loops) > 0 {
		res.Metrics.LoopLateness = NewLoopLateness(late)
	}
	return res, nil
}
