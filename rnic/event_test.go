package rnic

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// TestAsyncEventsOfQPs: a QP still in RTR that accepts a request raises COMM_EST
// (once, and not again in RTS); a QP of an SRQ moved to ERR raises
// QP_LAST_WQE_REACHED; an SRQ below its limit SRQ_LIMIT_REACHED, numbered as
// ibv_event_type numbers them.
func TestAsyncEventsOfQPs(t *testing.T) {
	var events []AsyncEvent
	v, src, dst := linkedPair(t, 10e9, 1500, Config{AsyncHandler: func(e AsyncEvent) { events = append(events, e) }})
	spd, _ := src.AllocPD()
	dpd, _ := dst.AllocPD()
	smr, _ := src.RegMR(spd, 4096, qp.AccessLocalWrite)
	dmr, _ := dst.RegMR(dpd, 4096, qp.AccessLocalWrite)
	scq, _ := src.CreateCQ(8, nil)
	dcq, _ := dst.CreateCQ(8, nil)
	srq, _ := dst.CreateSRQ(dpd, SRQInitAttr{MaxWR: 8})
	sq, _ := src.CreateQP(spd, QPInitAttr{Type: qp.RC, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 1}, SendCQ: scq, RecvCQ: scq})
	rq, _ := dst.CreateQP(dpd, QPInitAttr{Type: qp.RC, Cap: QPCap{MaxSendWR: 4}, SendCQ: dcq, RecvCQ: dcq, SRQ: srq})
	sgid, _ := src.QueryGID(0)
	dgid, _ := dst.QueryGID(0)
	bringUpRC(t, src, sq, dgid, rq.QPN(), roce.MTU1024)
	a := qp.Attr{State: qp.StateInit, Port: 1}
	if err := dst.ModifyQP(rq, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	a = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: sgid}, PathMTU: roce.MTU1024, DestQPN: sq.QPN(), MinRNRTimer: 12,
		MaxDestRdAtomic: 1}
	if err := dst.ModifyQP(rq, &a, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMinRNRTimer|
		qp.AttrMaxDestRdAtomic); err != nil {
		t.Fatal(err)
	}
	if err := srq.ModifySRQ(2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := srq.PostSRQRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{{Addr: dmr.Addr(), Length: 64, LKey: dmr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	send := qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: smr.Addr(), Length: 64, LKey: smr.LKey()}}}
	if err := sq.PostSend(&send); err != nil {
		t.Fatal(err)
	}
	v.RunFor(time.Millisecond)
	want := []AsyncEvent{{Type: EventSRQLimitReached, SRQ: srq}, {Type: EventCommEst, QP: rq}}
	if len(events) != 2 || events[0] != want[0] || events[1] != want[1] {
		t.Fatalf("after a SEND to a QP in RTR: %+v, want SRQ_LIMIT_REACHED and COMM_EST", events)
	}
	a = qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7}
	if err := dst.ModifyQP(rq, &a, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		t.Fatal(err)
	}
	if err := sq.PostSend(&send); err != nil {
		t.Fatal(err)
	}
	v.RunFor(time.Millisecond)
	if len(events) != 2 {
		t.Fatalf("a SEND in RTS raised %+v", events[2:])
	}
	a = qp.Attr{State: qp.StateErr}
	if err := dst.ModifyQP(rq, &a, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 || events[2] != (AsyncEvent{Type: EventLastWQEReached, QP: rq}) {
		t.Fatalf("a QP of an SRQ to ERR: %+v, want QP_LAST_WQE_REACHED", events[2:])
	}
	if EventCommEst != 4 || EventSRQLimitReached != 15 || EventLastWQEReached != 16 {
		t.Error("event types are not ibv_event_type's")
	}
}
