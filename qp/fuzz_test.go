package qp

import (
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// FuzzReceive feeds arbitrary input to an RC requester and responder in RTS with work
// in flight. raw=true delivers the bytes as a frame; otherwise they become the body
// of a well-formed frame (any opcode, PSN, header fields and payload, valid ICRC) so
// the fuzzer reaches the transport logic. Nothing may panic; frames that do not decode
// or fail the ICRC must be counted and change nothing.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{}, true, uint8(0), uint32(0))
	f.Add(make([]byte, 60), true, uint8(0), uint32(0))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), false, uint8(roce.OpRCAck), uint32(0xFFFFF0))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), false, uint8(roce.OpRCReadResponseOnly), uint32(0xFFFFF1))
	f.Add(make([]byte, 1100), false, uint8(roce.OpRCSendFirst), uint32(0xFFFFF0))
	f.Add(make([]byte, 40), false, uint8(roce.OpRCFetchAdd), uint32(0xFFFFF0))
	f.Fuzz(func(t *testing.T, data []byte, raw bool, opcode uint8, psn uint32) {
		a, b := newPair(t, defaultOpts())
		withRegions(a, b, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
		postRecv(t, b, 1, localBase, 4096)
		post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 3000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
		post(t, a, SendWR{WRID: 2, Opcode: WRRead, SGL: []SGE{{localBase, 100, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
		buf := make([]byte, MaxFrameSize)
		for a.qp.HasRequest() {
			n, _ := a.qp.NextRequest(0, buf)
			b.qp.ReceiveFrame(0, buf[:n])
		}
		frame := data
		if !raw {
			frame = wellFormed(b, a, data, roce.Opcode(opcode), roce.PSN(psn&roce.PSNMask))
		}
		for _, n := range []*node{a, b} {
			receiveChecked(t, n, frame, buf)
		}
	})
}

// receiveChecked hands frame to n's QP: one that does not decode or fails its ICRC
// must be counted as malformed and leave the QP's state alone; whatever happened, the
// QP still answers its pull methods sanely.
func receiveChecked(t *testing.T, n *node, frame, buf []byte) {
	t.Helper()
	before, state := n.qp.Counters(), n.qp.State()
	n.qp.ReceiveFrame(1, frame)
	var p roce.Packet
	if p.Decode(frame) != nil || !p.ICRCOK() {
		if n.qp.State() != state || n.qp.Counters().DropMalformed != before.DropMalformed+1 {
			t.Fatalf("garbage changed the QP: %v → %v", state, n.qp.State())
		}
	}
	for range 100 {
		if _, ok := n.qp.NextResponse(buf); !ok {
			break
		}
	}
	n.qp.OnTimer(n.qp.NextDeadline())
}

// FuzzReceiveXRC is FuzzReceive for an XRC initiator and target whose domain holds
// SRQs 1 and 2: well-formed frames carry any opcode (XRC's among them) and an XRCETH
// naming SRQ 0 to 3.
func FuzzReceiveXRC(f *testing.F) {
	f.Add([]byte{}, true, uint8(0), uint32(0))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), false, uint8(roce.XRCBase+roce.OpRCAck), uint32(0xFFFFF0))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), false, uint8(roce.XRCBase+roce.OpRCReadResponseOnly), uint32(0xFFFFF1))
	f.Add(make([]byte, 1100), false, uint8(roce.XRCBase+roce.OpRCSendFirst), uint32(0xFFFFF0))
	f.Add(make([]byte, 40), false, uint8(roce.XRCBase+roce.OpRCSendOnly), uint32(0xFFFFF2))
	f.Add(make([]byte, 40), false, uint8(roce.XRCBase+roce.OpRCFetchAdd), uint32(0xFFFFF0))
	f.Add(make([]byte, 40), false, uint8(roce.OpRCSendOnly), uint32(0xFFFFF0))
	f.Fuzz(func(t *testing.T, data []byte, raw bool, opcode uint8, psn uint32) {
		srqs := map[uint32]*xrcSRQ{1: {rq: newRing(4), cq: &cqRec{}}, 2: {rq: newRing(4), cq: &cqRec{}}}
		a, b := newXRCPair(t, srqs)
		withRegions(a, b, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
		srqs[1].rq.push(RecvWR{WRID: 1, SGL: []SGE{{localBase, 4096, localKey}}})
		post(t, a, SendWR{WRID: 1, Opcode: WRSend, RemoteSRQN: 1, SGL: []SGE{{localBase, 3000, localKey}}})
		post(t, a, SendWR{WRID: 2, Opcode: WRRead, RemoteSRQN: 2, SGL: []SGE{{localBase, 100, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
		buf := make([]byte, MaxFrameSize)
		for a.qp.HasRequest() {
			n, _ := a.qp.NextRequest(0, buf)
			b.qp.ReceiveFrame(0, buf[:n])
		}
		frames := [][]byte{data}
		if !raw { // one to each side: the target's responder and the initiator's completer
			frames = [][]byte{wellFormed(a, b, data, roce.Opcode(opcode), roce.PSN(psn&roce.PSNMask)),
				wellFormed(b, a, data, roce.Opcode(opcode), roce.PSN(psn&roce.PSNMask))}
		}
		for k, n := range []*node{a, b, b, a} {
			receiveChecked(t, n, frames[k/2%len(frames)], buf)
		}
	})
}

// wellFormed builds a frame from from's address to to's QP carrying fuzz-chosen fields.
func wellFormed(from, to *node, data []byte, op roce.Opcode, psn roce.PSN) []byte {
	info := op.Info()
	if info == nil {
		op, info = roce.OpRCAck, roce.OpRCAck.Info()
	}
	var bld roce.Builder
	setAddress(&bld, &to.av, 0xC000)
	bld.Src = from.av.DGID.Addr()
	bld.BTH = roce.BTHFields{Opcode: op, PKey: roce.DefaultPKey, DestQP: to.qp.QPN(), PSN: psn, AckReq: len(data) > 0 && data[0]&1 != 0}
	word := func(i int) uint64 {
		var v uint64
		for j := range 8 {
			if i+j < len(data) {
				v = v<<8 | uint64(data[i+j])
			}
		}
		return v
	}
	bld.RETH = roce.RETHFields{VA: remoteBase + word(1)%regionSize, RKey: uint32(word(9)) % 4, DMALen: uint32(word(13)) % 8192}
	bld.AtomicETH = roce.AtomicETHFields{VA: remoteBase + word(1)%regionSize, RKey: uint32(word(9)) % 4, SwapAdd: word(17)}
	bld.AETH = roce.AETHFields{Syndrome: roce.Syndrome(word(2)), MSN: uint32(word(5)) & 0xFFFFFF}
	bld.DETH = roce.DETHFields{QKey: uint32(word(3)), SrcQP: roce.QPN(word(6) & 0xFFFFFF)}
	bld.XRCSRQN = uint32(word(11)) % 4 // XRC requests: SRQ 0 and 3 are in no domain
	if info.Payload && len(data) > 24 {
		bld.Payload = data[24:]
	}
	buf := make([]byte, 14+40+8+12+28+len(data)+8)
	n, err := bld.Build(buf)
	if err != nil {
		return data
	}
	return buf[:n]
}
