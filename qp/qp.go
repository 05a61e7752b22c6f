package qp

import (
	"fmt"
	"math"

	"github.com/rocelab/rocelab/roce"
)

// Never is the deadline of a timer that is not armed.
const Never int64 = math.MaxInt64

// Config describes a QP at creation (ibv_qp_init_attr plus what the rnic binds it to).
type Config struct {
	Type   Type
	QPN    roce.QPN
	Memory Memory // the protection domain's memory regions

	SendCQ CompletionQueue
	RecvCQ CompletionQueue
	SRQ    RecvQueue // a shared receive queue; nil gives the QP its own of MaxRecvWR

	// XRCSRQ resolves, for an XRC_RECV QP, the SRQ number in a request's XRCETH to the
	// XRC SRQ, its CQ and the memory of its protection domain (IBTA annex A14: an XRC
	// request's R_Keys are checked against the XRC SRQ's PD); ok is false when no XRC
	// SRQ of that number belongs to the QP's XRC domain, which the QP answers with a NAK
	// (invalid request). An XRC_RECV QP has no Memory, SendCQ, RecvCQ or SRQ of its own;
	// an XRC_SEND QP no RecvCQ or SRQ.
	XRCSRQ func(srqn uint32) (srq RecvQueue, cq CompletionQueue, mem Memory, ok bool)

	MaxSendWR int // send queue depth (ibv_qp_cap.max_send_wr)
	MaxRecvWR int // receive queue depth, without an SRQ
	MaxSGE    int // SGEs per work request; 0 means 1

	SigAll bool // sq_sig_all: every send WR completes signaled

	// AckReqEvery sets AckReq on every Nth RC request packet as well as on the last
	// packet of a message and on retransmissions: 1 asks for an ACK per packet (what a
	// congestion window of a few packets, or per-ACK telemetry, needs); 0 means 64,
	// rxe's RXE_MAX_PKT_PER_ACK. The builder sets the bit before the ICRC is computed.
	AckReqEvery int

	// SkipICRC builds frames without computing their ICRC (roce.Builder.SkipICRC): for
	// a payload-free simulation whose receivers do not verify it.
	SkipICRC bool

	// MaxUnackedPSNs holds back an RC requester's next packet while this many PSNs are
	// unacknowledged (a READ request counts the PSNs of its responses), a window on
	// top of congestion control's. Go-back-N resends everything after a loss, so on a
	// path that drops bursts behind a deep queue, an unlimited window resends the whole
	// send queue's worth per loss; RXEMaxUnackedPSNs is rxe's bound. 0 means no bound
	// but the PSN space's (2^22).
	MaxUnackedPSNs int

	// RecvRefill, if set, is called when a packet needs a receive WR and the receive
	// queue (or SRQ) is empty, before the packet is refused (RNR NAK on RC, dropped on
	// UC and UD); it may post receive WRs, which the packet then takes. The rnic's
	// verbs service moves the WRs an application has put in its shared-memory ring but
	// the service has not yet scanned, so a SEND racing the post is not refused.
	RecvRefill func()

	// RXERetryCnt reads retry_cnt 7 as "retry forever", as rxe does, instead of the
	// IBTA's 7 retries followed by RETRY_EXC_ERR. rnr_retry 7 is infinite either way.
	// For interop studies that need rxe's behaviour; a QP whose peer has died then
	// resends forever.
	RXERetryCnt bool

	// PortMTU bounds UD messages, which have no path MTU attribute (rxe uses the port's
	// active MTU); 0 means roce.MTU1024, the value for a 1500-byte netdev.
	PortMTU roce.MTU

	// Segment, if positive, is the payload of every RC/UC packet of a message but the
	// last when it is smaller than the path MTU. It is not an IBTA attribute: it models
	// simulators whose packets carry a payload that is no IBTA MTU (the HPCC
	// simulator's PACKET_PAYLOAD_SIZE 1000). Both ends of a connection must use the
	// same value, as they must the same path MTU.
	Segment int
}

// QP is one queue pair. Its methods must be called from one goroutine at a time (the
// rnic's node loop); it keeps no references to the caller's buffers after a call
// returns, except the SGLs of posted work requests.
type QP struct {
	cfg   Config
	state State
	attr  Attr
	rq    *ring           // own receive queue, nil with an SRQ
	recv  RecvQueue       // rq or the SRQ; XRC_RECV: the XRC SRQ of the message under way
	rcq   CompletionQueue // receive completions: RecvCQ, or that XRC SRQ's CQ

	sq   sendQueue
	req  requester
	comp completer
	resp responder

	tx  roce.Builder // the connected path; UD sets the address per work request
	rx  roce.Packet  // ReceiveFrame's decode state
	ctr Counters
}

// New creates a QP in the RESET state.
func New(cfg Config) (*QP, error) {
	switch cfg.Type {
	case RC, UC, UD, XRCSend, XRCRecv:
	default:
		return nil, fmt.Errorf("qp: unsupported QP type %v", cfg.Type)
	}
	if !cfg.QPN.Valid() || cfg.QPN <= roce.GSIQPN {
		return nil, fmt.Errorf("qp: QPN %v is reserved or exceeds 24 bits", cfg.QPN)
	}
	if err := checkQueues(&cfg); err != nil {
		return nil, err
	}
	// A receive queue of 0 is legal (a send-only QP, as rxe allows): every receive
	// post fails with a full queue, and a SEND finds no WR.
	if cfg.MaxSendWR < 1 && cfg.Type != XRCRecv || cfg.MaxRecvWR < 0 {
		return nil, fmt.Errorf("qp: queue depths must be at least 1 for send and 0 for receive (send %d, receive %d)", cfg.MaxSendWR, cfg.MaxRecvWR)
	}
	if cfg.AckReqEvery < 0 {
		return nil, fmt.Errorf("qp: AckReqEvery %d is negative", cfg.AckReqEvery)
	}
	if cfg.AckReqEvery == 0 {
		cfg.AckReqEvery = defaultAckEvery
	}
	if cfg.MaxUnackedPSNs < 0 || cfg.MaxUnackedPSNs > maxOutstandingPSNs {
		return nil, fmt.Errorf("qp: MaxUnackedPSNs %d is outside 0..%d", cfg.MaxUnackedPSNs, maxOutstandingPSNs)
	}
	if cfg.MaxUnackedPSNs == 0 {
		cfg.MaxUnackedPSNs = maxOutstandingPSNs
	}
	if cfg.Segment < 0 || cfg.Segment > int(roce.MTU4096) {
		return nil, fmt.Errorf("qp: segment %d bytes: want 0 (the path MTU) up to %d", cfg.Segment, roce.MTU4096)
	}
	if cfg.MaxSGE == 0 {
		cfg.MaxSGE = 1
	}
	if cfg.PortMTU == 0 {
		cfg.PortMTU = roce.MTU1024
	}
	if !cfg.PortMTU.Valid() {
		return nil, fmt.Errorf("qp: port MTU %d is not an IBTA MTU", cfg.PortMTU)
	}
	q := &QP{cfg: cfg, rcq: cfg.RecvCQ}
	q.sq.init(cfg.MaxSendWR)
	switch {
	case cfg.Type.isXRC():
		q.recv = noRecv{} // an XRC_RECV QP takes each message's SRQ from its XRCETH
		if cfg.Type == XRCRecv {
			q.cfg.Memory = noMemory{} // until a request names an SRQ, and so a PD
		}
	case cfg.SRQ != nil:
		q.recv = cfg.SRQ
	default:
		q.rq = newRing(cfg.MaxRecvWR)
		q.recv = q.rq
	}
	q.reset()
	return q, nil
}

// checkQueues checks that cfg names the queues its type needs and none it cannot use.
func checkQueues(cfg *Config) error {
	if cfg.Memory == nil && cfg.Type != XRCRecv {
		return fmt.Errorf("qp: Memory is required")
	}
	switch cfg.Type {
	case XRCSend:
		if cfg.SendCQ == nil || cfg.RecvCQ != nil || cfg.SRQ != nil || cfg.XRCSRQ != nil || cfg.MaxRecvWR != 0 {
			return fmt.Errorf("qp: an XRC_SEND QP takes a SendCQ and no receive queue, RecvCQ or SRQ")
		}
	case XRCRecv:
		if cfg.XRCSRQ == nil || cfg.Memory != nil || cfg.SendCQ != nil || cfg.RecvCQ != nil || cfg.SRQ != nil || cfg.MaxSendWR != 0 || cfg.MaxRecvWR != 0 {
			return fmt.Errorf("qp: an XRC_RECV QP takes XRCSRQ and no Memory, queues or CQs of its own")
		}
	default:
		if cfg.SendCQ == nil || cfg.RecvCQ == nil || cfg.XRCSRQ != nil {
			return fmt.Errorf("qp: SendCQ and RecvCQ are required, XRCSRQ is for XRC_RECV QPs only")
		}
	}
	return nil
}

// noRecv is the receive queue of a QP that has none (XRC_SEND, and XRC_RECV between
// messages): a SEND finds no WR.
type noRecv struct{}

func (noRecv) Pop() (RecvWR, bool) { return RecvWR{}, false }

// noMemory is the memory of an XRC_RECV QP before its first request: no key is valid.
type noMemory struct{}

func (noMemory) Read(key uint32, _ uint64, _ []byte, _ Access) error { return noKey(key) }
func (noMemory) Write(key uint32, _ uint64, _ []byte, _ Access) error {
	return noKey(key)
}
func (noMemory) Check(key uint32, _ uint64, _ uint64, _ Access) error { return noKey(key) }
func (noMemory) Atomic(key uint32, _ uint64, _ AtomicOp, _ Access) (uint64, error) {
	return 0, noKey(key)
}
func (noMemory) Invalidate(rkey uint32) error { return noKey(rkey) }
func (noMemory) BindMW(b *MWBind) error       { return noKey(b.MWRKey) }

func noKey(key uint32) error {
	return fmt.Errorf("%w: %#x: the XRC target has no protection domain before a request names its SRQ", ErrInvalidKey, key)
}

// QPN returns the QP's number.
func (q *QP) QPN() roce.QPN { return q.cfg.QPN }

// Type returns the QP's transport type.
func (q *QP) Type() Type { return q.cfg.Type }

// State returns the QP's current state. The rnic checks it after each call to raise the
// affiliated asynchronous event when a QP has moved to ERR or SQE by itself.
func (q *QP) State() State { return q.state }

// MaxPayload returns the payload of a full request packet: the path MTU, or
// Config.Segment if smaller (UD: the port's MTU).
func (q *QP) MaxPayload() int { return q.pathMTU() }

// Attr returns the QP's current attributes (ibv_query_qp).
func (q *QP) Attr() Attr {
	a := q.attr
	a.State, a.CurState = q.state, q.state
	return a
}

// Counters returns the QP's counters.
func (q *QP) Counters() Counters { return q.ctr }

// pathMTU is the segment size of the QP's messages: the path MTU or Config.Segment,
// whichever is smaller.
func (q *QP) pathMTU() int {
	if q.cfg.Type == UD {
		return int(q.cfg.PortMTU)
	}
	if q.cfg.Segment > 0 {
		return min(q.cfg.Segment, int(q.attr.PathMTU))
	}
	return int(q.attr.PathMTU)
}

// reset returns the QP to its freshly created state (RESET), discarding every queue
// without completions, as modify to RESET does.
func (q *QP) reset() {
	q.state = StateReset
	q.attr = Attr{PathMTU: roce.MTU1024, Port: 1}
	q.sq.clear()
	if q.rq != nil {
		q.rq.clear()
	}
	q.req = requester{}
	q.comp = completer{rtoDeadline: Never}
	q.req.rnrUntil = Never
	q.resp.reset(0)
	q.tx = roce.Builder{SkipICRC: q.cfg.SkipICRC}
}
