package qp

import (
	"errors"
	"fmt"

	"github.com/rocelab/rocelab/roce"
)

// The requester turns send WQEs into request packets (IBTA 9.7.4; rxe_req.c):
//
//  1. ready picks the WQE at sq.next if the QP may transmit: RTS (SQD only finishes
//     WQEs already started), no RNR wait, the fence and max_rd_atomic satisfied.
//  2. start assigns its PSNs on first transmission.
//  3. buildRequest writes one packet: the segment at nextPSN, with RETH on the first
//     WRITE packet, ImmDt/IETH on the last, AckReq on the last packet of a message,
//     every Config.AckReqEvery packets and on every retransmission.
//  4. The completer (completer.go) rewinds nextPSN for go-back-N.

// defaultAckEvery is how many packets may go without AckReq by default (rxe's
// RXE_MAX_PKT_PER_ACK).
const defaultAckEvery = 64

// maxOutstandingPSNs keeps the unacknowledged PSN range within half the sequence space,
// so that both ends tell old from new PSNs (IBTA 9.7.2).
const maxOutstandingPSNs = 1 << 22

// RXEMaxUnackedPSNs is rxe's RXE_MAX_UNACKED_PSNS: the kernel's requester sends no
// packet while this many PSNs are unacknowledged. Config.MaxUnackedPSNs takes it where
// the path may drop bursts (a kernel's queues, a VM): go-back-N then resends at most
// this many packets per loss instead of everything the send queue holds.
const RXEMaxUnackedPSNs = 128

// MaxFrameSize is the largest frame a QP builds: Ethernet, IPv6, UDP, BTH, the largest
// extension headers (AtomicETH), a 4096-byte payload and the ICRC. Buffers passed to
// NextRequest and NextResponse must hold it (or FrameSize of the path MTU).
const MaxFrameSize = 14 + 40 + 8 + 12 + 28 + 4096 + 4

// FrameSize is the largest frame a QP with the given path MTU builds.
func FrameSize(mtu roce.MTU) int { return MaxFrameSize - 4096 + int(mtu) }

// requester is the requester's state.
type requester struct {
	psn       roce.PSN // PSN of the next packet to transmit
	highPSN   roce.PSN // one past the highest PSN ever transmitted
	noAckPkts int      // packets since the last AckReq
	rdAtomic  int      // started READ/atomic WQEs not yet completed
	rnrUntil  int64    // end of an RNR wait, Never when not waiting
	inflight  uint64   // request payload bytes transmitted and not acknowledged
	lastData  bool     // the last packet built was a SEND or WRITE packet
	lastLen   int      // ... and carried this many payload bytes
}

// LastRequest describes the packet the last successful NextRequest built: whether it
// was a SEND or RDMA WRITE packet (data, what congestion control counts; READ requests
// and atomics are not) and its payload length. The rnic uses it instead of parsing
// the frame again.
func (q *QP) LastRequest() (payload int, data bool) { return q.req.lastLen, q.req.lastData }

// HasRequest reports whether NextRequest would produce a packet now.
func (q *QP) HasRequest() bool { return q.ready() != nil }

// InFlightBytes returns the SEND and RDMA WRITE payload bytes transmitted and not yet
// acknowledged: what a congestion window is compared with. UC and UD QPs, which are
// not acknowledged, report 0.
func (q *QP) InFlightBytes() uint64 { return q.req.inflight }

// RxDataBytes is Counters().RxDataBytes without copying the counters: the device reads
// it around every packet it hands the QP.
func (q *QP) RxDataBytes() uint64 { return q.ctr.RxDataBytes }

func (q *QP) ready() *sendWQE {
	if q.state != StateRTS && q.state != StateSQD {
		return nil
	}
	if q.req.rnrUntil != Never || q.sq.next == q.sq.tail {
		return nil
	}
	if q.cfg.Type.reliable() && int(q.req.psn.Diff(q.comp.psn)) >= q.cfg.MaxUnackedPSNs {
		return nil // rxe's wait_psn: the next packet would leave too many unacknowledged
	}
	w := q.sq.at(q.sq.next)
	if w.started {
		return w
	}
	if q.state == StateSQD {
		return nil
	}
	if q.cfg.Type.reliable() {
		if w.wr.Flags&SendFence != 0 && q.req.rdAtomic > 0 {
			return nil
		}
		if w.wr.Opcode.readOrAtomic() && q.req.rdAtomic >= int(q.attr.MaxRdAtomic) {
			return nil
		}
		if int(q.req.psn.Diff(q.comp.psn))+npkts(w.length, q.pathMTU()) > maxOutstandingPSNs {
			return nil
		}
	}
	return w
}

func (q *QP) start(w *sendWQE) {
	w.started = true
	w.firstPSN = q.req.psn
	n := 1
	if !w.wr.Opcode.isAtomic() {
		n = npkts(w.length, q.pathMTU())
	}
	w.lastPSN = w.firstPSN.Add(n - 1)
	w.nextPSN = w.firstPSN
	if q.cfg.Type.reliable() && w.wr.Opcode.readOrAtomic() {
		w.rdAtomic = true
		q.req.rdAtomic++
	}
}

// NextRequest builds the next request packet into buf and returns its length, or
// ok=false when the QP has nothing it may send. now arms the transport timer.
func (q *QP) NextRequest(now int64, buf []byte) (n int, ok bool) {
	for {
		w := q.ready()
		if w == nil {
			return 0, false
		}
		if !w.started && w.wr.Opcode.isLocal() {
			q.execLocal(w)
			continue
		}
		if !w.started {
			if q.cfg.Type == UD && w.length > uint32(q.cfg.PortMTU) {
				q.sendError(w, WCLocLenErr)
				continue
			}
			q.start(w)
		}
		psn := w.nextPSN
		n, err := q.buildRequest(buf, w, psn)
		if err != nil {
			if errors.Is(err, roce.ErrBufferTooSmall) {
				return 0, false
			}
			q.sendError(w, WCLocProtErr)
			continue
		}
		q.ctr.TxRequests++
		if psn.Before(q.req.highPSN) {
			q.ctr.TxRetransmits++
		}
		w.nextPSN = psn.Add(1)
		if w.wr.Opcode == WRRead {
			w.nextPSN = w.lastPSN.Add(1) // one request asks for every response PSN
		}
		q.req.psn = w.nextPSN
		if q.req.highPSN.Before(q.req.psn) {
			q.req.highPSN = q.req.psn
		}
		if w.nextPSN == w.lastPSN.Add(1) {
			q.sq.next++
			if !q.cfg.Type.reliable() {
				w.done = true // UC and UD complete once transmitted
				q.retire()
			}
		}
		if q.cfg.Type.reliable() && q.comp.rtoDeadline == Never && q.attr.Timeout != 0 {
			q.comp.rtoDeadline = now + rto(q.attr.Timeout)
		}
		return n, true
	}
}

// execLocal executes a local operation (BIND_MW, LOCAL_INV) at the head of the
// unstarted WQEs, as rxe_do_local_ops does: it sends nothing, so it is done at once and
// completes in order after the WQEs before it. A failure fails the WQE (MW_BIND_ERR or
// LOC_QP_OP_ERR) and takes the QP to ERR like any send error.
func (q *QP) execLocal(w *sendWQE) {
	w.started = true
	var err error
	status := WCLocQPOpErr
	if w.wr.Opcode == WRBindMW {
		err, status = q.cfg.Memory.BindMW(&w.wr.Bind), WCMWBindErr
	} else {
		err = q.cfg.Memory.Invalidate(w.wr.InvalidateRKey)
	}
	q.sq.next++
	if err != nil {
		q.sendError(w, status)
		return
	}
	w.done = true
	q.retire()
}

// buildRequest writes the packet of w at psn into buf.
func (q *QP) buildRequest(buf []byte, w *sendWQE, psn roce.PSN) (int, error) {
	b := &q.tx
	wr := &w.wr
	if q.cfg.Type == UD {
		setAddress(b, wr.AH, roce.DatagramSourcePort(q.cfg.QPN))
		b.BTH.PKey = roce.DefaultPKey
		b.BTH.DestQP = roce.QPN(wr.RemoteQPN)
		qkey := wr.RemoteQKey
		if qkey&0x80000000 != 0 {
			qkey = q.attr.QKey // IBTA 10.2.5: a high-order bit set selects the QP's Q_Key
		}
		b.DETH = roce.DETHFields{QKey: qkey, SrcQP: q.cfg.QPN}
	}
	if q.cfg.Type == XRCSend {
		b.XRCSRQN = wr.RemoteSRQN
	}
	mtu := q.pathMTU()
	off := uint32(psn.Diff(w.firstPSN)) * uint32(mtu)
	first, last := off == 0, true
	b.Payload = nil
	q.req.lastData, q.req.lastLen = false, 0
	switch {
	case wr.Opcode == WRRead:
		b.BTH.Opcode = q.opcodeBase() + roce.OpRCReadRequest
		b.RETH = roce.RETHFields{VA: wr.RemoteAddr + uint64(off), RKey: wr.RKey, DMALen: w.length - off}
	case wr.Opcode.isAtomic():
		b.BTH.Opcode = q.opcodeBase() + roce.OpRCFetchAdd
		b.AtomicETH = roce.AtomicETHFields{VA: wr.RemoteAddr, RKey: wr.RKey, SwapAdd: wr.CompareAdd}
		if wr.Opcode == WRCompareSwap {
			b.BTH.Opcode = q.opcodeBase() + roce.OpRCCompareSwap
			b.AtomicETH.SwapAdd, b.AtomicETH.Compare = wr.Swap, wr.CompareAdd
		}
	default:
		n := min(uint32(mtu), w.length-off)
		last = off+n == w.length
		b.BTH.Opcode = q.dataOpcode(wr.Opcode, first, last)
		payload, err := q.payloadIn(b, buf, n)
		if err != nil {
			return 0, err
		}
		if err := q.gather(wr.SGL, off, payload); err != nil {
			return 0, err
		}
		b.Payload = payload
		q.req.lastData, q.req.lastLen = true, int(n)
		if wr.Opcode.isWrite() && first {
			b.RETH = roce.RETHFields{VA: wr.RemoteAddr, RKey: wr.RKey, DMALen: w.length}
		}
		b.Imm, b.IETHRKey = wr.Imm, wr.InvalidateRKey
		if end := off + n; end > w.sent && q.cfg.Type.reliable() {
			q.req.inflight += uint64(end - w.sent)
			w.sent = end
		}
	}
	b.BTH.PSN = psn
	b.BTH.SE = last && wr.Flags&SendSolicited != 0
	b.BTH.AckReq = false
	if q.cfg.Type.reliable() {
		q.req.noAckPkts++
		if last || q.req.noAckPkts >= q.cfg.AckReqEvery || psn.Before(q.req.highPSN) {
			b.BTH.AckReq = true
			q.req.noAckPkts = 0
		}
	}
	return b.Build(buf)
}

// payloadIn returns the bytes of buf where b, its opcode set, will carry a payload of
// n bytes, so that the payload is read from memory straight into the frame and Build
// has nothing to copy (roce.Builder.PayloadOffset). It fails with
// roce.ErrBufferTooSmall if buf cannot hold the frame.
func (q *QP) payloadIn(b *roce.Builder, buf []byte, n uint32) ([]byte, error) {
	b.Payload = payloadSizer[:n] // its length sizes the frame
	total, err := b.Len()
	if err != nil {
		return nil, err
	}
	if len(buf) < total {
		return nil, fmt.Errorf("%w: need %d bytes, have %d", roce.ErrBufferTooSmall, total, len(buf))
	}
	off := total - roce.ICRCSize - roce.PadLen(int(n)) - int(n)
	return buf[off : off+int(n)], nil
}

// payloadSizer gives payloadIn a payload of the right length to size a frame with
// before the payload is read into the frame itself. Nothing writes it, so every QP
// shares it.
var payloadSizer [roce.MTU4096]byte

// dataOpcode returns the opcode of a SEND or WRITE packet by its place in the message.
func (q *QP) dataOpcode(op WROpcode, first, last bool) roce.Opcode {
	base := q.opcodeBase() // RC, XRC
	switch q.cfg.Type {
	case UD:
		if op == WRSendWithImm {
			return roce.OpUDSendOnlyImm
		}
		return roce.OpUDSendOnly
	case UC:
		base = roce.OpUCSendFirst
	}
	if op.isWrite() {
		switch {
		case first && last && op == WRWriteWithImm:
			return base + roce.OpRCWriteOnlyImm
		case first && last:
			return base + roce.OpRCWriteOnly
		case first:
			return base + roce.OpRCWriteFirst
		case last && op == WRWriteWithImm:
			return base + roce.OpRCWriteLastImm
		case last:
			return base + roce.OpRCWriteLast
		}
		return base + roce.OpRCWriteMiddle
	}
	switch {
	case first && last && op == WRSendWithImm:
		return base + roce.OpRCSendOnlyImm
	case first && last && op == WRSendWithInv:
		return base + roce.OpRCSendOnlyInv
	case first && last:
		return base + roce.OpRCSendOnly
	case first:
		return base + roce.OpRCSendFirst
	case last && op == WRSendWithImm:
		return base + roce.OpRCSendLastImm
	case last && op == WRSendWithInv:
		return base + roce.OpRCSendLastInv
	case last:
		return base + roce.OpRCSendLast
	}
	return base + roce.OpRCSendMiddle
}

// gather copies len(dst) bytes of the SGL, starting off bytes into it, into dst.
func (q *QP) gather(sgl []SGE, off uint32, dst []byte) error {
	for _, s := range sgl {
		if len(dst) == 0 {
			return nil
		}
		if off >= s.Length {
			off -= s.Length
			continue
		}
		n := min(s.Length-off, uint32(len(dst)))
		if err := q.cfg.Memory.Read(s.LKey, s.Addr+uint64(off), dst[:n], AccessLocalRead); err != nil {
			return err
		}
		dst, off = dst[n:], 0
	}
	return nil
}

// errSGLTooShort reports a scatter beyond the end of a receive buffer.
var errSGLTooShort = errors.New("message longer than the receive buffer")

// scatter copies src into the SGL, starting off bytes into it.
func (q *QP) scatter(sgl []SGE, off uint32, src []byte) error {
	for _, s := range sgl {
		if len(src) == 0 {
			return nil
		}
		if off >= s.Length {
			off -= s.Length
			continue
		}
		n := min(s.Length-off, uint32(len(src)))
		if err := q.cfg.Memory.Write(s.LKey, s.Addr+uint64(off), src[:n], AccessLocalWrite); err != nil {
			return err
		}
		src, off = src[n:], 0
	}
	if len(src) != 0 {
		return errSGLTooShort
	}
	return nil
}
