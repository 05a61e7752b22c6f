package qp

import (
	"errors"

	"github.com/rocelab/rocelab/roce"
)

// The UC and UD responders. Neither acknowledges nor NAKs anything: what cannot be
// delivered is dropped and counted (IBTA 9.8.3, 9.8.4).

// respondUC handles a UC SEND or WRITE packet. A PSN gap aborts the message in
// progress: its remaining packets are dropped up to the next First or Only packet, and
// a receive WR it had taken is reused for the next SEND.
func (q *QP) respondUC(p *roce.Packet) {
	r := &q.resp
	psn, info := p.BTH.PSN(), p.Info()
	starts := info.Position == roce.PosFirst || info.Position == roce.PosOnly
	if psn != r.psn {
		q.abortUC()
		r.ucDrop = !starts
	}
	r.psn = psn.Add(1)
	if r.ucDrop && !starts {
		q.ctr.DropUCMessage++
		return
	}
	r.ucDrop = false
	if starts && (r.inSend || r.inWrite) {
		q.abortUC() // a new message while one was open: the old one lost its tail
	}
	if !q.sequenceOK(info) || !q.lengthOK(p, info) ||
		info.Operation == roce.OperationWrite && q.attr.AccessFlags&AccessRemoteWrite == 0 {
		q.dropUC()
		return
	}
	if info.Operation == roce.OperationSend {
		q.ucSend(p, info)
	} else {
		q.ucWrite(p, info)
	}
}

func (q *QP) abortUC() {
	q.resp.inSend, q.resp.inWrite, q.resp.offset = false, false, 0
}

func (q *QP) dropUC() {
	q.abortUC()
	q.resp.ucDrop = true
	q.ctr.DropUCMessage++
}

func (q *QP) ucSend(p *roce.Packet, info *roce.OpcodeInfo) {
	r := &q.resp
	if info.Position == roce.PosFirst || info.Position == roce.PosOnly {
		if !q.takeWQE() {
			q.ctr.DropNoRecvWR++
			q.dropUC()
			return
		}
		r.offset = 0
	}
	if err := q.scatter(r.wqe.SGL, r.offset, p.Payload); err != nil {
		status := WCLocProtErr
		if errors.Is(err, errSGLTooShort) {
			status = WCLocLenErr
		}
		r.hasWQE = false
		q.completeRecv(r.wqe.WRID, status, WCRecv, 0, 0, 0)
		q.dropUC()
		return
	}
	r.offset += uint32(len(p.Payload))
	q.ctr.RxDataBytes += uint64(len(p.Payload))
	r.inSend = info.Position == roce.PosFirst || info.Position == roce.PosMiddle
	if r.inSend {
		return
	}
	var imm uint32
	var flags WCFlags
	if p.ImmDt != nil {
		imm, flags = p.ImmDt.Imm(), WCFlagWithImm
	}
	r.hasWQE = false
	q.ctr.RxRequests++
	q.completeRecv(r.wqe.WRID, WCSuccess, WCRecv, r.offset, imm, flags)
}

func (q *QP) ucWrite(p *roce.Packet, info *roce.OpcodeInfo) {
	r := &q.resp
	if p.RETH != nil {
		r.writeVA, r.writeRKey, r.writeLen, r.offset = p.RETH.VA(), p.RETH.RKey(), p.RETH.DMALen(), 0
		if r.writeLen > 0 && q.cfg.Memory.Check(r.writeRKey, r.writeVA, uint64(r.writeLen), AccessRemoteWrite) != nil {
			q.dropUC()
			return
		}
	}
	n := uint32(len(p.Payload))
	last := info.Position == roce.PosLast || info.Position == roce.PosOnly
	if r.offset+n > r.writeLen || last && r.offset+n != r.writeLen {
		q.dropUC()
		return
	}
	if p.ImmDt != nil && !q.takeWQE() {
		q.ctr.DropNoRecvWR++
		q.dropUC()
		return
	}
	if n > 0 && q.cfg.Memory.Write(r.writeRKey, r.writeVA+uint64(r.offset), p.Payload, AccessRemoteWrite) != nil {
		q.dropUC()
		return
	}
	r.offset += n
	q.ctr.RxDataBytes += uint64(n)
	r.inWrite = !last
	if last {
		q.ctr.RxRequests++
	}
	if p.ImmDt != nil {
		r.hasWQE = false
		q.completeRecv(r.wqe.WRID, WCSuccess, WCRecvWriteWithImm, r.writeLen, p.ImmDt.Imm(), WCFlagWithImm)
	}
}

// grhSize is the size of the GRH that precedes a UD message in the receive buffer.
const grhSize = 40

// respondUD delivers a UD SEND. The receive buffer starts with 40 bytes of GRH, as
// verbs requires: for RoCEv2 over IPv6 the packet's IPv6 header; over IPv4, 20 zero
// bytes and then the IPv4 header, as the kernel's union rdma_network_hdr lays it out
// (rxe_resp.c build_rdma_network_hdr).
func (q *QP) respondUD(p *roce.Packet) {
	r := &q.resp
	if p.DETH.QKey() != q.attr.QKey {
		q.ctr.DropQKey++
		return
	}
	if len(p.Payload) > int(q.cfg.PortMTU) {
		q.ctr.DropOpcode++
		return
	}
	wr, ok := q.popRecv()
	if !ok {
		q.ctr.DropNoRecvWR++
		return
	}
	clear(r.grh[:])
	sl := uint8(SLIPv6)
	if p.IPv4 != nil {
		copy(r.grh[20:], p.IPv4[:roce.IPv4MinSize])
		sl = SLIPv4
	} else {
		copy(r.grh[:], p.IPv6)
	}
	n := uint32(grhSize + len(p.Payload))
	err := q.scatter(wr.SGL, 0, r.grh[:])
	if err == nil {
		err = q.scatter(wr.SGL, grhSize, p.Payload)
	}
	if err != nil {
		status := WCLocProtErr
		if errors.Is(err, errSGLTooShort) {
			status = WCLocLenErr
		}
		q.completeRecv(wr.WRID, status, WCRecv, 0, 0, 0)
		return
	}
	flags := WCFlagGRH
	var imm uint32
	if p.ImmDt != nil {
		imm, flags = p.ImmDt.Imm(), flags|WCFlagWithImm
	}
	q.ctr.RxRequests++
	q.ctr.RxDataBytes += uint64(len(p.Payload))
	q.cfg.RecvCQ.Push(WC{WRID: wr.WRID, Status: WCSuccess, Opcode: WCRecv, ByteLen: n, Imm: imm,
		Flags: flags, QPNum: uint32(q.cfg.QPN), SrcQP: uint32(p.DETH.SrcQP()), SL: sl})
}
