package qp

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

func TestUCWriteAndSendSurviveAGap(t *testing.T) {
	o := defaultOpts()
	o.typ = UC
	o.access = AccessLocalWrite | AccessRemoteWrite
	a, b := newPair(t, o)
	la, lb, _, rb := withRegions(a, b, AccessRemoteWrite)
	fill(la[:8192], 3)
	postRecv(t, b, 1, localBase, 8192)
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{localBase, 3000, localKey}}}) // packet 2 of 3 is lost
	post(t, a, SendWR{WRID: 2, Opcode: WRSendWithImm, Imm: 5, SGL: []SGE{{localBase + 100, 2000, localKey}}})
	post(t, a, SendWR{WRID: 3, Opcode: WRWrite, SGL: []SGE{{localBase, 4000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	pkt := 0
	exchangeWith(t, 0, a, b, func(from *node, _ []byte) bool { pkt++; return pkt == 2 })
	// UC completes send WRs once transmitted; the broken SEND is dropped and its
	// receive WR serves the next SEND.
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCSend}, WC{WRID: 2, Opcode: WCSend}, WC{WRID: 3, Opcode: WCWrite})
	expectWC(t, b.rcq.take(), WC{WRID: 1, Opcode: WCRecv, ByteLen: 2000, Imm: 5, Flags: WCFlagWithImm})
	if !bytes.Equal(lb[:2000], la[100:2100]) || !bytes.Equal(rb[:4000], la[:4000]) {
		t.Error("data differs")
	}
	if c := b.qp.Counters(); c.DropUCMessage != 1 {
		t.Errorf("dropped %d UC packets, want the broken message's last one", c.DropUCMessage)
	}
	if b.qp.HasResponse() {
		t.Error("a UC responder queued a response")
	}
}

func udPair(t *testing.T, v6 bool) (a, b *node) {
	o := defaultOpts()
	o.typ = UD
	a, b = newPair(t, o)
	withRegions(a, b, 0)
	if v6 {
		a.av.DGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::1"))
		b.av.DGID = roce.GIDFromAddr(netip.MustParseAddr("fd00::2"))
	}
	return a, b
}

func udSend(a, b *node, wrid uint64, n uint32, qkey uint32) SendWR {
	ah := b.av
	ah.SGID, ah.SrcMAC = a.av.DGID, a.av.DstMAC
	return SendWR{WRID: wrid, Opcode: WRSendWithImm, Imm: 77, SGL: []SGE{{localBase, n, localKey}}, AH: &ah,
		RemoteQPN: uint32(b.qp.QPN()), RemoteQKey: qkey}
}

func TestUDSendWithGRH(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		a, b := udPair(t, v6)
		la := a.mem.regions[localKey].buf
		lb := b.mem.regions[localKey].buf
		fill(la[:1024], 9)
		postRecv(t, b, 1, localBase, 2000)
		postRecv(t, b, 2, localBase+4096, 2000)
		post(t, a, udSend(a, b, 1, 1000, 0x11111111))
		post(t, a, udSend(a, b, 2, 10, 0x22222222))   // wrong Q_Key: dropped
		post(t, a, udSend(a, b, 3, 1024, 0x80000000)) // high bit: the QP's own Q_Key
		var frames [][]byte
		exchangeWith(t, 0, a, b, func(_ *node, f []byte) bool { frames = append(frames, bytes.Clone(f)); return false })
		expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCSend}, WC{WRID: 2, Opcode: WCSend}, WC{WRID: 3, Opcode: WCSend})
		got := b.rcq.take()
		expectWC(t, got, WC{WRID: 1, Opcode: WCRecv, ByteLen: 1040, Imm: 77, Flags: WCFlagGRH | WCFlagWithImm},
			WC{WRID: 2, Opcode: WCRecv, ByteLen: 1064, Imm: 77, Flags: WCFlagGRH | WCFlagWithImm})
		if got[0].SrcQP != uint32(a.qp.QPN()) {
			t.Errorf("src_qp %#x", got[0].SrcQP)
		}
		if wantSL := map[bool]uint8{false: SLIPv4, true: SLIPv6}[v6]; got[0].SL != wantSL || got[1].SL != wantSL {
			t.Errorf("v6=%v: sl %d, %d, want the L3 header type %d", v6, got[0].SL, got[1].SL, wantSL)
		}
		if b.qp.Counters().DropQKey != 1 {
			t.Errorf("Q_Key drops: %d", b.qp.Counters().DropQKey)
		}
		var p roce.Packet
		if err := p.Decode(frames[0]); err != nil {
			t.Fatal(err)
		}
		var grh [40]byte
		if v6 {
			copy(grh[:], p.IPv6)
		} else {
			copy(grh[20:], p.IPv4) // 20 zero bytes, then the IPv4 header
		}
		if !bytes.Equal(lb[:40], grh[:]) || !bytes.Equal(lb[40:1040], la[:1000]) {
			t.Errorf("v6=%v: receive buffer does not hold GRH + payload", v6)
		}
		if p.UDP.SrcPort() != roce.DatagramSourcePort(a.qp.QPN()) {
			t.Errorf("UDP source port %#x", p.UDP.SrcPort())
		}
	}
}

func TestUDSendQueueError(t *testing.T) {
	a, b := udPair(t, false)
	post(t, a, udSend(a, b, 1, 2000, 0x11111111)) // longer than the port MTU
	post(t, a, udSend(a, b, 2, 10, 0x11111111))
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Status: WCLocLenErr, Opcode: WCSend}, WC{WRID: 2, Status: WCWRFlushErr, Opcode: WCSend})
	if a.qp.State() != StateSQE {
		t.Fatalf("state %v, want SQE", a.qp.State())
	}
	if err := a.qp.Modify(&Attr{State: StateRTS}, AttrState); err != nil {
		t.Fatal(err)
	}
	postRecv(t, b, 1, localBase, 100)
	post(t, a, udSend(a, b, 3, 10, 0x11111111))
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 3, Opcode: WCSend})
	expectWC(t, b.rcq.take(), WC{WRID: 1, Opcode: WCRecv, ByteLen: 50, Imm: 77, Flags: WCFlagGRH | WCFlagWithImm})
}

func TestSRQ(t *testing.T) {
	srq := newRing(4)
	o := defaultOpts()
	a, b := newNode(t, o, 0), newNode(t, o, 1)
	var err error
	b.qp, err = New(Config{Type: RC, QPN: 0x22, Memory: b.mem, SendCQ: b.scq, RecvCQ: b.rcq, SRQ: srq, MaxSendWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, o, a, b)
	connect(t, o, b, a)
	withRegions(a, b, 0)
	if err := b.qp.PostRecv(&RecvWR{}); err == nil {
		t.Error("PostRecv on an SRQ-attached QP succeeded")
	}
	srq.push(RecvWR{WRID: 7, SGL: []SGE{{localBase, 100, localKey}}})
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{localBase, 50, localKey}}})
	exchange(t, 0, a, b)
	expectWC(t, b.rcq.take(), WC{WRID: 7, Opcode: WCRecv, ByteLen: 50})
}
