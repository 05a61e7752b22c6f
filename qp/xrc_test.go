package qp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// xrcSRQ is one XRC SRQ at the target: its receive WRs and its CQ.
type xrcSRQ struct {
	rq  *ring
	cq  *cqRec
	mem *fakeMem // the SRQ's PD; nil: the target node's memory
}

// newXRCPair builds an XRC initiator (a, QPN 0x11) and an XRC target (b, QPN 0x22)
// whose domain holds the SRQs srqs names, and connects them.
func newXRCPair(t *testing.T, srqs map[uint32]*xrcSRQ) (a, b *node) {
	t.Helper()
	o := defaultOpts()
	a = &node{mem: newFakeMem(), scq: &cqRec{}, av: nodeAddr(1)}
	b = &node{mem: newFakeMem(), av: nodeAddr(2)}
	var err error
	a.qp, err = New(Config{Type: XRCSend, QPN: o.qpn[0], Memory: a.mem, SendCQ: a.scq,
		MaxSendWR: o.sqDepth, MaxSGE: 4, SigAll: true})
	if err != nil {
		t.Fatal(err)
	}
	b.qp, err = New(Config{Type: XRCRecv, QPN: o.qpn[1], MaxSGE: 4,
		XRCSRQ: func(srqn uint32) (RecvQueue, CompletionQueue, Memory, bool) {
			s, ok := srqs[srqn]
			if !ok {
				return nil, nil, nil, false
			}
			if s.mem != nil {
				return s.rq, s.cq, s.mem, true
			}
			return s.rq, s.cq, b.mem, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	o.typ = XRCSend
	connect(t, o, a, b)
	o.typ = XRCRecv
	connect(t, o, b, a)
	return a, b
}

// An XRC initiator's SENDs land in the SRQ their WR names, each completing on that
// SRQ's CQ with the target QP's number; WRITE and READ work against the target's
// memory. Every request carries an XRC opcode and an XRCETH with the WR's SRQ number;
// the responses use the XRC opcodes and carry none.
func TestXRCSendWriteRead(t *testing.T) {
	srqs := map[uint32]*xrcSRQ{5: {rq: newRing(4), cq: &cqRec{}}, 6: {rq: newRing(4), cq: &cqRec{}}}
	a, b := newXRCPair(t, srqs)
	la, lb, _, rb := withRegions(a, b, AccessRemoteWrite|AccessRemoteRead)
	fill(la[:3000], 1)
	fill(rb[:100], 9)
	for srqn, s := range srqs {
		off := uint64(srqn-5) * 4096
		if err := s.rq.push(RecvWR{WRID: uint64(srqn) * 100, SGL: []SGE{{Addr: localBase + off, Length: 4096, LKey: localKey}}}); err != nil {
			t.Fatal(err)
		}
	}
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, RemoteSRQN: 6, SGL: []SGE{{Addr: localBase, Length: 3000, LKey: localKey}}})
	post(t, a, SendWR{WRID: 2, Opcode: WRSendWithImm, Imm: 0xABCD, RemoteSRQN: 5, SGL: []SGE{{Addr: localBase, Length: 10, LKey: localKey}}})
	post(t, a, SendWR{WRID: 3, Opcode: WRWrite, RemoteSRQN: 5, RemoteAddr: remoteBase + 200, RKey: remoteKey,
		SGL: []SGE{{Addr: localBase, Length: 50, LKey: localKey}}})
	post(t, a, SendWR{WRID: 4, Opcode: WRRead, RemoteSRQN: 5, RemoteAddr: remoteBase, RKey: remoteKey,
		SGL: []SGE{{Addr: localBase + 8192, Length: 100, LKey: localKey}}})

	var requests, responses int
	exchangeWith(t, 0, a, b, func(from *node, frame []byte) bool {
		var p roce.Packet
		if err := p.Decode(frame); err != nil {
			t.Fatalf("frame does not decode: %v", err)
		}
		info := p.Info()
		if info.Transport != roce.TransportXRC {
			t.Errorf("%v from QP %v: not an XRC opcode", info.Name, from.qp.QPN())
		}
		if from == a {
			requests++
			if p.XRCETH == nil {
				t.Errorf("%v without an XRCETH", info.Name)
			}
		} else {
			responses++
			if p.XRCETH != nil {
				t.Errorf("response %v carries an XRCETH", info.Name)
			}
		}
		return false
	})
	if requests < 6 || responses == 0 {
		t.Errorf("%d requests and %d responses on the wire, want at least 6 (3-packet SEND, SEND, WRITE, READ) and some", requests, responses)
	}
	expectWC(t, a.scq.take(),
		WC{WRID: 1, Opcode: WCSend}, WC{WRID: 2, Opcode: WCSend}, WC{WRID: 3, Opcode: WCWrite}, WC{WRID: 4, Opcode: WCRead, ByteLen: 100})
	got6 := srqs[6].cq.take()
	expectWC(t, got6, WC{WRID: 600, Opcode: WCRecv, ByteLen: 3000})
	got5 := srqs[5].cq.take()
	expectWC(t, got5, WC{WRID: 500, Opcode: WCRecv, ByteLen: 10, Imm: 0xABCD, Flags: WCFlagWithImm})
	for _, wc := range append(got5, got6...) {
		if wc.QPNum != uint32(b.qp.QPN()) {
			t.Errorf("receive completion names QP %#x, want the target %#x", wc.QPNum, b.qp.QPN())
		}
	}
	if !bytes.Equal(lb[4096:4096+3000], la[:3000]) || !bytes.Equal(lb[:10], la[:10]) {
		t.Error("SEND payloads not in the buffers of the SRQs they named")
	}
	if !bytes.Equal(rb[200:250], la[:50]) {
		t.Error("WRITE payload not at the target")
	}
	if !bytes.Equal(la[8192:8192+100], rb[:100]) {
		t.Error("READ did not return the target's bytes")
	}
}

// A request naming an SRQ outside the target's XRC domain is NAKed as an invalid
// request (IBTA annex A14): the initiator's WR fails with REM_INV_REQ_ERR and both
// QPs go to ERR.
func TestXRCForeignSRQ(t *testing.T) {
	srqs := map[uint32]*xrcSRQ{5: {rq: newRing(4), cq: &cqRec{}}}
	a, b := newXRCPair(t, srqs)
	withRegions(a, b, AccessRemoteWrite)
	if err := srqs[5].rq.push(RecvWR{WRID: 1, SGL: []SGE{{Addr: localBase, Length: 64, LKey: localKey}}}); err != nil {
		t.Fatal(err)
	}
	post(t, a, SendWR{WRID: 7, Opcode: WRSend, RemoteSRQN: 9, SGL: []SGE{{Addr: localBase, Length: 8, LKey: localKey}}})
	exchange(t, 0, a, b)
	got := a.scq.take()
	if len(got) != 1 || got[0].WRID != 7 || got[0].Status != WCRemInvReqErr {
		t.Fatalf("initiator completions %+v, want WR 7 with REM_INV_REQ_ERR", got)
	}
	if a.qp.State() != StateErr || b.qp.State() != StateErr {
		t.Errorf("states %v and %v after the NAK, want ERR and ERR", a.qp.State(), b.qp.State())
	}
	if wcs := srqs[5].cq.take(); len(wcs) != 0 {
		t.Errorf("the domain's SRQ completed %+v", wcs)
	}
	if b.qp.Counters().ErrorNAKsSent != 1 {
		t.Errorf("target sent %d error NAKs, want 1", b.qp.Counters().ErrorNAKsSent)
	}
}

// Each XRC half has only the queues its role needs: creation refuses the others,
// posting to the missing queue fails, and the modify table is the kernel's XRC_INI and
// XRC_TGT columns.
func TestXRCQueuesAndAttrs(t *testing.T) {
	mem := newFakeMem()
	lookup := func(uint32) (RecvQueue, CompletionQueue, Memory, bool) { return nil, nil, nil, false }
	bad := []Config{
		{Type: XRCSend, QPN: 0x11, Memory: mem, SendCQ: &cqRec{}, RecvCQ: &cqRec{}, MaxSendWR: 4},
		{Type: XRCSend, QPN: 0x11, Memory: mem, SendCQ: &cqRec{}, MaxSendWR: 4, MaxRecvWR: 4},
		{Type: XRCRecv, QPN: 0x11},
		{Type: XRCRecv, QPN: 0x11, Memory: mem, XRCSRQ: lookup},
		{Type: XRCRecv, QPN: 0x11, XRCSRQ: lookup, RecvCQ: &cqRec{}},
		{Type: RC, QPN: 0x11, Memory: mem, SendCQ: &cqRec{}, RecvCQ: &cqRec{}, MaxSendWR: 4, XRCSRQ: lookup},
	}
	for i, cfg := range bad {
		if _, err := New(cfg); err == nil {
			t.Errorf("config %d (%v) accepted", i, cfg.Type)
		}
	}
	srqs := map[uint32]*xrcSRQ{}
	a, b := newXRCPair(t, srqs)
	if err := a.qp.PostRecv(&RecvWR{WRID: 1}); !errors.Is(err, ErrInvalidWR) {
		t.Errorf("post receive on XRC_SEND: %v, want ErrInvalidWR", err)
	}
	if err := b.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend}); !errors.Is(err, ErrInvalidWR) {
		t.Errorf("post send on XRC_RECV: %v, want ErrInvalidWR", err)
	}
	if err := a.qp.PostSend(&SendWR{WRID: 1, Opcode: WRSend, RemoteSRQN: 1 << 24}); !errors.Is(err, ErrInvalidWR) {
		t.Errorf("remote SRQN beyond 24 bits: %v, want ErrInvalidWR", err)
	}
	// An initiator has no responder attributes, a target no requester ones.
	if err := checkTransition(XRCSend, StateInit, StateRTR, AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic); err == nil {
		t.Error("XRC_SEND INIT → RTR accepted MAX_DEST_RD_ATOMIC")
	}
	if err := checkTransition(XRCRecv, StateRTR, StateRTS, AttrState|AttrTimeout|AttrSQPSN|AttrRetryCnt); err == nil {
		t.Error("XRC_RECV RTR → RTS accepted RETRY_CNT")
	}
	if err := checkTransition(XRCRecv, StateRTR, StateRTS, AttrState|AttrTimeout|AttrSQPSN); err != nil {
		t.Errorf("XRC_RECV RTR → RTS with TIMEOUT and SQ_PSN: %v", err)
	}
}

// XRC recovers from loss as RC does: with the first transmission of every fourth
// request PSN dropped, twenty three-packet SENDs into two SRQs each complete once, in
// order, on their SRQ's CQ.
func TestXRCLoss(t *testing.T) {
	srqs := map[uint32]*xrcSRQ{1: {rq: newRing(32), cq: &cqRec{}}, 2: {rq: newRing(32), cq: &cqRec{}}}
	a, b := newXRCPair(t, srqs)
	la, lb, _, _ := withRegions(a, b, AccessRemoteWrite)
	fill(la[:3000], 7)
	const n = 20
	for i := range n {
		srqn := uint32(1 + i%2)
		if err := srqs[srqn].rq.push(RecvWR{WRID: uint64(100 + i), SGL: []SGE{{Addr: localBase + uint64(i)*3000, Length: 3000, LKey: localKey}}}); err != nil {
			t.Fatal(err)
		}
		post(t, a, SendWR{WRID: uint64(i), Opcode: WRSend, RemoteSRQN: srqn, SGL: []SGE{{Addr: localBase, Length: 3000, LKey: localKey}}})
	}
	seen := map[roce.PSN]bool{}
	exchangeWith(t, 0, a, b, func(from *node, frame []byte) bool {
		var p roce.Packet
		if from != a || p.Decode(frame) != nil {
			return false
		}
		psn := p.BTH.PSN()
		drop := psn%4 == 0 && !seen[psn]
		seen[psn] = true
		return drop
	})
	sends := a.scq.take()
	if len(sends) != n {
		t.Fatalf("%d send completions, want %d", len(sends), n)
	}
	for i, wc := range sends {
		if wc.WRID != uint64(i) || wc.Status != WCSuccess {
			t.Errorf("send completion %d: %+v", i, wc)
		}
	}
	for srqn, s := range srqs {
		wcs := s.cq.take()
		if len(wcs) != n/2 {
			t.Fatalf("SRQ %d: %d receive completions, want %d", srqn, len(wcs), n/2)
		}
		for k, wc := range wcs {
			i := 2*k + int(srqn) - 1
			if wc.WRID != uint64(100+i) || wc.Status != WCSuccess || wc.ByteLen != 3000 {
				t.Errorf("SRQ %d completion %d: %+v, want WR %d", srqn, k, wc, 100+i)
			}
			if !bytes.Equal(lb[i*3000:(i+1)*3000], la[:3000]) {
				t.Errorf("message %d not in its buffer", i)
			}
		}
	}
	if a.qp.Counters().TxRetransmits == 0 {
		t.Error("no retransmissions: the filter dropped nothing the test relies on")
	}
}

// An XRC target checks each request's R_Key against the memory of the SRQ it names
// (its PD): two READs queued back to back through SRQs of different PDs each read
// their own PD's region, even when the second is selected before the first's
// response goes out.
func TestXRCMemoryPerSRQ(t *testing.T) {
	memA, memB := newFakeMem(), newFakeMem()
	ra := memA.reg(remoteKey, remoteBase, 4096, AccessRemoteRead)
	rb := memB.reg(remoteKey, remoteBase, 4096, AccessRemoteRead)
	fill(ra, 1)
	fill(rb, 2)
	srqs := map[uint32]*xrcSRQ{1: {rq: newRing(1), cq: &cqRec{}, mem: memA}, 2: {rq: newRing(1), cq: &cqRec{}, mem: memB}}
	a, b := newXRCPair(t, srqs)
	la := a.mem.reg(localKey, localBase, 8192, AccessLocalWrite)
	for i, srqn := range []uint32{1, 2} {
		post(t, a, SendWR{WRID: uint64(i), Opcode: WRRead, RemoteSRQN: srqn, RemoteAddr: remoteBase, RKey: remoteKey,
			SGL: []SGE{{Addr: localBase + uint64(i)*4096, Length: 2000, LKey: localKey}}})
	}
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 0, Opcode: WCRead}, WC{WRID: 1, Opcode: WCRead})
	if !bytes.Equal(la[:2000], ra[:2000]) || !bytes.Equal(la[4096:6096], rb[:2000]) {
		t.Error("a READ read another SRQ's PD")
	}
}
