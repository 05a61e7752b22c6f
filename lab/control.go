package lab

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/capture"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
)

// The control protocol: a client connects to the lab's control socket and writes one
// JSON request line; the lab answers with one JSON line (Reply). For "capture" a
// successful reply is followed by the pcapng stream in chunks (a 4-byte big-endian
// length, then that many bytes); the client ends the capture by shutting down its
// writing side, the lab then sends the rest of the stream, the statistics block, a
// zero-length chunk and a last Reply line with the capture's figures.
//
// With "file", the lab writes the pcapng to that file itself (one copy of each frame
// fewer, and no second process to keep up) and the stream carries no chunks.
//
//	{"op":"status"}                                 → Reply{Status}
//	{"op":"capture","port":"s1:p3","snaplen":128}   → Reply{}, chunks, 0, Reply{Capture}
//	{"op":"capture","port":"s1:p3","file":"/abs"}   → Reply{}, 0, Reply{Capture}
//	{"op":"counters"}                               → Reply{Counters}
//	{"op":"record","every_ns":1000000}              → Reply{} (recording on the loops)
//	{"op":"recorded"}                               → Reply{Recorded, RecordDropped}
//	{"op":"record"}                                 → Reply{Recorded, RecordDropped} (stopped)

// Request is a control request.
type Request struct {
	Op      string `json:"op"`
	Port    string `json:"port,omitempty"`
	Snaplen int    `json:"snaplen,omitempty"`
	// File is an absolute path the lab writes a capture to.
	File string `json:"file,omitempty"`
	// Hosts and HoldNs are op "hold"'s: hold these hosts' RC and UC request packets
	// for HoldNs nanoseconds from now (at most MaxHold; 0 releases them).
	Hosts  []string `json:"hosts,omitempty"`
	HoldNs int64    `json:"hold_ns,omitempty"`
	// EveryNs is op "record"'s: record the counters every EveryNs nanoseconds on the
	// nodes' loops (MinRecordEvery to MaxRecordEvery), or stop (0).
	EveryNs int64 `json:"every_ns,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	Error    string         `json:"error,omitempty"`
	Status   *Status        `json:"status,omitempty"`
	Capture  *CaptureStatus `json:"capture,omitempty"`
	Counters *Counters      `json:"counters,omitempty"`
	// Held answers op "hold": for each host, whether the hold keeps back a request its
	// applications have posted (rnic.Device.RequestsHeld).
	Held map[string]bool `json:"held,omitempty"`
	// Recorded answers ops "recorded" and "record" (stop): the rows of counters
	// recorded since the last drain, oldest first, and how many were dropped
	// (MaxRecorded reached, or a node's loop never read its part).
	Recorded      []Counters `json:"recorded,omitempty"`
	RecordDropped uint64     `json:"record_dropped,omitempty"`
}

// MaxHold bounds op "hold": a hold whose holder died (a killed `rocelab experiment
// --lab`) lets the lab's flows go after this long.
const MaxHold = time.Minute

// Counters is what a sampler polls (op "counters"): the RDMA payload each host's
// soft-RNIC sent (what a flow moved: its sender's connection setup over the kernel's
// TCP, which crosses the same NIC, is not a flow's start)
// and each switch port's queue and bytes sent, read on their loops. A full status
// costs the lab about 600 µs of CPU (the state file, the topology's peers, every
// counter and QP, 13 KB of JSON for three hosts): polled every millisecond by
// `rocelab experiment --lab`, it took most of a core from the loop it measured.
type Counters struct {
	// TimeNs is the lab clock's time (ns since the lab started) when the (last)
	// switch's counters were read, just after the hosts': a sampler computes rates
	// over these times, not over when its replies arrived, which the control socket
	// and the sampler's own scheduling delay by varying amounts (two replies a few
	// microseconds apart after a stall would make a millisecond's bytes look like a
	// rate far above the link's).
	TimeNs   int64                     `json:"time_ns"`
	Hosts    map[string]uint64         `json:"hosts"`    // RDMA payload each host's RNIC sent (Stats.TxDataBytes)
	Received map[string]uint64         `json:"received"` // RDMA payload each host's QPs accepted (Stats.RxDataBytes)
	Switches map[string][]PortCounters `json:"switches"` // each switch's ports, by number
}

// PortCounters is one switch port's queue and bytes sent.
type PortCounters struct {
	QLen    int    `json:"qlen"`
	TxBytes uint64 `json:"tx_bytes"`
	// QueueArea is ∫ queue dt in byte·ns since the port started (fabric.Port.QueueArea):
	// between two reads, its difference over their interval is the time-averaged queue.
	QueueArea uint64 `json:"queue_area_byte_ns"`
}

// CaptureStatus is a capture's figures: every frame that crossed the port while it
// ran is either written to the file or counted as dropped (the writer fell
// capture.MonitorBacklog bytes behind: the reader, the disk or a core did not keep up).
type CaptureStatus struct {
	Running bool   `json:"running"`
	Frames  uint64 `json:"frames"`
	Dropped uint64 `json:"dropped"`
	Snaplen int    `json:"snaplen,omitempty"`
}

func captureStatus(s *capture.Session) *CaptureStatus {
	if s == nil {
		return nil
	}
	return &CaptureStatus{Running: s.Running(), Frames: s.Frames(), Dropped: s.Dropped(), Snaplen: s.Snaplen()}
}

// Status is a running lab's description and live counters (`rocelab status --json`).
type Status struct {
	Name              string         `json:"name"`
	Running           bool           `json:"running"`
	Pid               int            `json:"pid,omitempty"`
	Dir               string         `json:"state_dir"`
	Topology          string         `json:"topology,omitempty"`
	Telemetry         string         `json:"telemetry,omitempty"`
	CongestionControl string         `json:"congestion_control,omitempty"`
	Uptime            string         `json:"uptime,omitempty"`
	Hosts             []HostStatus   `json:"hosts"`
	Switches          []SwitchStatus `json:"switches,omitempty"`
	// Loops are the lab's event loops and how late each ran its timers.
	Loops []LoopStatus `json:"loops,omitempty"`
}

// LoopStatus is how late one of the lab's event loops (a node's, named after it) ran
// its timers since the lab came up (clock.Lateness). A loop that keeps up runs nearly
// all of them within microseconds; one the machine's cores cannot keep up with runs
// them milliseconds late, and the lab's timing — its round trips, its pacing, what
// congestion control sees — is then its CPU's, not its topology's.
type LoopStatus struct {
	Loop   string `json:"loop"`
	Timers uint64 `json:"timers"`
	// LateP50US and LateP99US bound the median and 99th-percentile lateness in µs
	// (the upper bound of the bucket holding it; LateOverUS for the last bucket).
	LateP50US float64 `json:"late_p50_us"`
	LateP99US float64 `json:"late_p99_us"`
	// LateBuckets count the timers run less than 1 µs late, 1–2 µs, 2–4 µs, and so on
	// doubling; the last, LateOverUS µs and more.
	LateBuckets []uint64 `json:"late_buckets"`
	// LateSumUS is the lateness of every timer summed, in µs (with Timers, the mean).
	LateSumUS float64 `json:"late_sum_us"`
	// MaxLagUS is how far, in µs, the loop may fall behind real time and still run
	// its events at their own times (clock.RealOptions.MaxLag): timers run later than
	// this ran late in the lab's time too.
	MaxLagUS float64 `json:"max_lag_us"`
}

// Lateness is s's counts as the clock keeps them.
func (s LoopStatus) Lateness() clock.Lateness {
	x := clock.Lateness{Loop: s.Loop, Sum: time.Duration(s.LateSumUS * 1e3), MaxLag: time.Duration(s.MaxLagUS * 1e3)}
	copy(x.Buckets[:], s.LateBuckets)
	return x
}

// LateOverUS is where the last lateness bucket starts, in µs.
var LateOverUS = float64(clock.LateBound(clock.LateBuckets-2) / time.Microsecond)

// loopStatuses reads the clock's lateness counters.
func loopStatuses(clk *clock.Real) []LoopStatus {
	if clk == nil {
		return nil
	}
	var out []LoopStatus
	for _, x := range clk.Lateness() {
		out = append(out, LoopStatus{Loop: x.Loop, Timers: x.Timers(), LateP50US: x.QuantileUS(0.5),
			LateP99US: x.QuantileUS(0.99), LateBuckets: x.Buckets[:], LateSumUS: float64(x.Sum) / 1e3, MaxLagUS: float64(x.MaxLag) / 1e3})
	}
	return out
}

// HostStatus is one host: the kernel's view (namespace, TAP, addresses) and its
// soft-RNIC's counters.
type HostStatus struct {
	Name  string `json:"name"`
	Netns string `json:"netns"`
	Tap   string `json:"tap"`
	// Bridge is the Linux bridge of an external host, where its VM or veth joins.
	Bridge string      `json:"bridge,omitempty"`
	IPv4   string      `json:"ipv4,omitempty"`
	IPv6   string      `json:"ipv6,omitempty"`
	MAC    string      `json:"mac"`
	RNIC   *rnic.Stats `json:"rnic,omitempty"`
	// Verbs counts the connections to the host's verbs service.
	Verbs *service.Stats `json:"verbs,omitempty"`
	// Link counts what the host sent into its link and the faults injected into it.
	Link *link.Stats `json:"link,omitempty"`
	// Capture is the port's running or last capture.
	Capture *CaptureStatus `json:"capture,omitempty"`
	// QPs are the soft-RNIC's queue pairs with their congestion control's state.
	QPs []QPStatus `json:"qps,omitempty"`
	// McastGroups are the multicast groups the soft-RNIC's QPs are attached to.
	McastGroups []McastGroupStatus `json:"mcast_groups,omitempty"`
}

// McastGroupStatus is one multicast group of a host: its GID (an IPv4 group as its
// dotted address) and the QPs attached to it.
type McastGroupStatus struct {
	GID string   `json:"gid"`
	QPs []uint32 `json:"qps"`
}

// mcastStatuses reads d's multicast groups; it runs on the device's loop.
func mcastStatuses(d *rnic.Device) []McastGroupStatus {
	var out []McastGroupStatus
	for _, g := range d.McastGroups() {
		s := McastGroupStatus{GID: g.GID.Addr().String()}
		for _, q := range g.QPs {
			s.QPs = append(s.QPs, uint32(q))
		}
		out = append(out, s)
	}
	return out
}

// QPStatus is one queue pair: its paced rate and window as congestion control set
// them (null when unpaced or unlimited), and HPCC++'s U (normalized inflight of the
// most loaded hop) under the HPCC modes.
type QPStatus struct {
	QPN           uint32   `json:"qpn"`
	State         string   `json:"state"`
	RateBps       *float64 `json:"rate_bps"`
	WindowBytes   *float64 `json:"window_bytes"`
	InFlightBytes uint64   `json:"inflight_bytes"`
	HPCCU         *float64 `json:"hpcc_u,omitempty"`
}

// qpStatuses reads d's queue pairs; it runs on the device's loop.
func qpStatuses(d *rnic.Device) []QPStatus {
	var out []QPStatus
	finite := func(v float64) *float64 {
		if math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	for _, x := range d.QPs() {
		rate, window := x.Rate()
		q := QPStatus{QPN: uint32(x.QPN()), State: x.State().String(), RateBps: finite(rate), WindowBytes: finite(window),
			InFlightBytes: x.InFlightBytes()}
		if st, ok := x.HPCC(); ok {
			q.HPCCU = &st.U
		}
		out = append(out, q)
	}
	return out
}

// countedService is a host service that counts its connections: the verbs service.
type countedService interface{ Stats() service.Stats }

// SwitchStatus is one switch's ports.
type SwitchStatus struct {
	Name  string       `json:"name"`
	Ports []PortStatus `json:"ports"`
}

// PortStatus is one switch port: where it leads and its counters.
type PortStatus struct {
	Port  string           `json:"port"` // s1:p3
	Peer  string           `json:"peer"` // the node at the link's far end
	Rate  string           `json:"rate"`
	Stats fabric.PortStats `json:"stats"`
	// Link counts what the port sent into its link and the faults injected into it.
	Link link.Stats `json:"link"`
	// Capture is the port's running or last capture.
	Capture *CaptureStatus `json:"capture,omitempty"`
}

func (l *Lab) listenControl() error {
	path := ControlPath(l.cfg.Store, l.cfg.Name)
	if err := l.cfg.Store.Update(l.cfg.Name, func(r *netns.Lab) error {
		r.Sockets = append(r.Sockets, path)
		return nil
	}); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("lab: control socket: %w", err)
	}
	// bind(2) gives the socket 0777 less the umask; the state directory (0700) already
	// keeps others out, and the socket's own mode says the same.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("lab: control socket: %w", err)
	}
	l.ctl = ln
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		// Out of descriptors (EMFILE), accept fails until some are closed: back off
		// and go on, as the verbs service does, rather than leave status unanswered
		// for the rest of the lab's life.
		var backoff time.Duration
		for {
			c, err := ln.AcceptUnix()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				if backoff = min(max(2*backoff, 5*time.Millisecond), time.Second); backoff == 5*time.Millisecond {
					l.log.Warn("control socket: accept failed (backing off)", zap.Error(err))
				}
				time.Sleep(backoff)
				continue
			}
			backoff = 0
			go l.serve(c)
		}
	}()
	return nil
}

// controlTimeout bounds how long a control client may take to send its request, and
// to read a reply (a capture's stream excepted).
const controlTimeout = 5 * time.Second

// QueryTimeout bounds a control call (Query) from dialling to its reply: a lab that
// cannot answer a status in this long is wedged or starved, and its caller should say
// so instead of hanging. (A variable: tests shorten it.)
var QueryTimeout = 15 * time.Second

func (l *Lab) serve(c *net.UnixConn) {
	defer c.Close()
	// The request is read (bounded in size and time) before the peer check, so that a
	// refused client reads its refusal instead of a broken pipe on its write.
	c.SetReadDeadline(time.Now().Add(controlTimeout))
	var req Request
	reqErr := json.NewDecoder(bufio.NewReader(io.LimitReader(c, 4096))).Decode(&req)
	if err := controlPeerAllowed(c); err != nil {
		l.log.Warn("control socket: peer refused", zap.Error(err))
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if reqErr != nil {
		writeReply(c, Reply{Error: "bad request: " + reqErr.Error()})
		return
	}
	if req.Op != "capture" { // a client that stops reading must not hold this goroutine
		c.SetWriteDeadline(time.Now().Add(controlTimeout))
	}
	switch req.Op {
	case "status":
		st := l.Status()
		writeReply(c, Reply{Status: &st})
	case "counters":
		cs := l.Counters()
		writeReply(c, Reply{Counters: &cs})
	case "capture":
		l.serveCapture(c, req)
	case "hold":
		held, err := l.Hold(req.Hosts, time.Duration(req.HoldNs))
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		writeReply(c, Reply{Held: held})
	case "record", "recorded":
		var rows []Counters
		var dropped uint64
		var err error
		if req.Op == "record" {
			rows, dropped, err = l.Record(time.Duration(req.EveryNs))
		} else {
			rows, dropped, err = l.Recorded()
		}
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		writeReply(c, Reply{Recorded: rows, RecordDropped: dropped})
	default:
		writeReply(c, Reply{Error: fmt.Sprintf("unknown op %q: want status, counters, record, recorded, capture or hold", req.Op)})
	}
}

// Hold holds the named hosts' RC and UC request packets for d from now, or releases
// them (d = 0) releaseLead from now (rnic.Device.HoldRequests), and reports for each
// whether the hold keeps back a request already posted. `rocelab experiment --lab`
// holds the senders while their applications start, polls until every one has
// posted, then releases them together.
//
// Every host gets the same deadline, read once from the lab's clock: the hosts are
// reached one loop call after another, and a release "now" on each let a host
// reached a few milliseconds later (a loaded machine) start that much later. A
// release reaching a host after its deadline is an error that says by how much.
func (l *Lab) Hold(hosts []string, d time.Duration) (map[string]bool, error) {
	if d < 0 || d > MaxHold {
		return nil, fmt.Errorf("hold for %v: want 0 (release) up to %v", d, MaxHold)
	}
	var devs []*network.Host
	for _, name := range hosts {
		h := l.Network.Host(name)
		if h == nil {
			return nil, fmt.Errorf("hold: no host %q in lab %s", name, l.Name())
		}
		devs = append(devs, h)
	}
	lead := d
	if d == 0 {
		lead = releaseLead
	}
	until := l.clk.Now().Add(lead)
	type answer struct {
		held bool
		late time.Duration
	}
	held := map[string]bool{}
	var late []string
	for _, h := range devs {
		ch := make(chan answer, 1)
		h.Device.Do(func() {
			h.Device.HoldRequests(until)
			ch <- answer{h.Device.RequestsHeld(), time.Duration(h.Device.Now() - until)}
		})
		select {
		case a := <-ch:
			held[h.Name] = a.held
			if d == 0 && a.late > 0 {
				late = append(late, fmt.Sprintf("%s %v late", h.Name, a.late))
			}
		case <-time.After(2 * time.Second):
			return nil, fmt.Errorf("hold: host %s's loop did not answer", h.Name)
		}
	}
	if len(late) > 0 {
		return held, fmt.Errorf("hold: released %s after the common start (%v after the call): %s",
			strings.Join(hosts, ", "), releaseLead, strings.Join(late, ", "))
	}
	return held, nil
}

// releaseLead is how far ahead of the call Hold releases its hosts: room for a loop
// call per host on a loaded machine (each takes microseconds on a quiet one).
const releaseLead = 20 * time.Millisecond

// controlPeerAllowed admits the lab's own user and root (SO_PEERCRED), whatever the
// socket's mode: a lab's control socket captures every frame of the lab.
func controlPeerAllowed(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && cred.Uid != uint32(os.Getuid()) {
		return fmt.Errorf("uid %d may not use this lab's control socket (only its owner, uid %d, and root)", cred.Uid, os.Getuid())
	}
	return nil
}

func writeReply(w io.Writer, r Reply) error {
	b, _ := json.Marshal(r)
	_, err := w.Write(append(b, '\n'))
	return err
}

func (l *Lab) serveCapture(c net.Conn, req Request) {
	m, err := l.monitor(req.Port)
	if err != nil {
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if req.Snaplen < 0 {
		writeReply(c, Reply{Error: fmt.Sprintf("snaplen %d: want 0 (whole frames) or more", req.Snaplen)})
		return
	}
	var out io.Writer = chunkWriter{c}
	if req.File != "" {
		if !filepath.IsAbs(req.File) {
			writeReply(c, Reply{Error: fmt.Sprintf("capture file %q: want an absolute path", req.File)})
			return
		}
		f, err := os.Create(req.File)
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		defer f.Close()
		out = f
	}
	s, err := m.Start(out, l.epoch, req.Snaplen)
	if err != nil {
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if err := writeReply(c, Reply{}); err != nil {
		s.Stop()
		return
	}
	// The client ends a capture by shutting down its side: a read then ends.
	go func() {
		io.Copy(io.Discard, c)
		s.Stop()
	}()
	<-s.Done()
	err = s.Stop()
	l.log.Info("capture ended", zap.String("port", req.Port), zap.Uint64("frames", s.Frames()),
		zap.Uint64("dropped", s.Dropped()), zap.Error(err))
	// The figures end the stream; after a failed write to the connection they reach
	// nobody, but a failed file (disk full) is reported.
	reply := Reply{Capture: captureStatus(s)}
	if err != nil {
		reply.Error = err.Error()
	}
	if _, err := c.Write(make([]byte, 4)); err == nil {
		writeReply(c, reply)
	}
}

// chunkWriter frames a capture's pcapng stream on the control connection: each write
// is one chunk, its 4-byte big-endian length first (the writer batches, so chunks are
// large); a zero length ends the stream.
type chunkWriter struct{ w io.Writer }

func (c chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(p)))
	if _, err := c.w.Write(n[:]); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// ReadCapture copies the chunked pcapng stream of a capture connection (Query with
// op "capture") to w, then returns the lab's closing figures. It returns early with
// w's error, or with an error saying the stream ended without figures.
func ReadCapture(c net.Conn, w io.Writer) (*CaptureStatus, int64, error) {
	r := bufio.NewReaderSize(c, 1<<20)
	var total int64
	var n [4]byte
	for {
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, total, fmt.Errorf("capture stream ended without the lab's figures: %w", err)
		}
		size := int64(binary.BigEndian.Uint32(n[:]))
		if size == 0 {
			break
		}
		copied, err := io.CopyN(w, r, size)
		total += copied
		if err != nil {
			return nil, total, err
		}
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, total, fmt.Errorf("capture: the lab's figures: %w", err)
	}
	var reply Reply
	if err := json.Unmarshal(line, &reply); err != nil || reply.Capture == nil {
		return nil, total, fmt.Errorf("capture: the lab's figures: %q", line)
	}
	if reply.Error != "" {
		return reply.Capture, total, fmt.Errorf("capture: %s (%d frames written, %d dropped)", reply.Error, reply.Capture.Frames, reply.Capture.Dropped)
	}
	return reply.Capture, total, nil
}

// monitor finds the capture point named like "s1:p3" or "h1".
func (l *Lab) monitor(name string) (*capture.Monitor, error) {
	node, port, err := splitPort(name)
	if err != nil {
		return nil, err
	}
	if h := l.Network.Host(node); h != nil {
		if port != 0 {
			return nil, fmt.Errorf("host %s has one port, p0", node)
		}
		return h.Monitor, nil
	}
	if x := l.Network.External(node); x != nil {
		if port != 0 {
			return nil, fmt.Errorf("host %s has one port, p0", node)
		}
		return x.Monitor, nil
	}
	s := l.Network.Switch(node)
	if s == nil {
		return nil, fmt.Errorf("no node %q in lab %s", node, l.cfg.Name)
	}
	if port >= len(s.Monitors) {
		return nil, fmt.Errorf("switch %s has ports p0–p%d, not p%d", node, len(s.Monitors)-1, port)
	}
	return s.Monitors[port], nil
}

// Status returns the lab's description with counters read on each node's loop.
func (l *Lab) Status() Status {
	rec, err := l.cfg.Store.Load(l.cfg.Name)
	st := Status{Name: l.cfg.Name, Running: true, Pid: os.Getpid(), Dir: l.Dir(), Topology: l.cfg.TopologyFile,
		Telemetry: l.cfg.Topology.Telemetry, CongestionControl: l.cfg.Topology.CongestionControl,
		Uptime: time.Since(l.started).Round(time.Millisecond).String()}
	if err == nil {
		st.Hosts = hostStatuses(rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i := range st.Hosts {
		h := l.Network.Host(st.Hosts[i].Name)
		if h == nil {
			continue
		}
		if svc, ok := l.services[h.Name].(countedService); ok {
			vs := svc.Stats()
			st.Hosts[i].Verbs = &vs
		}
		type hostCounters struct {
			rnic rnic.Stats
			link link.Stats
			qps  []QPStatus
			mc   []McastGroupStatus
		}
		ch := make(chan hostCounters, 1)
		h.Device.Do(func() {
			ch <- hostCounters{h.Device.Stats(), *h.Link.Stats(), qpStatuses(h.Device), mcastStatuses(h.Device)}
		})
		select {
		case c := <-ch:
			st.Hosts[i].RNIC, st.Hosts[i].Link, st.Hosts[i].QPs, st.Hosts[i].McastGroups = &c.rnic, &c.link, c.qps, c.mc
		case <-ctx.Done():
		}
		if h.Monitor != nil {
			st.Hosts[i].Capture = captureStatus(h.Monitor.Last())
		}
	}
	peers := Peers(l.cfg.Topology)
	for _, s := range l.Network.Switches {
		ch := make(chan []PortStatus, 1)
		l.inboxes[s.Name].Do(func() {
			var ps []PortStatus
			for i, p := range s.Switch.Ports() {
				ps = append(ps, PortStatus{Stats: p.Stats(), Link: *s.Links[i].Stats()})
			}
			ch <- ps
		})
		ss := SwitchStatus{Name: s.Name}
		select {
		case ps := <-ch:
			for i, p := range ps {
				pe := peers[s.Name][i]
				p.Port, p.Peer, p.Rate = fmt.Sprintf("%s:p%d", s.Name, i), pe.Name, topo.FormatRate(pe.Rate)
				if i < len(s.Monitors) {
					p.Capture = captureStatus(s.Monitors[i].Last())
				}
				ss.Ports = append(ss.Ports, p)
			}
		case <-ctx.Done():
		}
		st.Switches = append(st.Switches, ss)
	}
	st.Loops = loopStatuses(l.clk)
	return st
}

func newCounters() Counters {
	return Counters{Hosts: map[string]uint64{}, Received: map[string]uint64{}, Switches: map[string][]PortCounters{}}
}

// Counters reads the hosts' and switch ports' byte counters and queues on their loops
// (one task per node), for a sampler.
func (l *Lab) Counters() Counters {
	cs := newCounters()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range l.Network.Hosts {
		ch := make(chan rnic.Stats, 1)
		h.Device.Do(func() { ch <- h.Device.Stats() })
		select {
		case st := <-ch:
			cs.Hosts[h.Name], cs.Received[h.Name] = st.TxDataBytes, st.RxDataBytes
		case <-ctx.Done():
		}
	}
	type read struct {
		ports []PortCounters
		at    clock.Time
	}
	for _, s := range l.Network.Switches {
		ch := make(chan read, 1)
		l.inboxes[s.Name].Do(func() { ch <- read{portCounters(s), l.clk.Now()} })
		select {
		case r := <-ch:
			cs.Switches[s.Name], cs.TimeNs = r.ports, int64(r.at)
		case <-ctx.Done():
		}
	}
	return cs
}

// portCounters reads a switch's ports' queues and bytes sent, on its loop: what op
// "counters" and the recorder take of a switch.
func portCounters(s *network.Switch) []PortCounters {
	ports := make([]PortCounters, 0, len(s.Switch.Ports()))
	now := s.Loop.Now()
	for _, p := range s.Switch.Ports() {
		st := p.Stats()
		ports = append(ports, PortCounters{QLen: st.QLen, TxBytes: st.TxBytes, QueueArea: p.QueueArea(now)})
	}
	return ports
}

// StatusFromRecord describes a lab from its state file alone: what `rocelab status`
// shows of a lab whose process is gone (crashed: `rocelab clean` removes it).
func StatusFromRecord(store netns.Store, rec *netns.Lab) Status {
	return Status{Name: rec.Name, Running: rec.Running(), Pid: rec.Owner.PID, Dir: store.Dir(rec.Name), Hosts: hostStatuses(rec)}
}

func hostStatuses(rec *netns.Lab) []HostStatus {
	var out []HostStatus
	for _, h := range rec.Hosts {
		hs := HostStatus{Name: h.Name, Netns: h.Netns, Tap: h.Tap, MAC: h.MAC, Bridge: h.Bridge}
		if h.IPv4.IsValid() {
			hs.IPv4 = h.IPv4.Addr().String()
		}
		if h.IPv6.IsValid() {
			hs.IPv6 = h.IPv6.Addr().String()
		}
		out = append(out, hs)
	}
	return out
}

// Peer is the far end of a node's port and the link's rate.
type Peer struct {
	Name string
	Rate uint64
}

// Peers lists, per node, the far end of each port in port order: a switch's port i
// (s1:pi) is its i-th link in the topology. A replay of an experiment (web) names
// ports as the lab does through it.
func Peers(t *topo.Topology) map[string][]Peer {
	out := map[string][]Peer{}
	for _, lk := range t.Links {
		a, b := lk.Endpoints[0], lk.Endpoints[1]
		out[a] = append(out[a], Peer{b, lk.Rate})
		out[b] = append(out[b], Peer{a, lk.Rate})
	}
	return out
}

// Query sends req to lab's control socket and returns the reply; for "capture" the
// connection stays open for the stream and is returned too (the caller closes it).
func Query(store netns.Store, lab string, req Request) (Reply, *Stream, error) {
	c, err := net.DialTimeout("unix", ControlPath(store, lab), QueryTimeout)
	if err != nil {
		return Reply{}, nil, fmt.Errorf("lab %s: control socket: %w", lab, err)
	}
	c.SetDeadline(time.Now().Add(QueryTimeout))
	r, s, err := query(c, lab, req)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("lab %s: no answer to %q within %v: the lab process is wedged or starved (its log: %s)",
			lab, req.Op, QueryTimeout, filepath.Join(store.Dir(lab), "lab.log"))
	}
	if s != nil {
		c.SetDeadline(time.Time{}) // a capture's stream runs until its caller ends it
	}
	return r, s, err
}

func query(c net.Conn, lab string, req Request) (Reply, *Stream, error) {
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		c.Close()
		return Reply{}, nil, err
	}
	// The reply is one line; what follows it (a capture's pcapng) is read through the
	// same buffer. Read a byte at a time, a drain of 20 rows of `record` was 3,000
	// system calls in a process that shares the lab's two cores.
	br := bufio.NewReaderSize(c, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxReplyLine {
			c.Close()
			return Reply{}, nil, errors.New("control reply too long")
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			c.Close()
			return Reply{}, nil, fmt.Errorf("lab %s: control reply: %w", lab, err)
		}
	}
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		c.Close()
		return Reply{}, nil, fmt.Errorf("lab %s: control reply: %w", lab, err)
	}
	if r.Error != "" {
		c.Close()
		return r, nil, fmt.Errorf("lab %s: %s", lab, r.Error)
	}
	if req.Op != "capture" {
		c.Close()
		return r, nil, nil
	}
	return r, &Stream{c.(*net.UnixConn), br}, nil
}

// maxReplyLine bounds a control reply that Query reads.
const maxReplyLine = 16 << 20

// Stream is the connection of a "capture" after its reply: reads go through the
// buffer that read the reply line, and CloseWrite (of the embedded connection) asks
// the lab to end the capture.
type Stream struct {
	*net.UnixConn
	r *bufio.Reader
}

// Read reads the capture's pcapng bytes as they arrive.
func (s *Stream) Read(p []byte) (int, error) { return s.r.Read(p) }
