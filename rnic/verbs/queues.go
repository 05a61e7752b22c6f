package verbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

func unsafePointer(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// CompChannel is a completion channel (ibv_comp_channel): an eventfd the service
// writes when an armed CQ bound to it gets a completion.
type CompChannel struct {
	c  *Context
	h  uint32
	fd int      // the eventfd, for writes (never put in blocking mode)
	f  *os.File // the same, for reads in the netpoller

	mu  sync.Mutex
	cqs []*CQ
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel).
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("verbs: %w: eventfd: %v", ibv.ErrNoMemory, err)
	}
	var r wire.Handle
	if err := c.callNoFD(wire.OpCreateCompChannel, nil, &r, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &CompChannel{c: c, h: r.Handle, fd: fd, f: os.NewFile(uintptr(fd), "verbs-comp-channel")}, nil
}

// DestroyCompChannel destroys a completion channel; ErrBusy while CQs use it.
func (c *Context) DestroyCompChannel(ch *CompChannel) error {
	if err := c.callNoFD(wire.OpDestroyCompChan, &wire.Handle{Handle: ch.h}, nil); err != nil {
		return err
	}
	return ch.f.Close()
}

// GetCQEvent waits for the next CQ event (ibv_get_cq_event) until ctx is done. Safe
// from any goroutine.
func (ch *CompChannel) GetCQEvent(ctx context.Context) (*CQ, error) {
	var b [8]byte
	for {
		if cq := ch.take(); cq != nil {
			return cq, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dl, _ := ctx.Deadline()
		ch.f.SetReadDeadline(dl)
		stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(time.Unix(1, 0)) })
		_, err := ch.f.Read(b[:])
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return nil, fmt.Errorf("verbs: completion channel: %w", err)
		}
	}
}

// take returns a CQ with an unconsumed event.
func (ch *CompChannel) take() *CQ {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, cq := range ch.cqs {
		if atomic.LoadUint32(cq.ring.Events()) != cq.seen {
			cq.seen++
			return cq
		}
	}
	return nil
}

// CQ is a completion queue (ibv_cq) whose ring lives in memory shared with the service.
type CQ struct {
	c    *Context
	h    uint32
	ring wire.Ring
	cons uint32
	ch   *CompChannel
	seen uint32 // events returned by GetCQEvent (under ch.mu)
	acks atomic.Uint32
	// Context is the application's cq_context.
	Context any
}

// CreateCQ creates a completion queue of at least cqe entries (ibv_create_cq), bound to
// channel (may be nil).
func (c *Context) CreateCQ(cqe int, channel *CompChannel) (*CQ, error) {
	if cqe < 1 || cqe > ibv.MaxCQE {
		return nil, fmt.Errorf("verbs: %w: CQ of %d entries: must be in [1, %d]", ibv.ErrInvalidArgument, cqe, ibv.MaxCQE)
	}
	req := wire.CreateCQ{CQE: uint32(cqe)}
	if channel != nil && channel.c != c {
		return nil, fmt.Errorf("verbs: %w: the completion channel belongs to another context", ibv.ErrInvalidArgument)
	}
	if channel != nil {
		req.Channel = channel.h
	}
	var r wire.RingResp
	mem, err := c.callRing(wire.OpCreateCQ, &req, &r, func() uint64 { return r.Size })
	if err != nil {
		return nil, err
	}
	ring, ok := wire.NewRing(mem, r.Cap, r.EntrySize)
	if !ok || r.EntrySize != wire.CQESize {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%w: CQ ring of %d × %d in %d bytes", ErrProtocol, r.Cap, r.EntrySize, r.Size)
	}
	cq := &CQ{c: c, h: r.Handle, ring: ring, ch: channel}
	if channel != nil {
		channel.mu.Lock()
		cq.seen = atomic.LoadUint32(ring.Events())
		channel.cqs = append(channel.cqs, cq)
		channel.mu.Unlock()
	}
	return cq, nil
}

// DestroyCQ destroys a completion queue (ibv_destroy_cq); ErrBusy while QPs use it.
func (c *Context) DestroyCQ(cq *CQ) error {
	if err := c.callNoFD(wire.OpDestroyCQ, &wire.Handle{Handle: cq.h}, nil); err != nil {
		return err
	}
	if ch := cq.ch; ch != nil {
		ch.mu.Lock()
		for i, x := range ch.cqs {
			if x == cq {
				ch.cqs = append(ch.cqs[:i], ch.cqs[i+1:]...)
				break
			}
		}
		ch.mu.Unlock()
	}
	return unix.Munmap(cq.ring.Mem)
}

// Cap returns the CQ's capacity (at least what CreateCQ asked for).
func (cq *CQ) Cap() int { return int(cq.ring.Cap) }

// PollCQ moves up to len(wcs) completions into wcs and returns how many (ibv_poll_cq):
// a read of shared memory. An overrun CQ fails with an error wrapping ErrNoMemory.
func (cq *CQ) PollCQ(wcs []qp.WC) (int, error) {
	if e := wire.Load(cq.ring.Error()); e != wire.RingOK {
		return 0, fmt.Errorf("verbs: %w: CQ overrun: %d entries were not enough", ibv.ErrNoMemory, cq.ring.Cap)
	}
	prod := wire.Load(cq.ring.Prod())
	n := 0
	for cq.cons != prod && n < len(wcs) {
		wire.GetCQE(cq.ring.Entry(cq.cons), &wcs[n])
		cq.cons++
		n++
	}
	if n > 0 {
		wire.Store(cq.ring.Cons(), cq.cons)
	}
	return n, nil
}

// ReqNotifyCQ arms the CQ: its next completion raises one event on its channel
// (ibv_req_notify_cq). As with package rnic, completions already queued raise it at
// once, and solicitedOnly arms for any completion. No control call: the arm is a flag
// in the shared ring that the service clears when it raises the event.
func (cq *CQ) ReqNotifyCQ(solicitedOnly bool) error {
	_ = solicitedOnly
	if cq.ch == nil {
		return fmt.Errorf("verbs: %w: CQ has no completion channel", ibv.ErrInvalidArgument)
	}
	atomic.StoreUint32(cq.ring.Armed(), 1)
	if wire.Load(cq.ring.Prod()) != cq.cons && atomic.CompareAndSwapUint32(cq.ring.Armed(), 1, 0) {
		atomic.AddUint32(cq.ring.Events(), 1)
		unix.Write(cq.ch.fd, one[:]) // wakes a GetCQEvent already waiting
	}
	return nil
}

// AckCQEvents acknowledges n events of the CQ (ibv_ack_cq_events). Events need no
// release here; the count is kept for symmetry with ibverbs.
func (cq *CQ) AckCQEvents(n int) { cq.acks.Add(uint32(n)) }

// wq is the client's side of a work ring.
type wq struct {
	ring   wire.Ring
	prod   uint32
	maxSGE int
}

func (w *wq) check(kind string, nsge int) error {
	if e := wire.Load(w.ring.Error()); e != wire.RingOK {
		return fmt.Errorf("verbs: %w: %s ring broken (error %d)", ibv.ErrInvalidArgument, kind, e)
	}
	if w.prod-wire.Load(w.ring.Cons()) >= w.ring.Cap {
		return fmt.Errorf("verbs: %w: %w: %s holds %d WRs", ibv.ErrNoMemory, qp.ErrQueueFull, kind, w.ring.Cap)
	}
	if nsge > w.maxSGE {
		return fmt.Errorf("verbs: %w: %w: %d SGEs, the %s takes %d", ibv.ErrInvalidArgument, qp.ErrInvalidWR, nsge, kind, w.maxSGE)
	}
	return nil
}

func (w *wq) publish() {
	w.prod++
	wire.Store(w.ring.Prod(), w.prod)
}

// SRQ is a shared receive queue (ibv_srq).
type SRQ struct {
	c  *Context
	h  uint32
	rq wq
	// Context is the application's srq_context.
	Context any
}

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (c *Context) CreateSRQ(pd *PD, attr ibv.SRQInitAttr) (*SRQ, error) {
	if attr.MaxWR < 1 || attr.MaxWR > ibv.MaxWR || attr.MaxSGE < 0 || attr.MaxSGE > ibv.MaxSGE {
		return nil, fmt.Errorf("verbs: %w: SRQ of %d WRs of %d SGEs", ibv.ErrInvalidArgument, attr.MaxWR, attr.MaxSGE)
	}
	if err := c.owns(pd); err != nil {
		return nil, err
	}
	var r wire.RingResp
	mem, err := c.callRing(wire.OpCreateSRQ, &wire.CreateSRQ{PD: pd.h, MaxWR: uint32(attr.MaxWR), MaxSGE: uint32(attr.MaxSGE)},
		&r, func() uint64 { return r.Size })
	if err != nil {
		return nil, err
	}
	ring, ok := wire.NewRing(mem, r.Cap, r.EntrySize)
	if !ok || r.EntrySize < wire.RecvEntrySize(1) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%w: SRQ ring of %d × %d in %d bytes", ErrProtocol, r.Cap, r.EntrySize, r.Size)
	}
	return &SRQ{c: c, h: r.Handle, rq: wq{ring: ring, maxSGE: int(r.EntrySize-wire.RecvWQEHeader) / wire.SGESize}}, nil
}

// ModifySRQ arms the SRQ's limit (ibv_modify_srq with IBV_SRQ_LIMIT); 0 disarms it.
func (c *Context) ModifySRQ(s *SRQ, limit int) error {
	if limit < 0 {
		return fmt.Errorf("verbs: %w: SRQ limit %d", ibv.ErrInvalidArgument, limit)
	}
	return c.callNoFD(wire.OpModifySRQ, &wire.ModifySRQ{Handle: s.h, Limit: uint32(limit)}, nil)
}

// DestroySRQ destroys a shared receive queue; ErrBusy while QPs use it.
func (c *Context) DestroySRQ(s *SRQ) error {
	if err := c.callNoFD(wire.OpDestroySRQ, &wire.Handle{Handle: s.h}, nil); err != nil {
		return err
	}
	return unix.Munmap(s.rq.ring.Mem)
}

// PostSRQRecv posts a receive work request (ibv_post_srq_recv).
func (s *SRQ) PostSRQRecv(wr *qp.RecvWR) error {
	if err := s.rq.check("SRQ", len(wr.SGL)); err != nil {
		return err
	}
	wire.PutRecvWQE(s.rq.ring.Entry(s.rq.prod), wr)
	s.rq.publish()
	s.c.doorbell()
	return nil
}

// QPInitAttr describes a QP at creation (ibv_qp_init_attr), as rnic.QPInitAttr does
// with this package's CQs and SRQ.
type QPInitAttr struct {
	Type           qp.Type
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ
	Cap            ibv.QPCap
	SigAll         bool
}

// QP is a queue pair (ibv_qp).
type QP struct {
	c      *Context
	h      uint32
	qpn    roce.QPN
	typ    qp.Type
	sq, rq wq
	srq    *SRQ
	mem    []byte
	cap    ibv.QPCap
	// Context is the application's qp_context.
	Context any
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp). The queues get at
// least the capacities asked for; Cap reports them.
func (c *Context) CreateQP(pd *PD, attr QPInitAttr) (*QP, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("verbs: %w: QP needs a send CQ and a receive CQ", ibv.ErrInvalidArgument)
	}
	if err := c.owns(pd, attr.SendCQ.c, attr.RecvCQ.c); err != nil {
		return nil, err
	}
	if attr.SRQ != nil && attr.SRQ.c != c {
		return nil, fmt.Errorf("verbs: %w: the SRQ belongs to another context", ibv.ErrInvalidArgument)
	}
	k := attr.Cap
	if k.MaxSendWR < 0 || k.MaxRecvWR < 0 || k.MaxSendSGE < 0 || k.MaxRecvSGE < 0 ||
		k.MaxSendWR > ibv.MaxWR || k.MaxRecvWR > ibv.MaxWR || k.MaxSendSGE > ibv.MaxSGE || k.MaxRecvSGE > ibv.MaxSGE {
		return nil, fmt.Errorf("verbs: %w: QP capacities %+v", ibv.ErrInvalidArgument, k)
	}
	req := wire.CreateQP{PD: pd.h, SendCQ: attr.SendCQ.h, RecvCQ: attr.RecvCQ.h, Type: uint8(attr.Type),
		MaxSendWR: uint32(k.MaxSendWR), MaxRecvWR: uint32(k.MaxRecvWR), MaxSendSGE: uint32(k.MaxSendSGE), MaxRecvSGE: uint32(k.MaxRecvSGE)}
	if attr.SRQ != nil {
		req.SRQ = attr.SRQ.h
	}
	if attr.SigAll {
		req.SigAll = 1
	}
	var r wire.QPResp
	mem, err := c.callRing(wire.OpCreateQP, &req, &r, func() uint64 { return r.Size })
	if err != nil {
		return nil, err
	}
	x := &QP{c: c, h: r.Handle, qpn: roce.QPN(r.QPN), typ: attr.Type, srq: attr.SRQ, mem: mem,
		cap: ibv.QPCap{MaxSendWR: int(r.MaxSendWR), MaxRecvWR: int(r.MaxRecvWR), MaxSendSGE: int(r.MaxSendSGE), MaxRecvSGE: int(r.MaxRecvSGE)}}
	bad := r.SQOffset > r.Size || r.RQOffset > r.Size || r.SendEntry < wire.SendEntrySize(r.MaxSendSGE)
	var ok bool
	if !bad {
		x.sq.ring, ok = wire.NewRing(mem[r.SQOffset:], r.MaxSendWR, r.SendEntry)
		bad = !ok
	}
	if !bad && attr.SRQ == nil {
		x.rq.ring, ok = wire.NewRing(mem[r.RQOffset:], r.MaxRecvWR, r.RecvEntry)
		bad = !ok || r.RecvEntry < wire.RecvEntrySize(r.MaxRecvSGE)
	}
	if bad {
		unix.Munmap(mem)
		c.callNoFD(wire.OpDestroyQP, &wire.Handle{Handle: r.Handle}, nil)
		return nil, fmt.Errorf("%w: QP rings do not fit their %d bytes", ErrProtocol, r.Size)
	}
	x.sq.maxSGE, x.rq.maxSGE = int(r.MaxSendSGE), int(r.MaxRecvSGE)
	return x, nil
}

// QPN returns the QP's number.
func (x *QP) QPN() roce.QPN { return x.qpn }

// Cap returns the QP's actual queue capacities.
func (x *QP) Cap() ibv.QPCap { return x.cap }

// ModifyQP changes the QP's state and attributes (ibv_modify_qp), with the rnic's
// semantics (a zero SGID and destination MAC are resolved by the device). Do not post
// on the QP concurrently.
func (c *Context) ModifyQP(x *QP, attr *qp.Attr, mask qp.AttrMask) error {
	return c.callNoFD(wire.OpModifyQP, &wire.ModifyQP{Handle: x.h, Mask: uint32(mask), Attr: wire.FromQPAttr(attr)}, nil)
}

// QueryQP returns the QP's attributes (ibv_query_qp).
func (c *Context) QueryQP(x *QP) (qp.Attr, error) {
	var r wire.QPAttr
	if err := c.callNoFD(wire.OpQueryQP, &wire.Handle{Handle: x.h}, &r); err != nil {
		return qp.Attr{}, err
	}
	return r.QP(), nil
}

// DestroyQP destroys a queue pair (ibv_destroy_qp); its outstanding work is dropped.
func (c *Context) DestroyQP(x *QP) error {
	if err := c.callNoFD(wire.OpDestroyQP, &wire.Handle{Handle: x.h}, nil); err != nil {
		return err
	}
	return unix.Munmap(x.mem)
}

// PostSend posts a send work request (ibv_post_send): it writes the WQE into the
// shared send ring and rings the doorbell. The SGL is copied; wr may be reused at once.
// Errors the device finds later complete the WR with LOC_QP_OP_ERR.
func (x *QP) PostSend(wr *qp.SendWR) error {
	if err := x.sq.check("send queue", len(wr.SGL)); err != nil {
		return err
	}
	var ah uint32
	if x.typ == qp.UD {
		h, ok := x.c.ahHandle(wr.AH)
		if !ok {
			return fmt.Errorf("verbs: %w: %w: UD work request without an address handle of this context", ibv.ErrInvalidArgument, qp.ErrInvalidWR)
		}
		ah = h
	}
	switch wr.Opcode {
	case qp.WRWrite, qp.WRWriteWithImm, qp.WRSend, qp.WRSendWithImm, qp.WRRead, qp.WRCompareSwap, qp.WRFetchAdd, qp.WRSendWithInv:
	default:
		return fmt.Errorf("verbs: %w: %w: opcode %v", ibv.ErrInvalidArgument, qp.ErrInvalidWR, wr.Opcode)
	}
	wire.PutSendWQE(x.sq.ring.Entry(x.sq.prod), wr, ah)
	x.sq.publish()
	x.c.doorbell()
	return nil
}

// PostRecv posts a receive work request (ibv_post_recv). A QP attached to an SRQ has
// no receive queue: post to the SRQ.
func (x *QP) PostRecv(wr *qp.RecvWR) error {
	if x.srq != nil {
		return fmt.Errorf("verbs: %w: QP %v receives from an SRQ", ibv.ErrInvalidArgument, x.qpn)
	}
	if err := x.rq.check("receive queue", len(wr.SGL)); err != nil {
		return err
	}
	wire.PutRecvWQE(x.rq.ring.Entry(x.rq.prod), wr)
	x.rq.publish()
	x.c.doorbell()
	return nil
}
