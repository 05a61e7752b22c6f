package qp

import (
	"encoding/binary"

	"github.com/rocelab/rocelab/roce"
)

// The completer consumes an RC requester's responses (IBTA 9.7.5.2; rxe_comp.c):
//
//  1. A response acknowledges PSNs in [comp.psn, highPSN); anything else is stale or
//     bogus and is dropped.
//  2. ACKs (coalesced: one acknowledges every PSN up to its own) retire SEND and WRITE
//     WQEs; READ responses and atomic ACKs must arrive exactly at comp.psn.
//  3. A PSN sequence error NAK, or an ACK past a READ or atomic whose response is
//     missing, starts go-back-N from comp.psn, once: until the retry makes progress,
//     further NAKs and missing responses start nothing, and a NAK for a PSN already
//     acknowledged (a duplicate of the one that started the retry) never does. The
//     transport timer retries when nothing arrives (any response in the window
//     re-arms it, as in rxe). retry_cnt bounds retries without progress: 7 means 7
//     (IBTA), or forever with Config.RXERetryCnt (rxe).
//  4. An RNR NAK pauses the requester for the timer the responder asked for, then
//     retries from the NAKed PSN; rnr_retry bounds it (7 = forever).
//  5. Error NAKs fail the WQE and take the QP to ERR.
//  6. retire completes finished WQEs from the head of the send queue, in order.

// completer is the completer's state.
type completer struct {
	psn          roce.PSN // oldest PSN not yet acknowledged
	retryLeft    uint8    // retries left before RETRY_EXC_ERR, reset by progress
	rnrRetryLeft uint8    // RNR retries left before RNR_RETRY_EXC_ERR, reset by progress
	rtoDeadline  int64    // transport timer, Never when not armed
	retrying     bool     // a NAK-triggered go-back-N is under way; no second one until progress
}

// complete handles a response packet for an RC QP.
func (q *QP) complete(now int64, p *roce.Packet) {
	if !q.cfg.Type.reliable() || q.cfg.Type == XRCRecv {
		q.ctr.DropOpcode++ // no requester
		return
	}
	if q.state != StateRTS && q.state != StateSQD {
		q.ctr.DropState++
		return
	}
	psn := p.BTH.PSN()
	if psn.Diff(q.comp.psn) < -1 || !psn.Before(q.req.highPSN) {
		q.ctr.DropOutOfWindow++
		return
	}
	if p.AETH != nil && !p.AETH.Syndrome().Valid() {
		q.ctr.DropOpcode++
		return
	}
	before := q.comp.psn
	switch q.rcOpcode(p.BTH.Opcode()) {
	case roce.OpRCAck:
		q.ack(now, psn, p.AETH.Syndrome())
	case roce.OpRCAtomicAck:
		q.atomicAck(now, psn, p.AtomicAck.Orig())
	default: // the read responses
		q.readResponse(now, psn, p)
	}
	if q.state == StateErr {
		return
	}
	if q.comp.psn != before {
		q.progress(now)
	} else if q.comp.rtoDeadline != Never {
		// No progress, but the responder is alive: rxe_comp.c re-arms its retransmit
		// timer whenever a response arrives while requests are outstanding, even one
		// it ignores. A responder still streaming the answers to a backlog of READs
		// behind a lost response would otherwise see a retry of every outstanding READ
		// each timeout, queued behind that backlog, and never catch up.
		q.comp.rtoDeadline = now + rto(q.attr.Timeout)
	}
	q.retire()
}

// progress notes that comp.psn advanced: the retry budgets refill and the transport
// timer restarts for what is still outstanding.
func (q *QP) progress(now int64) {
	q.ctr.RxResponses++
	q.comp.retryLeft, q.comp.rnrRetryLeft = q.attr.RetryCnt, q.attr.RNRRetry
	q.comp.retrying = false
	q.comp.rtoDeadline = Never
	if q.comp.psn.Before(q.req.highPSN) && q.attr.Timeout != 0 {
		q.comp.rtoDeadline = now + rto(q.attr.Timeout)
	}
	if q.req.psn.Before(q.comp.psn) {
		// The acknowledgement covers packets of an earlier pass: skip resending them.
		q.resumeFrom(q.comp.psn)
	}
}

func (q *QP) ack(now int64, psn roce.PSN, syn roce.Syndrome) {
	switch syn.Type() {
	case roce.AckTypeACK:
		if !q.ackThrough(psn) {
			q.goBackN() // the ACK passed a READ or atomic whose response was lost
		}
	case roce.AckTypeRNRNAK:
		q.ackThrough(psn.Add(-1))
		q.rnrNAK(now, psn, syn.Value())
	case roce.AckTypeNAK:
		q.ackThrough(psn.Add(-1))
		switch syn.Value() {
		case roce.NAKPSNSequenceError:
			q.ctr.SeqNAKsRecv++
			if psn.Before(q.comp.psn) {
				// A NAK for a PSN acknowledged since (a duplicate of the NAK that
				// started the retry under way): the pass already resends it.
				q.ctr.DropOutOfWindow++
				return
			}
			q.goBackN()
		case roce.NAKInvalidRequest:
			q.remoteError(psn, WCRemInvReqErr)
		case roce.NAKRemoteAccessError:
			q.remoteError(psn, WCRemAccessErr)
		case roce.NAKRemoteOperational:
			q.remoteError(psn, WCRemOpErr)
		case roce.NAKInvalidRDRequest:
			q.remoteError(psn, WCRemInvRdReqErr)
		default:
			q.ctr.DropOpcode++ // reserved NAK code
		}
	}
}

// ackThrough acknowledges every SEND and WRITE PSN up to and including psn. It stops
// at a READ or atomic WQE, whose own responses must retire it, and reports false if psn
// lies at or past one (its response is missing).
func (q *QP) ackThrough(psn roce.PSN) bool {
	if psn.Before(q.comp.psn) {
		return true
	}
	mtu := uint32(q.pathMTU())
	for i := q.sq.head; i != q.sq.tail; i++ {
		w := q.sq.at(i)
		if !w.started || psn.Before(w.firstPSN) {
			break
		}
		if w.done {
			continue
		}
		if w.wr.Opcode.readOrAtomic() {
			return false
		}
		acked := w.length
		if psn.Before(w.lastPSN) {
			acked = uint32(psn.Diff(w.firstPSN)+1) * mtu
		}
		q.ackBytes(w, acked)
		if psn.Before(w.lastPSN) {
			q.comp.psn = psn.Add(1)
			return true
		}
		w.done = true
		q.comp.psn = w.lastPSN.Add(1)
	}
	return true
}

// ackBytes records that the first n bytes of w are acknowledged.
func (q *QP) ackBytes(w *sendWQE, n uint32) {
	if n > w.sent { // acknowledged from an earlier pass than the one being sent
		q.req.inflight += uint64(n - w.sent)
		w.sent = n
	}
	if n > w.acked {
		q.req.inflight -= uint64(n - w.acked)
		w.acked = n
	}
}

// expect returns the WQE a READ response or atomic ACK at psn belongs to, after
// acknowledging the SENDs and WRITEs before it, or nil (after starting a retry) if
// responses are missing before psn.
func (q *QP) expect(psn roce.PSN) *sendWQE {
	if psn.Before(q.comp.psn) {
		q.ctr.DropOutOfWindow++ // a duplicate of a response already taken
		return nil
	}
	q.ackThrough(psn.Add(-1))
	if psn != q.comp.psn {
		q.goBackN()
		q.ctr.DropOutOfWindow++
		return nil
	}
	return q.wqeAt(psn)
}

// wqeAt returns the started, unfinished WQE whose PSN range holds psn, or nil.
func (q *QP) wqeAt(psn roce.PSN) *sendWQE {
	for i := q.sq.head; i != q.sq.tail; i++ {
		w := q.sq.at(i)
		if !w.started {
			return nil
		}
		if !w.done && !psn.Before(w.firstPSN) && !w.lastPSN.Before(psn) {
			return w
		}
	}
	return nil
}

func (q *QP) readResponse(now int64, psn roce.PSN, p *roce.Packet) {
	w := q.expect(psn)
	if w == nil {
		return
	}
	if w.wr.Opcode != WRRead {
		q.ctr.DropOpcode++
		return
	}
	mtu := uint32(q.pathMTU())
	off := uint32(psn.Diff(w.firstPSN)) * mtu
	n := uint32(len(p.Payload))
	pos := p.Info().Position
	remaining := w.length - off
	if pos == roce.PosLast || pos == roce.PosOnly {
		if n != remaining {
			q.ctr.DropOpcode++
			return
		}
	} else if n != mtu || remaining <= mtu {
		q.ctr.DropOpcode++
		return
	}
	if err := q.scatter(w.wr.SGL, off, p.Payload); err != nil {
		q.sendError(w, WCLocProtErr)
		return
	}
	q.ackBytes(w, off+n)
	q.comp.psn = psn.Add(1)
	if n == remaining {
		w.done = true
	}
}

func (q *QP) atomicAck(now int64, psn roce.PSN, orig uint64) {
	w := q.expect(psn)
	if w == nil {
		return
	}
	if !w.wr.Opcode.isAtomic() {
		q.ctr.DropOpcode++
		return
	}
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], orig)
	if err := q.scatter(w.wr.SGL, 0, word[:]); err != nil {
		q.sendError(w, WCLocProtErr)
		return
	}
	q.comp.psn = psn.Add(1)
	w.done = true
}

// goBackN restarts transmission at comp.psn after a sequence error NAK or a missing
// response, unless such a retry is already under way.
func (q *QP) goBackN() {
	if q.comp.retrying {
		return
	}
	if !q.spendRetry() {
		return
	}
	q.comp.retrying = true
	q.comp.rtoDeadline = Never
	q.resumeFrom(q.comp.psn)
}

// infiniteRetry is the rnr_retry value that never runs out (IBTA 9.7.5.2.8). IBTA
// gives retry_cnt 7 no such meaning: it is 7 retries. rxe (rxe_comp.c) reads
// retry_cnt 7 as infinite too; Config.RXERetryCnt does the same for interop studies.
const infiniteRetry = 7

// spendRetry takes one retry from the budget, or fails the oldest outstanding WQE with
// RETRY_EXC_ERR and reports false when none is left.
func (q *QP) spendRetry() bool {
	if q.comp.retryLeft == 0 {
		if w := q.wqeAt(q.comp.psn); w != nil {
			q.sendError(w, WCRetryExcErr)
		} else {
			q.enterError()
		}
		return false
	}
	if !q.cfg.RXERetryCnt || q.attr.RetryCnt != infiniteRetry {
		q.comp.retryLeft--
	}
	return true
}

func (q *QP) rnrNAK(now int64, psn roce.PSN, timer uint8) {
	if psn != q.comp.psn || q.req.rnrUntil != Never {
		return // stale, or a duplicate of the NAK being waited out
	}
	q.ctr.RNRNAKsRecv++
	if q.comp.rnrRetryLeft == 0 {
		if w := q.wqeAt(psn); w != nil {
			q.sendError(w, WCRNRRetryExcErr)
		}
		return
	}
	if q.attr.RNRRetry != infiniteRetry { // IBTA 9.7.5.2.8
		q.comp.rnrRetryLeft--
	}
	q.req.rnrUntil = now + rnrTimeout(timer)
	q.comp.rtoDeadline = Never
	q.comp.retrying = true
	q.resumeFrom(psn)
}

// remoteError fails the WQE at psn with the status an error NAK maps to.
func (q *QP) remoteError(psn roce.PSN, status WCStatus) {
	w := q.wqeAt(psn)
	if w == nil || psn != q.comp.psn {
		q.ctr.DropOutOfWindow++
		return
	}
	q.sendError(w, status)
}

// resumeFrom points the requester at psn (at or after comp.psn): the WQE holding it
// resends from there and every later started WQE from its first PSN.
func (q *QP) resumeFrom(psn roce.PSN) {
	found := false
	i := q.sq.head
	for ; i != q.sq.tail; i++ {
		w := q.sq.at(i)
		if !w.started {
			break
		}
		if w.done {
			continue
		}
		if !found {
			if w.lastPSN.Before(psn) {
				continue
			}
			found = true
			q.sq.next = i
			w.nextPSN = psn
		} else {
			w.nextPSN = w.firstPSN
		}
		q.req.inflight -= uint64(w.sent - w.acked)
		w.sent = w.acked
	}
	if !found {
		q.sq.next = i
	}
	q.req.psn = psn
}

// sendError fails w with status: an RC QP goes to ERR, a UC or UD QP to SQE, and the
// send queue is flushed in order.
func (q *QP) sendError(w *sendWQE, status WCStatus) {
	w.status = status
	q.retire() // WQEs acknowledged before the failing one complete normally
	if q.cfg.Type.reliable() {
		q.enterError()
		q.resp.queue.clear()
		return
	}
	q.enterSQE()
}

// retire completes finished WQEs at the head of the send queue, in order. Successful
// WQEs produce a completion only when signaled. A WQE's slot is freed before its
// completion is pushed, so a consumer that re-posts the moment it sees the completion
// finds room.
func (q *QP) retire() {
	for q.sq.head != q.sq.next {
		w := q.sq.at(q.sq.head)
		if !w.done {
			return
		}
		if w.rdAtomic {
			q.req.rdAtomic--
		}
		q.req.inflight -= uint64(w.sent - w.acked)
		signaled := q.cfg.SigAll || w.wr.Flags&SendSignaled != 0
		wc := WC{WRID: w.wr.WRID, Status: WCSuccess, Opcode: w.wr.Opcode.wcOpcode(),
			ByteLen: w.length, QPNum: uint32(q.cfg.QPN)}
		*w = sendWQE{}
		q.sq.head++
		if signaled {
			q.cfg.SendCQ.Push(wc)
		}
	}
}
