package qp

import (
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// flushed lists WR_FLUSH_ERR completions for wrids.
func flushed(op WCOpcode, wrids ...uint64) []WC {
	var w []WC
	for _, id := range wrids {
		w = append(w, WC{WRID: id, Status: WCWRFlushErr, Opcode: op})
	}
	return w
}

func TestRemoteErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		mrAccess  Access // the remote region's access
		qpAccess  Access // the responder QP's access flags
		wr        SendWR
		want      WCStatus
		nakCode   uint8
		recvWant  WCStatus // the responder's receive WR, if one was taken
		smallRecv bool
	}{
		{name: "invalid rkey", mrAccess: AccessRemoteWrite, wr: SendWR{Opcode: WRWrite, RKey: 99, RemoteAddr: remoteBase},
			want: WCRemAccessErr, nakCode: roce.NAKRemoteAccessError},
		{name: "out of bounds", mrAccess: AccessRemoteRead, wr: SendWR{Opcode: WRRead, RKey: remoteKey, RemoteAddr: remoteBase + regionSize - 4},
			want: WCRemAccessErr, nakCode: roce.NAKRemoteAccessError},
		{name: "MR lacks REMOTE_WRITE", mrAccess: AccessRemoteRead, wr: SendWR{Opcode: WRWrite, RKey: remoteKey, RemoteAddr: remoteBase},
			want: WCRemAccessErr, nakCode: roce.NAKRemoteAccessError},
		{name: "MR lacks REMOTE_ATOMIC", mrAccess: AccessRemoteRead, wr: SendWR{Opcode: WRFetchAdd, RKey: remoteKey, RemoteAddr: remoteBase},
			want: WCRemAccessErr, nakCode: roce.NAKRemoteAccessError},
		{name: "QP lacks REMOTE_READ", mrAccess: AccessRemoteRead, qpAccess: AccessRemoteWrite,
			wr:   SendWR{Opcode: WRRead, RKey: remoteKey, RemoteAddr: remoteBase},
			want: WCRemInvReqErr, nakCode: roce.NAKInvalidRequest},
		{name: "misaligned atomic", mrAccess: AccessRemoteAtomic, wr: SendWR{Opcode: WRCompareSwap, RKey: remoteKey, RemoteAddr: remoteBase + 4},
			want: WCRemInvReqErr, nakCode: roce.NAKInvalidRequest},
		{name: "receive buffer too small", wr: SendWR{Opcode: WRSend}, smallRecv: true,
			want: WCRemInvReqErr, nakCode: roce.NAKInvalidRequest, recvWant: WCLocLenErr},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := defaultOpts()
			if c.qpAccess != 0 {
				o.access = c.qpAccess
			}
			a, b := newPair(t, o)
			withRegions(a, b, c.mrAccess)
			postRecv(t, b, 50, localBase, 100)
			postRecv(t, b, 51, localBase, 100)
			postRecv(t, b, 52, localBase, 100)
			post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 10, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
			wr := c.wr
			wr.WRID = 2
			wr.SGL = []SGE{{localBase, 8, localKey}}
			if c.smallRecv {
				wr.SGL[0].Length = 2000
			}
			if c.mrAccess&AccessRemoteWrite == 0 {
				a.qp.sq.at(0).wr.Opcode = WRSend // the warm-up op needs no remote access
			}
			post(t, a, wr)
			post(t, a, SendWR{WRID: 3, Opcode: WRSend, SGL: []SGE{{localBase, 8, localKey}}})
			post(t, a, SendWR{WRID: 4, Opcode: WRSend, SGL: []SGE{{localBase, 8, localKey}}})
			exchange(t, 0, a, b)

			got := a.scq.take()
			expectWC(t, got[1:], append([]WC{{WRID: 2, Status: c.want, Opcode: wr.Opcode.wcOpcode()}},
				flushed(WCSend, 3, 4)...)...)
			if got[0].WRID != 1 || got[0].Status != WCSuccess {
				t.Errorf("the WR before the error: %+v", got[0])
			}
			if a.qp.State() != StateErr || b.qp.State() != StateErr {
				t.Errorf("states %v/%v, want ERR/ERR", a.qp.State(), b.qp.State())
			}
			if b.qp.Counters().ErrorNAKsSent != 1 {
				t.Errorf("responder sent %d error NAKs", b.qp.Counters().ErrorNAKsSent)
			}
			recv := b.rcq.take()
			if c.recvWant != 0 {
				if len(recv) == 0 || recv[len(recv)-2].Status != c.recvWant {
					t.Errorf("responder receive completions %+v, want %v then a flush", recv, c.recvWant)
				}
			} else if recv[len(recv)-1].Status != WCWRFlushErr {
				t.Errorf("responder receive queue not flushed: %+v", recv)
			}
		})
	}
}

func TestLocalProtectionError(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	withRegions(a, b, AccessRemoteWrite)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 10, 77}}, RemoteAddr: remoteBase, RKey: remoteKey})
	post(t, a, SendWR{WRID: 2, Opcode: WRWrite, SGL: []SGE{{localBase, 10, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Status: WCLocProtErr, Opcode: WCWrite}, WC{WRID: 2, Status: WCWRFlushErr, Opcode: WCWrite})
	if a.qp.State() != StateErr || b.qp.State() != StateRTS {
		t.Errorf("states %v/%v, want ERR/RTS", a.qp.State(), b.qp.State())
	}
}

func TestRNRRecovers(t *testing.T) {
	o := defaultOpts()
	o.rnrRetry = 3
	a, b := newPair(t, o)
	withRegions(a, b, 0)
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{localBase, 3000, localKey}}})
	// No receive WR: the responder answers RNR NAK and the requester waits the
	// responder's min_rnr_timer (code 1: 10 µs) before retrying.
	buf := make([]byte, MaxFrameSize)
	n, _ := a.qp.NextRequest(0, buf)
	b.qp.ReceiveFrame(0, buf[:n])
	for a.qp.HasRequest() { // the rest of the message is out of sequence now
		n, _ = a.qp.NextRequest(0, buf)
		b.qp.ReceiveFrame(0, buf[:n])
	}
	n, _ = b.qp.NextResponse(buf)
	a.qp.ReceiveFrame(0, buf[:n])
	if got := a.qp.Counters().RNRNAKsRecv; got != 1 {
		t.Fatalf("RNR NAKs received: %d", got)
	}
	if d := a.qp.NextDeadline(); d != 10_000 {
		t.Errorf("RNR wait ends at %d ns, want 10000 (IBTA table 45 code 1)", d)
	}
	if a.qp.HasRequest() {
		t.Error("requester transmits during the RNR wait")
	}
	postRecv(t, b, 9, localBase, 4000)
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCSend})
	expectWC(t, b.rcq.take(), WC{WRID: 9, Opcode: WCRecv, ByteLen: 3000})
}

func TestRNRExhausted(t *testing.T) {
	o := defaultOpts()
	o.rnrRetry = 2
	a, b := newPair(t, o)
	withRegions(a, b, 0)
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{localBase, 100, localKey}}})
	post(t, a, SendWR{WRID: 2, Opcode: WRSend, SGL: []SGE{{localBase, 100, localKey}}})
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Status: WCRNRRetryExcErr, Opcode: WCSend}, WC{WRID: 2, Status: WCWRFlushErr, Opcode: WCSend})
	if got := b.qp.Counters().RNRNAKsSent; got != 3 {
		t.Errorf("responder sent %d RNR NAKs, want 3 (first try + rnr_retry 2)", got)
	}
	if a.qp.State() != StateErr {
		t.Errorf("requester in %v", a.qp.State())
	}
}

func TestRetryExhausted(t *testing.T) {
	o := defaultOpts()
	o.retry, o.timeout = 3, 10
	a, b := newPair(t, o)
	withRegions(a, b, AccessRemoteWrite)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 5000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	post(t, a, SendWR{WRID: 2, Opcode: WRRead, SGL: []SGE{{localBase, 5000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	blackhole := func(from *node, _ []byte) bool { return from == a }
	end := exchangeWith(t, 0, a, b, blackhole)
	expectWC(t, a.scq.take(), WC{WRID: 1, Status: WCRetryExcErr, Opcode: WCWrite}, WC{WRID: 2, Status: WCWRFlushErr, Opcode: WCRead})
	if c := a.qp.Counters(); c.Timeouts != 4 {
		t.Errorf("%d timeouts, want 4 (retry_cnt 3 + the last)", c.Timeouts)
	}
	// Four transport timeouts of 4.096 µs × 2^10 each.
	if rto := int64(4096 << 10); end < 4*rto || end > 5*rto {
		t.Errorf("error after %d ns, want about 4 × %d", end, rto)
	}
}

func TestErrorMidFlightFlushesInOrder(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	withRegions(a, b, AccessRemoteWrite)
	for i := range 4 {
		postRecv(t, b, uint64(100+i), localBase, 4096)
	}
	for i := range 10 {
		post(t, a, SendWR{WRID: uint64(i), Opcode: WRSend, SGL: []SGE{{localBase, 2048, localKey}}})
	}
	// Deliver the first two messages' packets and their ACK only.
	buf := make([]byte, MaxFrameSize)
	for range 4 {
		n, _ := a.qp.NextRequest(0, buf)
		b.qp.ReceiveFrame(0, buf[:n])
	}
	n, _ := b.qp.NextResponse(buf)
	a.qp.ReceiveFrame(0, buf[:n])
	for a.qp.HasRequest() { // the rest is sent and lost
		a.qp.NextRequest(0, buf)
	}
	if err := a.qp.Modify(&Attr{State: StateErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Modify(&Attr{State: StateErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	post(t, a, SendWR{WRID: 10, Opcode: WRSend}) // posted in ERR: flushed at once
	want := []WC{{WRID: 0, Opcode: WCSend}, {WRID: 1, Opcode: WCSend}}
	want = append(want, flushed(WCSend, 2, 3, 4, 5, 6, 7, 8, 9, 10)...)
	expectWC(t, a.scq.take(), want...)
	wantRecv := []WC{{WRID: 100, Opcode: WCRecv, ByteLen: 2048}, {WRID: 101, Opcode: WCRecv, ByteLen: 2048}}
	expectWC(t, b.rcq.take(), append(wantRecv, flushed(WCRecv, 102, 103)...)...)
	if a.qp.HasRequest() || a.qp.NextDeadline() != Never || a.qp.InFlightBytes() != 0 {
		t.Error("a QP in ERR still has work, timers or bytes in flight")
	}
	// RESET discards everything; the QP can be brought up again.
	if err := a.qp.Modify(&Attr{State: StateReset}, AttrState); err != nil || a.qp.State() != StateReset {
		t.Fatalf("to RESET: %v", err)
	}
}

func TestSQDDrains(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	withRegions(a, b, AccessRemoteWrite)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 3000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	buf := make([]byte, MaxFrameSize)
	n, _ := a.qp.NextRequest(0, buf) // the first of three packets is out
	b.qp.ReceiveFrame(0, buf[:n])
	if err := a.qp.Modify(&Attr{State: StateSQD}, AttrState); err != nil {
		t.Fatal(err)
	}
	post(t, a, SendWR{WRID: 2, Opcode: WRWrite, SGL: []SGE{{localBase, 10, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCWrite}) // the started WR finishes, the new one waits
	if err := a.qp.Modify(&Attr{State: StateRTS}, AttrState); err != nil {
		t.Fatal(err)
	}
	exchange(t, 0, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 2, Opcode: WCWrite})
}

// TestRetryCntCounts: retry_cnt N is N retries after the first transmission, then
// RETRY_EXC_ERR and ERR, (N+1) transport timeouts after the send (IBTA 9.7.6.1.3),
// for every N including 7. rxe reads 7 as "forever": so does Config.RXERetryCnt.
func TestRetryCntCounts(t *testing.T) {
	const timeout = 10
	rto := int64(4096 << timeout)
	for _, retry := range []uint8{0, 1, 7} {
		o := defaultOpts()
		o.retry, o.timeout = retry, timeout
		a, b := newPair(t, o)
		withRegions(a, b, AccessRemoteWrite)
		post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 100, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
		end := exchangeWith(t, 0, a, b, func(*node, []byte) bool { return true }) // the peer is gone
		expectWC(t, a.scq.take(), WC{WRID: 1, Status: WCRetryExcErr, Opcode: WCWrite})
		c := a.qp.Counters()
		if c.TxRequests != uint64(retry)+1 || c.Timeouts != uint64(retry)+1 || a.qp.State() != StateErr {
			t.Errorf("retry_cnt %d: %d transmissions, %d timeouts, %v; want %d, %d, ERR",
				retry, c.TxRequests, c.Timeouts, a.qp.State(), retry+1, retry+1)
		}
		if want := int64(retry+1) * rto; end < want || end >= want+rto {
			t.Errorf("retry_cnt %d: RETRY_EXC_ERR at %d ns, want (%d+1) × %d", retry, end, retry, rto)
		}
	}

	o := defaultOpts()
	o.timeout, o.rxeRetryCnt = timeout, true
	a, b := newPair(t, o)
	withRegions(a, b, AccessRemoteWrite)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 100, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	buf := make([]byte, MaxFrameSize)
	for range 100 {
		if _, ok := a.qp.NextRequest(0, buf); !ok {
			t.Fatalf("RXERetryCnt: no retransmission after %d timeouts (%v)", a.qp.Counters().Timeouts, a.qp.State())
		}
		a.qp.OnTimer(a.qp.NextDeadline())
	}
	if wcs := a.scq.take(); len(wcs) != 0 || a.qp.State() != StateRTS {
		t.Errorf("RXERetryCnt with retry_cnt 7: %v in %v after 100 timeouts, want retrying in RTS", wcs, a.qp.State())
	}
}

// TestRNRRetry7IsInfinite: rnr_retry 7 never runs out (IBTA 9.7.5.2.8).
func TestRNRRetry7IsInfinite(t *testing.T) {
	a, b := newPair(t, defaultOpts()) // rnr_retry 7
	withRegions(a, b, 0)
	post(t, a, SendWR{WRID: 1, Opcode: WRSend, SGL: []SGE{{localBase, 100, localKey}}})
	buf := make([]byte, MaxFrameSize)
	now := int64(0)
	for range 100 {
		n, ok := a.qp.NextRequest(now, buf)
		if !ok {
			t.Fatalf("no retry after %d RNR NAKs (%v)", a.qp.Counters().RNRNAKsRecv, a.qp.State())
		}
		b.qp.ReceiveFrame(now, buf[:n])
		n, _ = b.qp.NextResponse(buf)
		a.qp.ReceiveFrame(now, buf[:n])
		now = a.qp.NextDeadline()
		a.qp.OnTimer(now)
	}
	postRecv(t, b, 9, localBase, 4000)
	exchange(t, now, a, b)
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCSend})
}
