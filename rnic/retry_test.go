package rnic

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// TestPeerGoneRetryExc: when the peer's QP is destroyed (the verbs service reclaims
// the QPs of a killed application), the survivor's next WRITE fails with
// RETRY_EXC_ERR (retry_cnt 7 + 1) transport timeouts (timeout 14: 8 × 67.1 ms) after
// it is sent, and its QP goes to ERR; with the topology's "retry: rxe" it resends
// for good, as rxe does.
func TestPeerGoneRetryExc(t *testing.T) {
	rto := 4096 * time.Nanosecond << 14
	for _, rxe := range []bool{false, true} {
		v, src, dst := linkedPair(t, 10e9, 1500, Config{RXERetryCnt: rxe})
		spd, _ := src.AllocPD()
		dpd, _ := dst.AllocPD()
		smr, _ := src.RegMR(spd, 4096, qp.AccessLocalWrite)
		dmr, _ := dst.RegMR(dpd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
		ch := src.CreateCompChannel(1)
		scq, _ := src.CreateCQ(4, ch)
		dcq, _ := dst.CreateCQ(4, nil)
		var failedAt clock.Time
		var wcs []qp.WC
		ch.Handler = func(cq *CQ) {
			buf := make([]qp.WC, 4)
			n, _ := cq.PollCQ(buf)
			wcs = append(wcs, buf[:n]...)
			failedAt = src.loop.Now()
			cq.ReqNotifyCQ(false)
		}
		scq.ReqNotifyCQ(false)
		attr := QPInitAttr{Type: qp.RC, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 1}, SendCQ: scq, RecvCQ: scq}
		sq, _ := src.CreateQP(spd, attr)
		attr.SendCQ, attr.RecvCQ = dcq, dcq
		rq, _ := dst.CreateQP(dpd, attr)
		sgid, _ := src.QueryGID(0)
		dgid, _ := dst.QueryGID(0)
		bringUpRC(t, src, sq, dgid, rq.QPN(), roce.MTU1024) // timeout 14, retry_cnt 7
		bringUpRC(t, dst, rq, sgid, sq.QPN(), roce.MTU1024)
		write := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, RemoteAddr: dmr.Addr(), RKey: dmr.RKey(),
			SGL: []qp.SGE{{Addr: smr.Addr(), Length: 4096, LKey: smr.LKey()}}}
		write.WRID = 1
		if err := sq.PostSend(&write); err != nil {
			t.Fatal(err)
		}
		v.RunFor(time.Millisecond)
		if len(wcs) != 1 || wcs[0].Status != qp.WCSuccess {
			t.Fatalf("first WRITE: %+v", wcs)
		}
		if err := dst.DestroyQP(rq); err != nil {
			t.Fatal(err)
		}
		sent := src.loop.Now()
		write.WRID = 2
		if err := sq.PostSend(&write); err != nil {
			t.Fatal(err)
		}
		v.RunFor(2 * time.Second)
		c := sq.Counters()
		if rxe {
			if len(wcs) != 1 || sq.State() != qp.StateRTS || c.Timeouts < 25 {
				t.Errorf("retry: rxe: %+v, %v, %d timeouts in 2 s; want still retrying", wcs[1:], sq.State(), c.Timeouts)
			}
			continue
		}
		took := time.Duration(failedAt - sent)
		if len(wcs) != 2 || wcs[1].Status != qp.WCRetryExcErr || sq.State() != qp.StateErr || c.Timeouts != 8 {
			t.Fatalf("peer gone: %+v, %v, %d timeouts; want RETRY_EXC_ERR, ERR, 8", wcs[1:], sq.State(), c.Timeouts)
		}
		if took < 8*rto || took > 8*rto+time.Millisecond {
			t.Errorf("RETRY_EXC_ERR %v after the post, want 8 × %v = %v", took, rto, 8*rto)
		}
		t.Logf("RETRY_EXC_ERR %v after the post (8 × %v), %d transmissions", took, rto, c.TxRequests)
	}
}
