package service

import (
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

type sPD struct{ pd *rnic.PD }
type sMR struct{ mr *rnic.MR }
type sMW struct{ mw *rnic.MW }
type sAH struct{ ah *rnic.AH }

// sChannel is a client's completion channel: the eventfd the client waits on.
type sChannel struct {
	fd   int
	refs int
}

var one = [8]byte{1} // an eventfd increment of 1, little-endian

// sCQ is a client's CQ: an rnic CQ whose completions the service moves, on the loop,
// into the shared ring the client polls.
type sCQ struct {
	c       *conn
	h       uint32
	cq      *rnic.CQ
	ch      *sChannel
	ring    wire.Ring
	mem     []byte
	prod    uint32
	dead    bool
	scratch []qp.WC
}

// wq is the service's side of one work ring (send, receive or SRQ).
//
// posted counts the WQEs handed to the QP, free the slots the QP is done with (published
// as the ring's Cons). Each WR goes to the QP with its WRID replaced by a tag that names
// its ring index, so that its completion tells which slot it frees; the client's WRID
// comes back from wrid[slot].
type wq struct {
	ring   wire.Ring
	posted uint32
	free   uint32
	maxSGE int
	wrid   []uint64
	done   []bool // receive rings: completions may retire slots out of order (SRQ)
	// signaled marks the send slots whose WR will complete (IBV_SEND_SIGNALED or
	// sq_sig_all); owed counts them, the completions the CQ must still find room for.
	signaled []bool
	owed     uint32
	sgl      []qp.SGE
	send     qp.SendWR // scratch: the QP copies the WR (and keeps its SGL, a slot's)
	recv     qp.RecvWR
	broken   bool
}

// Tags: the two top bits say which ring, the low 32 the index. An XRC SRQ's
// completions come from XRC_RECV QPs of any client, so its tag also carries the SRQ's
// handle (bits 32-61), which its CQ, of the same client, looks it up by.
const (
	tagSend = 0 << 62
	tagRecv = 1 << 62
	tagSRQ  = 2 << 62
	tagXSRQ = 3 << 62
)

func newWQ(mem []byte, cap, entry uint32, maxSGE int, recv bool) (wq, bool) {
	r, ok := wire.NewRing(mem, cap, entry)
	if !ok {
		return wq{}, false
	}
	w := wq{ring: r, maxSGE: maxSGE, wrid: make([]uint64, cap), sgl: make([]qp.SGE, int(cap)*maxSGE)}
	if recv {
		w.done = make([]bool, cap)
	} else {
		w.signaled = make([]bool, cap)
	}
	return w, true
}

// pending returns how many new WQEs the client published, or ok=false if its producer
// index is impossible (more than the ring's capacity ahead of the free slots, or behind
// what the service already took), which breaks the ring for good.
func (w *wq) pending() (uint32, bool) {
	if w.broken {
		return 0, false
	}
	prod := wire.Load(w.ring.Prod())
	if prod-w.free > w.ring.Cap || prod-w.posted > prod-w.free {
		w.broken = true
		wire.Store(w.ring.Error(), wire.RingBadIndex)
		return 0, false
	}
	return prod - w.posted, true
}

func (w *wq) slotSGL(k uint32) []qp.SGE {
	s := int(k&(w.ring.Cap-1)) * w.maxSGE
	return w.sgl[s : s+w.maxSGE : s+w.maxSGE]
}

// retire frees slot k: for a send ring every slot up to k (send completions are in
// order and imply the unsignaled WRs before them), for a receive ring only k.
func (w *wq) retire(k uint32) (wrid uint64, ok bool) {
	if k-w.free >= w.posted-w.free {
		return 0, false // not outstanding: a stale tag
	}
	wrid = w.wrid[k&(w.ring.Cap-1)]
	if w.done == nil {
		for ; w.free != k+1; w.free++ {
			if s := &w.signaled[w.free&(w.ring.Cap-1)]; *s {
				*s = false
				w.owed--
			}
		}
	} else {
		w.done[k&(w.ring.Cap-1)] = true
		for w.free != w.posted && w.done[w.free&(w.ring.Cap-1)] {
			w.done[w.free&(w.ring.Cap-1)] = false
			w.free++
		}
	}
	wire.Store(w.ring.Cons(), w.free)
	return wrid, true
}

// reset empties the ring after the QP moved to RESET (which drops its work).
func (w *wq) reset() {
	if w.ring.Mem == nil {
		return
	}
	prod := wire.Load(w.ring.Prod())
	w.posted, w.free, w.broken, w.owed = prod, prod, false, 0
	clear(w.done)
	clear(w.signaled)
	wire.Store(w.ring.Error(), wire.RingOK)
	wire.Store(w.ring.Cons(), prod)
}

// sQP is a client's QP.
type sQP struct {
	c              *conn
	h              uint32
	x              *rnic.QP
	typ            qp.Type
	sq, rq         wq
	srq            *sSRQ
	sendCQ, recvCQ *sCQ
	sigAll         bool // sq_sig_all
	mem            []byte
	opened         *sXRCD // a handle OpenQP gave (ibv_open_qp): the domain it was opened through
}

// sSRQ is a client's SRQ.
type sSRQ struct {
	c   *conn
	h   uint32
	srq *rnic.SRQ
	rq  wq
	mem []byte
}

func (x *sQP) reset() { x.sq.reset(); x.rq.reset() }

// drainSQ posts the client's new send WQEs, on the loop. A WQE the QP refuses completes
// at once with an error, since the client's post already returned.
func (x *sQP) drainSQ() {
	w := &x.sq
	n, ok := w.pending()
	for ; ok && n > 0; n-- {
		k := w.posted
		w.posted++
		wr := &w.send
		ah, good := wire.GetSendWQE(w.ring.Entry(k), wr, w.slotSGL(k))
		w.wrid[k&(w.ring.Cap-1)] = wr.WRID
		var err error
		switch {
		case !good:
			err = fmt.Errorf("%w: WQE %d: bad SGE count", qp.ErrInvalidWR, k)
		case x.typ == qp.UD:
			a, aerr := get[*sAH](x.c, ah, "AH")
			if aerr != nil {
				err = aerr
				break
			}
			wr.AH = a.ah.AV()
		case x.typ == qp.XRCSend: // the WQE's remote QPN field carries the SRQ number
			wr.AH, wr.RemoteSRQN, wr.RemoteQPN = nil, wr.RemoteQPN, 0
		default:
			wr.AH = nil
		}
		wr.WRID = tagSend | uint64(k)
		if err == nil {
			err = x.x.PostSend(wr)
		}
		if err == nil && (x.sigAll || wr.Flags&qp.SendSignaled != 0) {
			w.signaled[k&(w.ring.Cap-1)] = true
			w.owed++
		}
		if err != nil {
			// The slot is free at once only if nothing before it is outstanding: the QP
			// may still hold an earlier WR's SGL. Otherwise a later completion frees it.
			if w.free == k {
				w.free = k + 1
				wire.Store(w.ring.Cons(), w.free)
			}
			x.sendCQ.put(&qp.WC{WRID: w.wrid[k&(w.ring.Cap-1)], Status: qp.WCLocQPOpErr, Opcode: sendOpcode(wr.Opcode),
				QPNum: uint32(x.x.QPN()), VendorErr: vendorErr(err)})
			x.sendCQ.publish()
		}
		*wr = qp.SendWR{}
	}
}

// drainRQ posts the client's new receive WQEs.
func (x *sQP) drainRQ() {
	w := &x.rq
	if w.ring.Mem == nil {
		return // a send-only QP (max_recv_wr 0) has no receive ring
	}
	n, ok := w.pending()
	for ; ok && n > 0; n-- {
		k := w.posted
		w.posted++
		wr := &w.recv
		good := wire.GetRecvWQE(w.ring.Entry(k), wr, w.slotSGL(k))
		w.wrid[k&(w.ring.Cap-1)] = wr.WRID
		wr.WRID = tagRecv | uint64(k)
		var err error
		if !good {
			err = fmt.Errorf("%w: receive WQE %d: bad SGE count", qp.ErrInvalidWR, k)
		} else {
			err = x.x.PostRecv(wr)
		}
		if err != nil {
			x.recvCQ.complete(&qp.WC{WRID: wr.WRID, Status: qp.WCLocQPOpErr, Opcode: qp.WCRecv,
				QPNum: uint32(x.x.QPN()), VendorErr: vendorErr(err)}, x)
			x.recvCQ.publish()
		}
		*wr = qp.RecvWR{}
	}
}

// refill moves the receives the client has posted but the loop has not scanned yet
// into the QP or its SRQ (rnic.QP.RecvRefill): a SEND handled in the same loop turn
// as the client's post takes them instead of drawing an RNR NAK or being dropped.
func (x *sQP) refill() {
	if x.srq != nil {
		x.srq.drain()
		return
	}
	x.drainRQ()
}

// drain posts the client's new SRQ WQEs. A refused one has no QP or CQ to complete on:
// its slot is freed and the ring's Error says why.
func (s *sSRQ) drain() {
	w := &s.rq
	n, ok := w.pending()
	for ; ok && n > 0; n-- {
		k := w.posted
		w.posted++
		wr := &w.recv
		good := wire.GetRecvWQE(w.ring.Entry(k), wr, w.slotSGL(k))
		w.wrid[k&(w.ring.Cap-1)] = wr.WRID
		wr.WRID = tagSRQ | uint64(k)
		if s.srq.SRQNum() != 0 {
			wr.WRID = tagXSRQ | uint64(s.h)<<32 | uint64(k)
		}
		if !good || s.srq.PostSRQRecv(wr) != nil {
			w.retire(k)
		}
		*wr = qp.RecvWR{}
	}
}

func sendOpcode(op qp.WROpcode) qp.WCOpcode {
	switch op {
	case qp.WRWrite, qp.WRWriteWithImm:
		return qp.WCWrite
	case qp.WRRead:
		return qp.WCRead
	case qp.WRCompareSwap:
		return qp.WCCompareSwap
	case qp.WRFetchAdd:
		return qp.WCFetchAdd
	case qp.WRBindMW:
		return qp.WCBindMW
	case qp.WRLocalInv:
		return qp.WCLocalInv
	}
	return qp.WCSend
}

// VendorErr values of the completions the service itself generates for WQEs the QP
// refused (status LOC_QP_OP_ERR).
const (
	VendorErrInvalidWR    = 0x5E0001 // bad opcode, SGE count, length or AH
	VendorErrInvalidState = 0x5E0002 // the QP's state forbids posting
	VendorErrQueueFull    = 0x5E0003
	VendorErrOther        = 0x5E00FF
)

func vendorErr(err error) uint32 {
	switch {
	case isErr(err, qp.ErrInvalidState):
		return VendorErrInvalidState
	case isErr(err, qp.ErrQueueFull):
		return VendorErrQueueFull
	case isErr(err, qp.ErrInvalidWR), isErr(err, rnic.ErrNotFound):
		return VendorErrInvalidWR
	}
	return VendorErrOther
}

// onEvent moves the rnic CQ's completions into the shared ring: the CQ's completion
// channel handler, run on the loop after the event that completed the work. The rnic CQ
// stays armed, so every batch of completions comes here.
func (q *sCQ) onEvent() {
	if q.dead {
		return
	}
	for {
		n, err := q.cq.PollCQ(q.scratch)
		if err != nil {
			q.overrun()
			return
		}
		if n == 0 {
			break
		}
		for i := range q.scratch[:n] {
			wc := &q.scratch[i]
			q.complete(wc, q.c.byQPN[roce.QPN(wc.QPNum)])
		}
	}
	q.publish()
	q.cq.ReqNotifyCQ(false)
}

// complete translates wc's tag back to the client's WRID, frees its slot, and writes it
// into the ring (not yet published). Completions of destroyed QPs are dropped.
func (q *sCQ) complete(wc *qp.WC, x *sQP) {
	if wc.WRID>>62 == tagXSRQ>>62 {
		q.completeXRC(wc)
		return
	}
	if x == nil {
		return
	}
	var w *wq
	switch wc.WRID >> 62 {
	case tagSend >> 62:
		w = &x.sq
	case tagRecv >> 62:
		w = &x.rq
	case tagSRQ >> 62:
		if x.srq == nil {
			return
		}
		w = &x.srq.rq
	default:
		return
	}
	wrid, ok := w.retire(uint32(wc.WRID))
	if !ok {
		return
	}
	wc.WRID = wrid
	q.put(wc)
}

// completeXRC is complete for an XRC SRQ's receive, which names the SRQ rather than
// a QP of this client. Completions of destroyed SRQs are dropped.
func (q *sCQ) completeXRC(wc *qp.WC) {
	s, ok := q.c.objs[uint32(wc.WRID>>32)&(1<<30-1)].(*sSRQ)
	if !ok {
		return
	}
	wrid, ok := s.rq.retire(uint32(wc.WRID))
	if !ok {
		return
	}
	wc.WRID = wrid
	q.put(wc)
}

// put writes wc into the ring (not yet published), or overruns the CQ.
func (q *sCQ) put(wc *qp.WC) {
	if wire.Load(q.ring.Error()) != wire.RingOK {
		return
	}
	if q.prod-wire.Load(q.ring.Cons()) >= q.ring.Cap {
		q.overrun()
		return
	}
	wire.PutCQE(q.ring.Entry(q.prod), wc)
	q.prod++
}

// overrun marks the ring broken, as a hardware CQ that overflows (the client's polls
// fail), wakes a waiting client so that it finds out, and reports CQ_ERR.
func (q *sCQ) overrun() {
	if wire.Load(q.ring.Error()) == wire.RingOverrun {
		return
	}
	wire.Store(q.ring.Error(), wire.RingOverrun)
	q.raise()
	q.c.s.asyncEvent(rnic.AsyncEvent{Type: rnic.EventCQErr, CQ: q.cq})
}

// publish makes the written CQEs visible and raises the armed event.
func (q *sCQ) publish() {
	if wire.Load(q.ring.Prod()) == q.prod {
		return
	}
	wire.Store(q.ring.Prod(), q.prod)
	if wire.Load(q.ring.Armed()) != 0 && atomic.CompareAndSwapUint32(q.ring.Armed(), 1, 0) {
		q.raise()
	}
}

func (q *sCQ) raise() {
	if q.ch == nil || q.ch.fd < 0 {
		return
	}
	atomic.AddUint32(q.ring.Events(), 1)
	signal(q.ch.fd)
}

// channel returns the rnic completion channel of every service CQ, created on first use.
func (s *Server) rnicChannel() *rnic.CompChannel {
	if s.channel == nil {
		s.channel = s.dev.CreateCompChannel(1)
		s.channel.Handler = func(cq *rnic.CQ) {
			if q, ok := cq.Context.(*sCQ); ok {
				q.onEvent()
			}
		}
	}
	return s.channel
}

func (c *conn) createCQ(body []byte) (any, int, error) {
	var r wire.CreateCQ
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	if r.CQE < 1 || r.CQE > rnic.MaxCQE {
		return nil, -1, fmt.Errorf("%w: CQ of %d entries: must be in [1, %d]", rnic.ErrInvalidArgument, r.CQE, rnic.MaxCQE)
	}
	var ch *sChannel
	if r.Channel != 0 {
		var err error
		if ch, err = get[*sChannel](c, r.Channel, "completion channel"); err != nil {
			return nil, -1, err
		}
	}
	capacity := wire.PowerOfTwo(r.CQE)
	size := wire.PageAlign(wire.RingBytes(capacity, wire.CQESize))
	if err := c.reserve(ringCost(size, int64(capacity), wcSize)); err != nil {
		return nil, -1, err
	}
	fd, mem, err := wire.SealedMemfd("rocelab-verbs-cq", int(size))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: CQ ring: %v", rnic.ErrNoMemory, err)
	}
	ring, _ := wire.NewRing(mem, capacity, wire.CQESize)
	cq, err := c.s.dev.CreateCQ(int(capacity), c.s.rnicChannel())
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	q := &sCQ{c: c, cq: cq, ch: ch, ring: ring, mem: mem, scratch: make([]qp.WC, 64)}
	cq.Context = q
	h, err := c.add(q)
	if err != nil {
		c.s.dev.DestroyCQ(cq)
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	q.h = h
	if ch != nil {
		ch.refs++
	}
	cq.ReqNotifyCQ(false)
	return &wire.RingResp{Handle: h, Cap: capacity, EntrySize: wire.CQESize, Size: size}, fd, nil
}

func (c *conn) createSRQ(body []byte) (any, int, error) {
	var r wire.CreateSRQ
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	pd, err := get[*sPD](c, r.PD, "PD")
	if err != nil {
		return nil, -1, err
	}
	_, resp, fd, err := c.newSRQ(r.MaxWR, r.MaxSGE, func(a rnic.SRQInitAttr) (*rnic.SRQ, error) {
		return c.s.dev.CreateSRQ(pd.pd, a)
	})
	if err != nil {
		return nil, -1, err
	}
	return resp, fd, nil
}

// newSRQ creates an SRQ of maxWR WRs of maxSGE SGEs with create, and its ring.
func (c *conn) newSRQ(maxWR, maxSGE uint32, create func(rnic.SRQInitAttr) (*rnic.SRQ, error)) (*sSRQ, *wire.RingResp, int, error) {
	if maxWR < 1 || maxWR > rnic.MaxWR || maxSGE > rnic.MaxSGE {
		return nil, nil, -1, fmt.Errorf("%w: SRQ of %d WRs of %d SGEs", rnic.ErrInvalidArgument, maxWR, maxSGE)
	}
	capacity, sge := wire.PowerOfTwo(maxWR), max(maxSGE, 1)
	entry := wire.RecvEntrySize(sge)
	size := wire.PageAlign(wire.RingBytes(capacity, entry))
	if err := c.reserve(ringCost(size, int64(capacity), 2*wqSlotBytes(sge))); err != nil {
		return nil, nil, -1, err
	}
	fd, mem, err := wire.SealedMemfd("rocelab-verbs-srq", int(size))
	if err != nil {
		return nil, nil, -1, fmt.Errorf("%w: SRQ ring: %v", rnic.ErrNoMemory, err)
	}
	srq, err := create(rnic.SRQInitAttr{MaxWR: int(capacity), MaxSGE: int(sge)})
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, nil, -1, err
	}
	w, _ := newWQ(mem, capacity, entry, int(sge), true)
	s := &sSRQ{c: c, srq: srq, rq: w, mem: mem}
	h, err := c.add(s)
	if err != nil {
		c.s.dev.DestroySRQ(srq)
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, nil, -1, err
	}
	s.h = h
	srq.Context = s
	c.srqs = append(c.srqs, s)
	return s, &wire.RingResp{Handle: h, Cap: capacity, EntrySize: entry, Size: size}, fd, nil
}

// qpBindings are the objects a QP to create names, each nil where its type has none.
type qpBindings struct {
	pd       *sPD
	xrcd     *sXRCD
	scq, rcq *sCQ
	srq      *sSRQ
}

// bindings looks up the objects r names: an XRC_RECV QP names its XRC domain in PD and
// nothing else, an XRC_SEND QP no receive CQ or SRQ.
func (c *conn) bindings(r *wire.CreateQP) (b qpBindings, err error) {
	typ := qp.Type(r.Type)
	if typ == qp.XRCRecv {
		if r.SendCQ != 0 || r.RecvCQ != 0 || r.SRQ != 0 || r.MaxRecvWR != 0 {
			return b, fmt.Errorf("%w: an XRC_RECV QP has no CQs, SRQ or receive queue", rnic.ErrInvalidArgument)
		}
		b.xrcd, err = get[*sXRCD](c, r.PD, "XRCD")
		return b, err
	}
	if b.pd, err = get[*sPD](c, r.PD, "PD"); err != nil {
		return b, err
	}
	if b.scq, err = get[*sCQ](c, r.SendCQ, "send CQ"); err != nil {
		return b, err
	}
	if typ == qp.XRCSend {
		if r.RecvCQ != 0 || r.SRQ != 0 || r.MaxRecvWR != 0 {
			return b, fmt.Errorf("%w: an XRC_SEND QP has no receive CQ, SRQ or receive queue", rnic.ErrInvalidArgument)
		}
		return b, nil
	}
	if b.rcq, err = get[*sCQ](c, r.RecvCQ, "receive CQ"); err != nil {
		return b, err
	}
	if r.SRQ != 0 {
		b.srq, err = get[*sSRQ](c, r.SRQ, "SRQ")
	}
	return b, err
}

func (c *conn) createQP(body []byte) (any, int, error) {
	var r wire.CreateQP
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	b, err := c.bindings(&r)
	if err != nil {
		return nil, -1, err
	}
	srq, xrcRecv := b.srq, qp.Type(r.Type) == qp.XRCRecv
	if xrcRecv {
		r.MaxSendWR, r.MaxSendSGE = 1, 0 // a ring for the state word; the QP has no send queue
	}
	switch {
	case r.MaxSendWR < 1 || r.MaxSendWR > rnic.MaxWR || r.MaxRecvWR > rnic.MaxWR:
		return nil, -1, fmt.Errorf("%w: queue depths %d/%d must be in [1, %d] and [0, %d]", rnic.ErrInvalidArgument, r.MaxSendWR, r.MaxRecvWR, rnic.MaxWR, rnic.MaxWR)
	case r.MaxSendSGE > rnic.MaxSGE || r.MaxRecvSGE > rnic.MaxSGE:
		return nil, -1, fmt.Errorf("%w: %d/%d SGEs exceed %d", rnic.ErrInvalidArgument, r.MaxSendSGE, r.MaxRecvSGE, rnic.MaxSGE)
	}
	sqCap, ssge := wire.PowerOfTwo(r.MaxSendWR), max(r.MaxSendSGE, 1)
	rqCap, rsge := wire.PowerOfTwo(r.MaxRecvWR), max(r.MaxRecvSGE, 1)
	if srq != nil || r.MaxRecvWR == 0 { // no receive ring: an SRQ's QP, or a send-only QP
		rqCap, rsge = 0, 0
	}
	sEntry, rEntry := wire.SendEntrySize(ssge), wire.RecvEntrySize(rsge)
	sqSize := wire.PageAlign(wire.RingBytes(sqCap, sEntry))
	size := sqSize
	if rqCap > 0 {
		size += wire.PageAlign(wire.RingBytes(rqCap, rEntry))
	}
	// The QP's own queues hold a copy of each WR as the service's slots do.
	if err := c.reserve(ringCost(size, 2*int64(sqCap), wqSlotBytes(ssge)).plus(Usage{Memory: 2 * int64(rqCap) * wqSlotBytes(rsge)})); err != nil {
		return nil, -1, err
	}
	fd, mem, err := wire.SealedMemfd("rocelab-verbs-qp", int(size))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: QP rings: %v", rnic.ErrNoMemory, err)
	}
	attr := rnic.QPInitAttr{Type: qp.Type(r.Type), SigAll: r.SigAll != 0,
		Cap: rnic.QPCap{MaxSendWR: int(sqCap), MaxRecvWR: int(rqCap), MaxSendSGE: int(ssge), MaxRecvSGE: int(rsge)}}
	var pd *rnic.PD
	if b.pd != nil {
		pd = b.pd.pd
	}
	if b.scq != nil {
		attr.SendCQ = b.scq.cq
	}
	if b.rcq != nil {
		attr.RecvCQ = b.rcq.cq
	}
	if srq != nil {
		attr.SRQ = srq.srq
	}
	if xrcRecv {
		attr.XRCD, attr.Cap = b.xrcd.x, rnic.QPCap{}
	}
	x, err := c.s.dev.CreateQP(pd, attr)
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	s := &sQP{c: c, x: x, typ: qp.Type(r.Type), srq: srq, sendCQ: b.scq, recvCQ: b.rcq, sigAll: r.SigAll != 0, mem: mem}
	x.RecvRefill = s.refill
	s.sq, _ = newWQ(mem[:sqSize], sqCap, sEntry, int(ssge), false)
	x.OnState = func(st qp.State) { wire.Store(s.sq.ring.State(), uint32(st)) } // the ring starts at 0, RESET
	if rqCap > 0 {
		s.rq, _ = newWQ(mem[sqSize:], rqCap, rEntry, int(rsge), true)
	}
	h, err := c.add(s)
	if err != nil {
		c.s.dev.DestroyQP(x)
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	s.h = h
	x.Context = s
	c.qps = append(c.qps, s)
	c.byQPN[x.QPN()] = s
	return &wire.QPResp{Handle: h, QPN: uint32(x.QPN()), MaxSendWR: sqCap, MaxRecvWR: rqCap, MaxSendSGE: ssge,
		MaxRecvSGE: rsge, SendEntry: sEntry, RecvEntry: rEntry, SQOffset: 0, RQOffset: sqSize, Size: size}, fd, nil
}

func isErr(err, target error) bool { return errors.Is(err, target) }
