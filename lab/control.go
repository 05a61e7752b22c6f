package lab

import (
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
)

// The control protocol is HTTP/1.1 on the lab's control socket (ControlPath; the
// client side is control_client.go, the server control_server.go): each op is a POST
// to /OP whose body is a JSON Request (its Op field is the path's) and whose answer is
// a JSON Reply. A refused request is an HTTP error status with a Reply whose Error
// names the problem: 400 a bad request or one the lab refuses (no such host, port or
// hold), 403 a peer other than the lab's owner or root, 404 an unknown op, 405 a
// method other than POST, 413 a body over 4 KiB.
//
//	POST /status                                   → Reply{Status} (with the other parts')
//	POST /down-parts                               → Reply{Told, Unreachable}
//	POST /counters                                 → Reply{Counters}
//	POST /record    {"every_ns":1000000}           → Reply{} (recording on the loops)
//	POST /recorded                                 → Reply{Recorded, RecordDropped}
//	POST /record                                   → Reply{Recorded, RecordDropped} (stopped)
//	POST /hold      {"hosts":["h1"],"hold_ns":N}   → Reply{Held}
//	POST /capture   {"port":"s1:p3","snaplen":128} → pcapng body, trailer Rocelab-Capture
//	POST /capture   {"port":"s1:p3","file":"/abs"} → empty body, trailer Rocelab-Capture
//
// A capture's request body stays open while it runs (the exchange is full duplex):
// the client ends the capture by ending its body; the lab then sends the rest of the
// stream and the capture's figures as the trailer CaptureTrailer (a JSON Reply with
// Capture). With "file", the lab writes the pcapng to that file itself (one copy of
// each frame fewer, and no second process to keep up).

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
	// Told and Unreachable answer op "down-parts": the other parts asked to remove
	// themselves, and those that could not be asked.
	Told        []string `json:"told,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
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
	// Parts is set in a lab over several machines: this part's machine, the other
	// parts' state and statuses, and the tunnels between them.
	Parts *PartsStatus `json:"parts,omitempty"`
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
