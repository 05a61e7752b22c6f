package qp

import (
	"errors"

	"github.com/rocelab/rocelab/roce"
)

// The responder executes requests (IBTA 9.7.5.1; rxe_resp.c):
//
//  1. PSN check. RC: the expected PSN is executed; a later one is a sequence error
//     (one NAK per gap); an earlier one is a duplicate: SEND and WRITE are re-ACKed,
//     READ re-executed, atomics answered from the replay cache. UC resynchronises on a
//     gap and drops the rest of the broken message. UD has no PSN check.
//  2. Opcode sequence and length checks: a message is First, Middle..., Last or Only;
//     First and Middle packets carry exactly one path MTU.
//  3. Resources: a receive WR for SEND (and WRITE with immediate) or an RNR NAK; a
//     response slot within max_dest_rd_atomic for READ and atomics.
//  4. Execution against Memory after rkey, bounds and access checks.
//  5. Acknowledgement: an ACK when the requester set AckReq (coalesced with any ACK
//     still queued), READ responses, atomic ACKs; error NAKs take the QP to ERR.

// responder is the responder's state.
type responder struct {
	psn     roce.PSN // next expected PSN
	msn     uint32   // messages completed, carried in AETHs
	nakSent bool     // a sequence error NAK for the current gap has been queued

	inSend, inWrite bool   // in the middle of a multi-packet message
	ucDrop          bool   // UC: dropping until the next First or Only packet
	hasWQE          bool   // wqe holds the receive WR of the SEND in progress
	wqe             RecvWR //
	offset          uint32 // bytes of the current message placed so far
	writeVA         uint64 // the current WRITE's RETH
	writeRKey       uint32
	writeLen        uint32
	writeOff        uint32 // bytes of the current WRITE placed so far: apart from offset,
	// which takeWQE resets when a WRITE WITH IMMEDIATE's last packet takes its receive

	queue   respQueue
	replay  []atomicReplay // the last atomics executed, by PSN
	replayN int            // atomics executed, indexes replay as a ring
	grh     [grhSize]byte  // UD: the GRH written ahead of the payload
}

// atomicReplay remembers an executed atomic's result, so a duplicate of the request is
// answered without executing it twice (IBTA 9.7.5.1.5 o9-28).
type atomicReplay struct {
	psn   roce.PSN
	orig  uint64
	valid bool
}

func (r *responder) reset(psn roce.PSN) {
	r.queue.clear()
	clear(r.replay)
	*r = responder{psn: psn, queue: r.queue, replay: r.replay}
}

// respond handles a request packet.
func (q *QP) respond(p *roce.Packet) {
	switch q.state {
	case StateRTR, StateRTS, StateSQD, StateSQE:
	default:
		q.ctr.DropState++
		return
	}
	switch q.cfg.Type {
	case RC, XRCRecv:
		q.respondRC(p)
	case XRCSend:
		q.ctr.DropOpcode++ // an initiator has no responder
	case UC:
		q.respondUC(p)
	case UD:
		q.respondUD(p)
	}
}

func (q *QP) respondRC(p *roce.Packet) {
	psn := p.BTH.PSN()
	// An XRC target takes each request's SRQ, CQ and memory from its XRCETH, duplicates
	// included (a re-executed READ reads the memory it names). IBTA annex A14: an SRQ
	// outside the target's XRC domain is an invalid request; out of sequence, the packet
	// is dropped, as the requester resends it anyway.
	if q.cfg.Type == XRCRecv && !q.selectXRCSRQ(p) {
		if psn == q.resp.psn {
			q.responderError(psn, roce.NAKInvalidRequest, 0)
		} else {
			q.ctr.DropOpcode++
		}
		return
	}
	if d := psn.Diff(q.resp.psn); d > 0 {
		if !q.resp.nakSent {
			q.resp.nakSent = true
			q.ctr.SeqNAKsSent++
			q.queueAck(roce.MakeSyndrome(roce.AckTypeNAK, roce.NAKPSNSequenceError), q.resp.psn)
		}
		return
	} else if d < 0 {
		q.duplicate(p)
		return
	}
	info := p.Info()
	if nak := q.checkRequest(p, info); nak >= 0 {
		q.responderError(psn, uint8(nak), WCRemInvReqErr)
		return
	}
	switch info.Operation {
	case roce.OperationSend:
		if !q.execSend(p, info) {
			return
		}
	case roce.OperationWrite:
		if !q.execWrite(p, info) {
			return
		}
	case roce.OperationReadRequest:
		q.execRead(p)
		return
	case roce.OperationCompareSwap, roce.OperationFetchAdd:
		q.execAtomic(p)
		return
	}
	q.resp.psn = psn.Add(1)
	q.resp.nakSent = false
	q.ctr.RxRequests++
	q.ctr.RxDataBytes += uint64(len(p.Payload))
	if p.BTH.AckReq() {
		q.queueAck(roce.MakeSyndrome(roce.AckTypeACK, roce.AETHCreditsUnlimited), psn)
	}
}

// selectXRCSRQ makes the XRC SRQ that p's XRCETH names, its CQ and its PD's memory the
// ones the message uses; false means the QP's domain has no such SRQ.
func (q *QP) selectXRCSRQ(p *roce.Packet) bool {
	srq, cq, mem, ok := q.cfg.XRCSRQ(p.XRCETH.SRQN())
	if !ok {
		return false
	}
	q.recv, q.rcq, q.cfg.Memory = srq, cq, mem
	return true
}

// checkRequest validates an in-sequence packet's opcode, length and the QP's access
// flags, returning the NAK code of a violation or -1.
func (q *QP) checkRequest(p *roce.Packet, info *roce.OpcodeInfo) int {
	if !q.sequenceOK(info) || !q.lengthOK(p, info) {
		return roce.NAKInvalidRequest
	}
	var need Access
	switch info.Operation {
	case roce.OperationWrite:
		need = AccessRemoteWrite
	case roce.OperationReadRequest:
		need = AccessRemoteRead
	case roce.OperationCompareSwap, roce.OperationFetchAdd:
		need = AccessRemoteAtomic
	}
	if q.attr.AccessFlags&need != need {
		return roce.NAKInvalidRequest // rxe: an operation the QP does not enable
	}
	if need&(AccessRemoteRead|AccessRemoteAtomic) != 0 && q.attr.MaxDestRdAtomic == 0 {
		return roce.NAKInvalidRequest
	}
	if info.Operation == roce.OperationCompareSwap || info.Operation == roce.OperationFetchAdd {
		if p.AtomicETH.VA()%8 != 0 {
			return roce.NAKInvalidRequest
		}
	}
	return -1
}

// sequenceOK reports whether the opcode may follow the previous packet: Middle and
// Last continue a message of the same operation, First and Only start one.
func (q *QP) sequenceOK(info *roce.OpcodeInfo) bool {
	cont := info.Position == roce.PosMiddle || info.Position == roce.PosLast
	switch {
	case q.resp.inSend:
		return cont && info.Operation == roce.OperationSend
	case q.resp.inWrite:
		return cont && info.Operation == roce.OperationWrite
	}
	return !cont
}

// lengthOK checks the payload against the path MTU: First and Middle packets are full,
// Last ones not empty, none longer than the MTU.
func (q *QP) lengthOK(p *roce.Packet, info *roce.OpcodeInfo) bool {
	n, mtu := len(p.Payload), q.pathMTU()
	switch info.Position {
	case roce.PosFirst, roce.PosMiddle:
		return n == mtu
	case roce.PosLast:
		return n > 0 && n <= mtu
	}
	return n <= mtu
}

// takeWQE makes sure a receive WR is held for the current message; false means none is
// posted.
func (q *QP) takeWQE() bool {
	if q.resp.hasWQE {
		return true
	}
	wr, ok := q.popRecv()
	if !ok {
		return false
	}
	q.resp.wqe, q.resp.hasWQE, q.resp.offset = wr, true, 0
	return true
}

// popRecv takes the oldest receive WR, asking Config.RecvRefill for more first if the
// queue is empty.
func (q *QP) popRecv() (RecvWR, bool) {
	wr, ok := q.recv.Pop()
	if !ok && q.cfg.RecvRefill != nil {
		q.cfg.RecvRefill()
		wr, ok = q.recv.Pop()
	}
	return wr, ok
}

func (q *QP) rnr(psn roce.PSN) {
	q.ctr.RNRNAKsSent++
	q.queueAck(roce.MakeSyndrome(roce.AckTypeRNRNAK, q.attr.MinRNRTimer), psn)
}

// execSend places a SEND packet; false means it was not accepted (RNR or error).
func (q *QP) execSend(p *roce.Packet, info *roce.OpcodeInfo) bool {
	psn := p.BTH.PSN()
	if info.Position == roce.PosFirst || info.Position == roce.PosOnly {
		if !q.takeWQE() {
			q.rnr(psn)
			return false
		}
		q.resp.offset = 0
	}
	if err := q.scatter(q.resp.wqe.SGL, q.resp.offset, p.Payload); err != nil {
		if errors.Is(err, errSGLTooShort) {
			q.responderError(psn, roce.NAKInvalidRequest, WCLocLenErr)
		} else {
			q.responderError(psn, roce.NAKRemoteOperational, WCLocProtErr)
		}
		return false
	}
	q.resp.offset += uint32(len(p.Payload))
	q.resp.inSend = info.Position == roce.PosFirst || info.Position == roce.PosMiddle
	if q.resp.inSend {
		return true
	}
	var imm uint32
	var flags WCFlags
	switch {
	case p.ImmDt != nil:
		imm, flags = p.ImmDt.Imm(), WCFlagWithImm
	case p.IETH != nil:
		imm, flags = p.IETH.RKey(), WCFlagWithInv
		if err := q.cfg.Memory.Invalidate(imm); err != nil {
			q.responderError(psn, roce.NAKRemoteOperational, WCLocProtErr)
			return false
		}
	}
	q.resp.hasWQE = false
	q.resp.msn++
	q.completeRecv(q.resp.wqe.WRID, WCSuccess, WCRecv, q.resp.offset, imm, flags)
	return true
}

// execWrite places a WRITE packet; false means it was not accepted.
func (q *QP) execWrite(p *roce.Packet, info *roce.OpcodeInfo) bool {
	psn := p.BTH.PSN()
	r := &q.resp
	if p.RETH != nil {
		r.writeVA, r.writeRKey, r.writeLen, r.writeOff = p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen(), 0
		if info.Position == roce.PosOnly && int(r.writeLen) != len(p.Payload) ||
			info.Position == roce.PosFirst && int(r.writeLen) <= len(p.Payload) {
			q.responderError(psn, roce.NAKInvalidRequest, 0)
			return false
		}
		// A zero-length WRITE touches no memory, so IBTA lets its R_Key go unchecked.
		if r.writeLen > 0 {
			if err := q.cfg.Memory.Check(r.writeRKey, r.writeVA, uint64(r.writeLen), AccessRemoteWrite); err != nil {
				q.responderError(psn, roce.NAKRemoteAccessError, 0)
				return false
			}
		}
	}
	n := uint32(len(p.Payload))
	last := info.Position == roce.PosLast || info.Position == roce.PosOnly
	if r.writeOff+n > r.writeLen || last && r.writeOff+n != r.writeLen {
		q.responderError(psn, roce.NAKInvalidRequest, 0)
		return false
	}
	if p.ImmDt != nil && !q.takeWQE() {
		q.rnr(psn) // checked before any byte lands, so the retry finds the same state
		return false
	}
	if n > 0 {
		if err := q.cfg.Memory.Write(r.writeRKey, r.writeVA+uint64(r.writeOff), p.Payload, AccessRemoteWrite); err != nil {
			q.responderError(psn, roce.NAKRemoteAccessError, 0)
			return false
		}
	}
	r.writeOff += n
	r.inWrite = !last
	if last {
		r.msn++
	}
	if p.ImmDt != nil {
		r.hasWQE = false
		q.completeRecv(r.wqe.WRID, WCSuccess, WCRecvWriteWithImm, r.writeLen, p.ImmDt.Imm(), WCFlagWithImm)
	}
	return true
}

// readResources reports whether another READ or atomic response fits.
func (q *QP) readResources() bool {
	return q.resp.queue.rdAtomic < int(q.attr.MaxDestRdAtomic) && !q.resp.queue.full()
}

func (q *QP) execRead(p *roce.Packet) {
	psn := p.BTH.PSN()
	va, rkey, n := p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen()
	if n > 0 {
		if err := q.cfg.Memory.Check(rkey, va, uint64(n), AccessRemoteRead); err != nil {
			q.responderError(psn, roce.NAKRemoteAccessError, 0)
			return
		}
	}
	if !q.readResources() {
		q.ctr.DropNoResource++
		return
	}
	q.resp.msn++
	q.queueRead(psn, va, rkey, n)
	q.resp.psn = psn.Add(npkts(n, q.pathMTU()))
	q.resp.nakSent = false
	q.ctr.RxRequests++
}

func (q *QP) queueRead(psn roce.PSN, va uint64, rkey, n uint32) {
	q.resp.queue.push(response{kind: respRead, psn: psn, va: va, rkey: rkey, length: n, mem: q.cfg.Memory,
		syndrome: roce.MakeSyndrome(roce.AckTypeACK, roce.AETHCreditsUnlimited), msn: q.resp.msn})
}

func (q *QP) execAtomic(p *roce.Packet) {
	psn := p.BTH.PSN()
	if !q.readResources() {
		q.ctr.DropNoResource++
		return
	}
	ae := p.AtomicETH
	op := AtomicOp{CompareSwap: q.rcOpcode(p.BTH.Opcode()) == roce.OpRCCompareSwap, Compare: ae.Compare(), SwapAdd: ae.SwapAdd()}
	orig, err := q.cfg.Memory.Atomic(ae.RKey(), ae.VA(), op, AccessRemoteAtomic)
	if err != nil {
		q.responderError(psn, roce.NAKRemoteAccessError, 0)
		return
	}
	r := &q.resp
	if r.replay == nil { // only a QP that executes atomics needs the cache
		r.replay = make([]atomicReplay, MaxRdAtomicLimit)
	}
	r.replay[r.replayN%max(1, int(q.attr.MaxDestRdAtomic))] = atomicReplay{psn: psn, orig: orig, valid: true}
	r.replayN++
	r.msn++
	q.queueAtomic(psn, orig)
	r.psn = psn.Add(1)
	r.nakSent = false
	q.ctr.RxRequests++
}

func (q *QP) queueAtomic(psn roce.PSN, orig uint64) {
	q.resp.queue.push(response{kind: respAtomic, psn: psn, orig: orig,
		syndrome: roce.MakeSyndrome(roce.AckTypeACK, roce.AETHCreditsUnlimited), msn: q.resp.msn})
}

// duplicate answers a request the responder has executed before (IBTA 9.7.5.1.4):
// SEND and WRITE get an ACK of everything received, a READ is executed again from the
// PSN asked for, an atomic gets its recorded result.
func (q *QP) duplicate(p *roce.Packet) {
	psn := p.BTH.PSN()
	switch p.Info().Operation {
	case roce.OperationReadRequest:
		va, rkey, n := p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen()
		if q.attr.AccessFlags&AccessRemoteRead == 0 || !q.readResources() ||
			n > 0 && q.cfg.Memory.Check(rkey, va, uint64(n), AccessRemoteRead) != nil {
			q.ctr.DropNoResource++
			return
		}
		q.queueRead(psn, va, rkey, n)
	case roce.OperationCompareSwap, roce.OperationFetchAdd:
		for _, e := range q.resp.replay {
			if e.valid && e.psn == psn {
				if !q.resp.queue.full() {
					q.queueAtomic(psn, e.orig)
				}
				q.ctr.DupRequests++
				return
			}
		}
		q.ctr.DropOutOfWindow++ // older than the replay cache: nothing safe to answer
		return
	default:
		q.queueAck(roce.MakeSyndrome(roce.AckTypeACK, roce.AETHCreditsUnlimited), q.resp.psn.Add(-1))
	}
	q.ctr.DupRequests++
}

// queueAck queues an ACK or NAK. An ACK replaces an ACK still waiting at the tail of
// the queue: the later one acknowledges everything the earlier did.
func (q *QP) queueAck(syn roce.Syndrome, psn roce.PSN) {
	rq := &q.resp.queue
	isAck := syn.Type() == roce.AckTypeACK
	if rq.size > 0 {
		if t := rq.tail(); isAck && t.kind == respAck && t.syndrome.Type() == roce.AckTypeACK {
			t.psn, t.msn = psn, q.resp.msn
			q.ctr.CoalescedACKs++
			return
		}
	}
	if !rq.push(response{kind: respAck, psn: psn, syndrome: syn, msn: q.resp.msn}) {
		q.ctr.DropNoResource++
	}
	if syn.Type() == roce.AckTypeNAK && syn.Value() != roce.NAKPSNSequenceError {
		q.ctr.ErrorNAKsSent++
	}
}

// responderError handles a class C/D error: the NAK goes out, the receive WR of the
// message (if any) completes with recvStatus, and the QP moves to ERR.
func (q *QP) responderError(psn roce.PSN, nakCode uint8, recvStatus WCStatus) {
	if q.resp.hasWQE && recvStatus != 0 {
		q.resp.hasWQE = false
		q.completeRecv(q.resp.wqe.WRID, recvStatus, WCRecv, 0, 0, 0)
	}
	q.enterError()
	// Responses already queued (ACKs, READ responses of earlier requests) still go out,
	// ahead of the NAK.
	q.queueAck(roce.MakeSyndrome(roce.AckTypeNAK, nakCode), psn)
}
