package rnic

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// TestRecvRefillBeforeRNR: a SEND that finds the receive queue empty asks the QP's
// RecvRefill (the verbs service moving receives the client has just put in its ring)
// before it is refused; the receive it posts takes the SEND, with no RNR NAK. Without
// a refill the SEND draws an RNR NAK, as before.
func TestRecvRefillBeforeRNR(t *testing.T) {
	for _, refill := range []bool{true, false} {
		v, src, dst := linkedPair(t, 10e9, 1500, Config{})
		spd, _ := src.AllocPD()
		dpd, _ := dst.AllocPD()
		smr, _ := src.RegMR(spd, 4096, qp.AccessLocalWrite)
		dmr, _ := dst.RegMR(dpd, 4096, qp.AccessLocalWrite)
		scq, _ := src.CreateCQ(4, nil)
		dcq, _ := dst.CreateCQ(4, nil)
		attr := QPInitAttr{Type: qp.RC, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4}}
		attr.SendCQ, attr.RecvCQ = scq, scq
		sq, err := src.CreateQP(spd, attr)
		if err != nil {
			t.Fatal(err)
		}
		attr.SendCQ, attr.RecvCQ = dcq, dcq
		rq, err := dst.CreateQP(dpd, attr)
		if err != nil {
			t.Fatal(err)
		}
		sgid, _ := src.QueryGID(0)
		dgid, _ := dst.QueryGID(0)
		bringUpRC(t, src, sq, dgid, rq.QPN(), roce.MTU1024)
		bringUpRC(t, dst, rq, sgid, sq.QPN(), roce.MTU1024)
		refills := 0
		if refill {
			rq.RecvRefill = func() {
				refills++
				if err := rq.PostRecv(&qp.RecvWR{WRID: 7, SGL: []qp.SGE{{Addr: dmr.Addr(), Length: 4096, LKey: dmr.LKey()}}}); err != nil {
					t.Error(err)
				}
			}
		}
		err = sq.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: smr.Addr(), Length: 3000, LKey: smr.LKey()}}})
		if err != nil {
			t.Fatal(err)
		}
		v.RunFor(100 * time.Microsecond)
		wcs := make([]qp.WC, 4)
		n, _ := dcq.PollCQ(wcs)
		rnrs := rq.Counters().RNRNAKsSent
		switch {
		case refill && (n != 1 || wcs[0].WRID != 7 || wcs[0].ByteLen != 3000 || rnrs != 0 || refills != 1):
			t.Errorf("with a refill: %d receive completions %+v, %d RNR NAKs, %d refills; want the SEND in WR 7, none, 1",
				n, wcs[:n], rnrs, refills)
		case !refill && (n != 0 || rnrs == 0):
			t.Errorf("without a refill: %d receive completions, %d RNR NAKs; want an RNR NAK", n, rnrs)
		}
	}
}
