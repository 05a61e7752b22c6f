package rnic

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/rocelab/rocelab/rnic/ibv"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/probe"
)

// Device limits (ibv_device_attr): ibv's.
const (
	MaxQP   = ibv.MaxQP
	MaxWR   = ibv.MaxWR
	MaxSGE  = ibv.MaxSGE
	MaxCQE  = ibv.MaxCQE
	firstQP = 0x11 // rxe hands out QPNs from 17: 0 and 1 are the special QPs
)

// Config describes a soft-RNIC.
type Config struct {
	// Name names the device (rxe0, h1, ...) in errors and diagnostics.
	Name string
	// MAC is the port's Ethernet address.
	MAC [6]byte
	// GIDs are the port's addresses (IPv4 and IPv6), in GID table order. The device
	// answers ARP and NDP for every one of them.
	GIDs []netip.Addr
	// Loop is the device's event loop; every verbs call and every frame runs on it.
	Loop clock.Loop
	// Link is the port's link; Open attaches the device to it.
	Link link.Endpoint
	// Pool supplies the frames the device transmits; size it for the link's MTU.
	Pool *link.Pool
	// CC is the congestion control of the device's QPs unless a QP overrides it.
	CC CC
	// TxLookahead lets the port hand frames to the link up to this much before their
	// serialization starts, so that a real-time run wakes once per batch instead of
	// once per frame. 0 (the virtual-time default) decides every frame at its time.
	TxLookahead time.Duration
	// MaxUnackedPSNs is every RC QP's qp.Config.MaxUnackedPSNs: 0 for no bound
	// beyond congestion control's window; qp.RXEMaxUnackedPSNs on paths that drop
	// bursts (the real-time lab's, through kernels and VMs).
	MaxUnackedPSNs int
	// RXERetryCnt is every QP's qp.Config.RXERetryCnt: retry_cnt 7 retries forever,
	// as in rxe, instead of IBTA's 7 retries.
	RXERetryCnt bool
	// Arbitration is how the scheduler shares the port among QPs with data: packet
	// round robin (the zero value) or deficit weighted round robin by QP weight.
	Arbitration Arbitration
	// Host, if set, receives the frames the device does not terminate (not RoCEv2 for
	// one of its GIDs): the lab's relay to the host's TAP netdev. The device then
	// leaves ARP and NDP to the host's kernel, learning neighbours from them.
	Host link.Receiver
	// AsyncHandler, if set, receives asynchronous events on the loop instead of
	// GetAsyncEvent.
	AsyncHandler func(AsyncEvent)
	// Neighbours, if set, is a static neighbour table (IP address, IPv4 unmapped, to
	// MAC) the device consults after its own cache, read-only: one table can serve
	// every device of a lab instead of a copy per device (a million entries in each of
	// a 1,024-host lab's devices otherwise).
	Neighbours map[netip.Addr][6]byte
	// PayloadFree makes the device a simulation of one that moves no data: RegMR
	// registers a length without memory (reads leave the frame's payload bytes as
	// the pool left them, writes store nothing, atomics fail), frames are built
	// without an ICRC and received without checking it. Every length, PSN, header
	// and telemetry hop is as in a real run, so queues, rates and completions are
	// identical; only the data is not there. For virtual-time experiments that do not
	// verify data (experiment.Config.Verify).
	PayloadFree bool
	// RandomIDs draws each MR key's variant byte and the first QPN from the system's
	// random source (crypto/rand), as rxe draws its key byte at random: a lab's peers
	// cannot guess an rkey or a QPN to forge a frame with. false keeps both
	// deterministic (virtual time: byte-identical runs).
	RandomIDs bool
	// OnPanic hears the device's first contained panic: a received frame whose
	// handling panicked was dropped and counted in Stats.Panics, and the device went
	// on. Later panics are only counted. nil: counted only.
	OnPanic func(v any, stack []byte)
}

// Device is an open soft-RNIC (ibv_context): its verbs objects, its port and its
// pipelines. Create it with Open.
type Device struct {
	cfg     Config
	loop    clock.Loop
	port    port
	sched   scheduler
	neigh   neighbours
	qps     map[roce.QPN]*QP
	xrcds   map[XRCDFile]*xrcDomain // the shared XRC domains, by file (xrc.go)
	xsrqs   map[uint32]*SRQ         // the XRC SRQs, by SRQ number
	nextSRQ uint32
	mcast   mcastGroups // multicast groups with their attached QPs (mcast.go)
	active  []*QP       // QPs in creation order: the scheduler's round-robin ring
	nextQPN roce.QPN
	nextKey uint32
	pds     int
	async   chan AsyncEvent
	closed  bool
	stats   Stats
	tel     *telemetryCodecs
	// holdUntil holds RC and UC request packets until this time (HoldRequests).
	holdUntil clock.Time

	// rxNow is when the batch of frames the Rx pipeline is handling arrived (its last
	// frame; one clock read per batch, not per frame): the time every frame of it is
	// handled at. On the real-time clock a loop that wakes late handles a batch after
	// it arrived; what the batch makes sendable (ACKs, responses, the requests its
	// ACKs admit) is then timed from the arrival while receiving is set, so that the
	// next link's delay absorbs the loop's lateness instead of every round trip
	// through the device adding it (HPCC's window, sized for the base RTT, stalled on
	// it: docs/rnic.md). In virtual time a batch is handled when it arrives.
	rxNow     clock.Time
	receiving bool

	// Scratch of the pipelines, reused for every frame so that nothing allocates.
	rxPkt     roce.Packet
	ctl       roce.Builder
	rxStack   telemetry.Stack
	probeReq  probe.Request
	probeResp probe.Response
	body      [probe.ResponseSize + probe.MaxRecords*probe.RecordSize]byte
	hostBatch [1]*link.Frame
	host      hostRelay
	gsi       gsi
	cm        cmAgent
	// CQs whose armed event is due; announced when the current event is done.
	pendingCQs []*CQ
	notifying  bool
	refilling  bool // a QP's RecvRefill runs: PostRecv leaves settling to the packet

	// Do's hand-over from other goroutines.
	calls *clock.Inbox
}

// Stats counts what a device did and dropped.
type Stats struct {
	TxFrames          uint64 `json:"tx_frames"`
	TxBytes           uint64 `json:"tx_bytes"`
	TxDataBytes       uint64 `json:"tx_data_bytes"` // RDMA payload of the SEND and RDMA WRITE packets sent (resends included)
	RxFrames          uint64 `json:"rx_frames"`
	RxBytes           uint64 `json:"rx_bytes"`
	RxDataBytes       uint64 `json:"rx_data_bytes"` // RDMA payload of the SEND and RDMA WRITE packets its QPs accepted
	RxMalformed       uint64 `json:"rx_malformed"`  // frames that failed to parse or carried bad telemetry
	RxBadICRC         uint64 `json:"rx_bad_icrc"`
	RxUnknownQP       uint64 `json:"rx_unknown_qp"`       // RoCEv2 packets for a QPN the device does not have
	RxMcastDropped    uint64 `json:"rx_mcast_dropped"`    // RoCEv2 multicast packets for a group no QP is attached to, or not to QPN 0xFFFFFF
	RxNotForUs        uint64 `json:"rx_not_for_us"`       // frames the device does not terminate and has no host for
	TxTelemetryErrors uint64 `json:"tx_telemetry_errors"` // telemetry a frame could not carry (sent without it)
	ProbesSent        uint64 `json:"probes_sent"`
	ProbeResponses    uint64 `json:"probe_responses"` // telemetry responses and Rx-HPCC window updates sent
	CNPsSent          uint64 `json:"cnps_sent"`
	CNPsRcvd          uint64 `json:"cnps_rcvd"`
	ARPReplies        uint64 `json:"arp_replies"`
	ARPReqs           uint64 `json:"arp_reqs"`
	NeighboursFull    uint64 `json:"neighbours_full"` // ARP/NDP senders not learned: the neighbour table was full
	AsyncEvents       uint64 `json:"async_events"`
	AsyncEventsLost   uint64 `json:"async_events_lost"`
	LoopbackFrames    uint64 `json:"loopback_frames"` // frames sent to the device's own MAC and received by it (in TxFrames and RxFrames too)
	LoopbackBytes     uint64 `json:"loopback_bytes"`
	HostFrames        uint64 `json:"host_frames"`    // frames the host's kernel sent through the device (SendFromHost)
	HostDropped       uint64 `json:"host_dropped"`   // of those, dropped: backlog full or frame too long
	Panics            uint64 `json:"panics"`         // received frames dropped because handling them panicked (a bug)
	CMSent            uint64 `json:"cm_sent"`        // CM MADs sent on the GSI QP (retries included)
	CMRcvd            uint64 `json:"cm_rcvd"`        // CM MADs received
	CMRetries         uint64 `json:"cm_retries"`     // REQ, REP and DREQ resent for want of an answer
	CMMalformed       uint64 `json:"cm_malformed"`   // GSI packets that are not valid CM MADs
	CMUnhandled       uint64 `json:"cm_unhandled"`   // CM MADs for no known connection, or of a kind the agent ignores
	CMSendErrors      uint64 `json:"cm_send_errors"` // CM MADs that could not be built (no frame buffer)
}

// Open creates the device and attaches it to its link.
func Open(cfg Config) (*Device, error) {
	switch {
	case cfg.Loop == nil || cfg.Link == nil || cfg.Pool == nil:
		return nil, errorf(ErrInvalidArgument, "device %q needs a loop, a link and a frame pool", cfg.Name)
	case len(cfg.GIDs) == 0:
		return nil, errorf(ErrInvalidArgument, "device %q has no GID (IP address)", cfg.Name)
	}
	if cfg.MaxUnackedPSNs < 0 {
		return nil, errorf(ErrInvalidArgument, "device %q: MaxUnackedPSNs %d is negative", cfg.Name, cfg.MaxUnackedPSNs)
	}
	tel, err := newTelemetryCodecs(cfg.CC.Telemetry, cfg.PayloadFree)
	if err != nil {
		return nil, err
	}
	if err := cfg.CC.check(); err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, loop: cfg.Loop, qps: make(map[roce.QPN]*QP), xrcds: map[XRCDFile]*xrcDomain{}, xsrqs: map[uint32]*SRQ{}, mcast: make(mcastGroups), nextQPN: firstQP,
		async: make(chan AsyncEvent, 64), tel: tel}
	if cfg.RandomIDs {
		d.nextQPN = firstQP + roce.QPN(randomUint32()%uint32(roce.QPNMask-firstQP)) // below 0xFFFFFF, multicast's
	}
	d.calls = clock.NewInbox(cfg.Loop)
	d.neigh.init()
	d.port.init(d)
	d.sched.init(d)
	d.host.init(d)
	d.cm.init(d)
	cfg.Link.Attach(cfg.Loop, &d.port)
	return d, nil
}

// Do runs fn on the device's loop: the way another goroutine makes verbs calls. It
// is safe from any goroutine and returns at once; fn runs after the events already
// due, and calls from one goroutine run in order. Only this hand-over takes a lock:
// the loop's own work never does.
func (d *Device) Do(fn func()) { d.calls.Do(fn) }

// Now returns the device loop's time.
func (d *Device) Now() clock.Time { return d.loop.Now() }

// Name returns the device's name.
func (d *Device) Name() string { return d.cfg.Name }

// Stats returns the device's counters.
func (d *Device) Stats() Stats { return d.stats }

// HoldRequests keeps the device's RC and UC QPs from sending request packets until
// its clock reaches until, or until called again with a time already past (0 releases
// at once). Everything else goes on: responses and ACKs, UD (the CM's GSI QP
// included), probes, the host's kernel traffic. A lab uses it to start several
// hosts' flows together: their applications connect and post at different moments,
// tens of milliseconds apart, and an incast whose senders start that far apart is
// not one. The deadline releases a hold whose holder went away. Call it on the
// device's loop (Do).
func (d *Device) HoldRequests(until clock.Time) {
	d.holdUntil = until
	d.sched.kick()
}

// RequestsHeld reports whether a hold (HoldRequests) is keeping back a request that an
// RC or UC QP would otherwise send now: its application has posted.
func (d *Device) RequestsHeld() bool {
	if d.holdUntil <= d.loop.Now() {
		return false
	}
	for _, x := range d.active {
		if held(x) && x.q.HasRequest() {
			return true
		}
	}
	return false
}

// held reports whether x is a QP a device's hold applies to.
func held(x *QP) bool { t := x.q.Type(); return t == qp.RC || t == qp.UC }

// QPs returns the device's queue pairs in QPN order.
func (d *Device) QPs() []*QP {
	out := make([]*QP, 0, len(d.qps))
	for _, x := range d.qps {
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b *QP) int { return cmp.Compare(a.QPN(), b.QPN()) })
	return out
}

// Close closes the device (ibv_close_device): no new objects can be created.
func (d *Device) Close() { d.closed = true }

// DeviceAttr is what QueryDevice reports: ibv.DeviceAttr.
type DeviceAttr = ibv.DeviceAttr

// QueryDevice reports the device's limits (ibv_query_device).
func (d *Device) QueryDevice() DeviceAttr {
	m := d.cfg.MAC
	// The EUI-64 from the MAC, as rxe derives its node GUID.
	guid := uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xFF<<32 | 0xFE<<24 |
		uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
	return DeviceAttr{FWVer: "rocelab", NodeGUID: guid, MaxQP: MaxQP, MaxQPWR: MaxWR, MaxSGE: MaxSGE,
		MaxCQE: MaxCQE, MaxQPRdAtom: qp.MaxRdAtomicLimit, MaxQPInitRdAtm: qp.MaxRdAtomicLimit, PhysPortCnt: 1}
}

// PortAttr is what QueryPort reports: ibv.PortAttr.
type PortAttr = ibv.PortAttr

// MaxMsgSize is the port's max_msg_sz, rxe's (RXE_PORT_MAX_MSG_SZ, 8 MiB).
const MaxMsgSize = 1 << 23

// activeMTU is the largest IBTA MTU whose RoCEv2 packets fit the link's MTU.
func (d *Device) activeMTU() roce.MTU { return roce.MTUForLinkMTU(d.cfg.Link.MTU()) }

// QueryPort reports port 1 (ibv_query_port); other port numbers are an error.
func (d *Device) QueryPort(port uint8) (PortAttr, error) {
	if port != 1 {
		return PortAttr{}, errorf(ErrInvalidArgument, "port %d: the device has port 1 only", port)
	}
	// As rxe: the largest IBTA MTU is the port's maximum, the link's MTU sets the
	// active one; a path MTU above the active one is clamped to it (ModifyQP).
	return PortAttr{State: "ACTIVE", MaxMTU: roce.MTU4096, ActiveMTU: d.activeMTU(), GIDTableLen: len(d.cfg.GIDs),
		Rate: d.cfg.Link.Rate(), LinkLayer: "Ethernet", MaxMsgSize: MaxMsgSize}, nil
}

// QueryGID returns GID index of port 1 (ibv_query_gid).
func (d *Device) QueryGID(index int) (roce.GID, error) {
	if index < 0 || index >= len(d.cfg.GIDs) {
		return roce.GID{}, errorf(ErrInvalidArgument, "GID index %d: the table holds %d", index, len(d.cfg.GIDs))
	}
	return roce.GIDFromAddr(d.cfg.GIDs[index]), nil
}

// gidFor returns the device's first GID of the same IP version and, for IPv6, the same
// scope (link-local or not) as dst: with rxe's table (fe80::, ::ffff:a.b.c.d, global
// IPv6) a global destination gets the global source, as the kernel would choose.
func (d *Device) gidFor(dst roce.GID) (roce.GID, error) {
	da := dst.Addr().Unmap()
	var fallback netip.Addr
	for _, a := range d.cfg.GIDs {
		a = a.Unmap()
		if a.Is4() != da.Is4() {
			continue
		}
		if a.IsLinkLocalUnicast() == da.IsLinkLocalUnicast() {
			return roce.GIDFromAddr(a), nil
		}
		if !fallback.IsValid() {
			fallback = a
		}
	}
	if fallback.IsValid() {
		return roce.GIDFromAddr(fallback), nil
	}
	return roce.GID{}, errorf(ErrInvalidArgument, "no GID of %v's IP version on %s", dst, d.cfg.Name)
}

// String names the device for logs.
func (d *Device) String() string { return fmt.Sprintf("rnic %s", d.cfg.Name) }

// notify announces the CQ events the current event produced. Handlers may post work,
// which may complete and queue more events: they are announced in the same pass.
func (d *Device) notify() {
	if d.notifying {
		return
	}
	d.notifying = true
	for i := 0; i < len(d.pendingCQs); i++ {
		cq := d.pendingCQs[i]
		d.pendingCQs[i] = nil
		cq.channel.notify(cq)
	}
	d.pendingCQs = d.pendingCQs[:0]
	d.notifying = false
}

// randomUint32 draws from the system's random source (Config.RandomIDs).
func randomUint32() uint32 {
	var b [4]byte
	rand.Read(b[:]) // never fails on Linux (getrandom)
	return binary.LittleEndian.Uint32(b[:])
}
