package qp

import "github.com/rocelab/rocelab/roce"

// Modify changes the QP's state and attributes as ibv_modify_qp does: mask selects the
// fields of a that apply, and the transition from the current state to a.State (or to
// the current state without AttrState) must require and allow exactly what the
// ibv_modify_qp(3) table says for the QP's type. An invalid mask or value changes
// nothing and returns an *AttrError naming the attribute.
func (q *QP) Modify(a *Attr, mask AttrMask) error {
	next := q.state
	if mask&AttrState != 0 {
		next = a.State
	}
	if err := checkValues(q.cfg.Type, a, mask); err != nil {
		return err
	}
	if err := checkTransition(q.cfg.Type, q.state, next, mask); err != nil {
		return err
	}
	if mask&AttrCurState != 0 && a.CurState != q.state {
		return attrErr(AttrCurState, "says %v, the QP is in %v", a.CurState, q.state)
	}

	switch next {
	case StateReset:
		q.reset()
		return nil
	case StateErr:
		q.applyAttrs(a, mask)
		if q.state != StateErr {
			q.enterError()
			q.resp.queue.clear()
		}
		return nil
	}
	q.applyAttrs(a, mask)
	if mask&(AttrAV|AttrDestQPN) != 0 {
		q.preparePath()
	}
	if next == StateRTR && q.state == StateInit {
		q.resp.reset(q.attr.RQPSN)
	}
	if next == StateRTS && q.state == StateRTR {
		q.req.psn, q.req.highPSN, q.comp.psn = q.attr.SQPSN, q.attr.SQPSN, q.attr.SQPSN
	}
	q.state = next
	return nil
}

func (q *QP) applyAttrs(a *Attr, mask AttrMask) {
	t := &q.attr
	if mask&AttrEnSQDAsyncNotify != 0 {
		t.EnSQDAsyncNotify = a.EnSQDAsyncNotify
	}
	if mask&AttrAccessFlags != 0 {
		t.AccessFlags = a.AccessFlags
	}
	if mask&AttrPKeyIndex != 0 {
		t.PKeyIndex = a.PKeyIndex
	}
	if mask&AttrPort != 0 {
		t.Port = a.Port
	}
	if mask&AttrQKey != 0 {
		t.QKey = a.QKey
	}
	if mask&AttrAV != 0 {
		t.AV = a.AV
	}
	if mask&AttrPathMTU != 0 {
		t.PathMTU = a.PathMTU
	}
	if mask&AttrTimeout != 0 {
		t.Timeout = a.Timeout
	}
	if mask&AttrRetryCnt != 0 {
		t.RetryCnt = a.RetryCnt
		q.comp.retryLeft = a.RetryCnt
	}
	if mask&AttrRNRRetry != 0 {
		t.RNRRetry = a.RNRRetry
		q.comp.rnrRetryLeft = a.RNRRetry
	}
	if mask&AttrRQPSN != 0 {
		t.RQPSN = a.RQPSN
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		t.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&AttrMinRNRTimer != 0 {
		t.MinRNRTimer = a.MinRNRTimer
	}
	if mask&AttrSQPSN != 0 {
		t.SQPSN = a.SQPSN
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		t.MaxDestRdAtomic = a.MaxDestRdAtomic
	}
	if mask&AttrPathMigState != 0 {
		t.PathMigState = a.PathMigState
	}
	if mask&AttrDestQPN != 0 {
		t.DestQPN = a.DestQPN
	}
}

// preparePath fills the frame template of a connected QP from its address vector.
func (q *QP) preparePath() {
	if q.cfg.Type == UD {
		return
	}
	av := &q.attr.AV
	q.tx = roce.Builder{SkipICRC: q.cfg.SkipICRC}
	setAddress(&q.tx, av, roce.ConnectedSourcePort(av.FlowLabel, q.cfg.QPN, q.attr.DestQPN))
	q.tx.BTH.PKey = roce.DefaultPKey
	q.tx.BTH.DestQP = q.attr.DestQPN
}

// setAddress writes an address vector's L2/L3 fields into a frame template.
func setAddress(b *roce.Builder, av *AddressVector, srcPort uint16) {
	b.DstMAC, b.SrcMAC = av.DstMAC, av.SrcMAC
	b.Src, b.Dst = av.SGID.Addr(), av.DGID.Addr()
	b.DSCP, b.ECN = av.TrafficClass>>2, av.TrafficClass&3
	b.TTL = av.HopLimit
	b.FlowLabel = av.FlowLabel
	b.SrcPort = srcPort
}

// enterError moves the QP to ERR: the transport stops, every outstanding send WR and
// every receive WR the QP holds completes, in order, with WR_FLUSH_ERR (or with the
// error that caused the transition, for the WR that failed).
func (q *QP) enterError() {
	q.state = StateErr
	q.flushSend()
	q.flushRecv()
	q.comp.rtoDeadline = Never
	q.req.rnrUntil = Never
}

// enterSQE moves a UC or UD QP to SQE after a send error: the send queue is flushed and
// the receive side keeps working until the QP is moved back to RTS.
func (q *QP) enterSQE() {
	q.state = StateSQE
	q.flushSend()
}

func (q *QP) flushSend() {
	// Each slot is freed before its completion is pushed (see retire); a WR posted
	// from the completion is flushed in turn by this loop.
	for q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		status := w.status
		if status == WCSuccess {
			status = WCWRFlushErr
		}
		wc := WC{WRID: w.wr.WRID, Status: status, Opcode: w.wr.Opcode.wcOpcode(), QPNum: uint32(q.cfg.QPN)}
		*w = sendWQE{}
		q.sq.head++
		q.sq.next = max(q.sq.next, q.sq.head)
		q.cfg.SendCQ.Push(wc)
	}
	q.sq.clear()
	q.req.rdAtomic, q.req.inflight = 0, 0
}

func (q *QP) flushRecv() {
	if q.resp.hasWQE {
		q.completeRecv(q.resp.wqe.WRID, WCWRFlushErr, WCRecv, 0, 0, 0)
		q.resp.hasWQE = false
	}
	if q.rq == nil {
		return // an SRQ's WRs belong to the SRQ, not to this QP
	}
	for {
		wr, ok := q.rq.Pop()
		if !ok {
			return
		}
		q.completeRecv(wr.WRID, WCWRFlushErr, WCRecv, 0, 0, 0)
	}
}

func (q *QP) completeRecv(wrid uint64, status WCStatus, op WCOpcode, n uint32, imm uint32, flags WCFlags) {
	q.rcq.Push(WC{WRID: wrid, Status: status, Opcode: op, ByteLen: n, Imm: imm, Flags: flags, QPNum: uint32(q.cfg.QPN)})
}
