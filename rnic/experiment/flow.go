package experiment

import (
	"fmt"

	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
)

// flow is one RDMA WRITE of Size bytes from host Src to host Dst, on its own RC QP
// pair, started at Start. It completes when the sender's completion arrives.
type flow struct {
	ID       int
	Src, Dst int
	Size     int
	Start    clock.Time
	Done     clock.Time // 0 until complete
	Failed   string
	sq, rq   *rnic.QP
	smr, rmr *rnic.MR
	sgl      [1]qp.SGE
	wcs      [4]qp.WC
}

// pattern is the byte a flow writes at offset i: distinct per flow, so misplaced data
// is caught as surely as missing data.
func pattern(id, i int) byte { return byte(i*7 + id*13 + i>>10) }

// connect creates the flow's QPs, MRs and CQs and brings both QPs to RTS.
func (f *flow) connect(src, dst *rnic.Device, mtu roce.MTU, onDone func(*flow)) error {
	spd, err := src.AllocPD()
	if err != nil {
		return err
	}
	dpd, err := dst.AllocPD()
	if err != nil {
		return err
	}
	if f.smr, err = src.RegMR(spd, f.Size, qp.AccessLocalWrite); err != nil {
		return err
	}
	if f.rmr, err = dst.RegMR(dpd, f.Size, qp.AccessLocalWrite|qp.AccessRemoteWrite); err != nil {
		return err
	}
	b := f.smr.Bytes()
	for i := range b {
		b[i] = pattern(f.ID, i)
	}
	ch := src.CreateCompChannel(1)
	scq, err := src.CreateCQ(16, ch)
	if err != nil {
		return err
	}
	ch.Handler = func(cq *rnic.CQ) {
		n, err := cq.PollCQ(f.wcs[:])
		switch {
		case err != nil:
			f.Failed = err.Error()
		case n > 0 && f.wcs[0].Status != qp.WCSuccess:
			f.Failed = "completion status " + f.wcs[0].Status.String()
		}
		f.Done = src.Now()
		onDone(f)
	}
	if err := scq.ReqNotifyCQ(false); err != nil {
		return err
	}
	dcq, err := dst.CreateCQ(16, nil)
	if err != nil {
		return err
	}
	init := rnic.QPInitAttr{Type: qp.RC, Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4}}
	init.SendCQ, init.RecvCQ = scq, scq
	if f.sq, err = src.CreateQP(spd, init); err != nil {
		return err
	}
	init.SendCQ, init.RecvCQ = dcq, dcq
	if f.rq, err = dst.CreateQP(dpd, init); err != nil {
		return err
	}
	sgid, _ := src.QueryGID(0)
	dgid, _ := dst.QueryGID(0)
	if err := bringUp(src, f.sq, dgid, f.rq.QPN(), mtu); err != nil {
		return fmt.Errorf("flow %d sender: %w", f.ID, err)
	}
	if err := bringUp(dst, f.rq, sgid, f.sq.QPN(), mtu); err != nil {
		return fmt.Errorf("flow %d receiver: %w", f.ID, err)
	}
	return nil
}

// bringUp moves an RC QP through INIT and RTR to RTS towards the peer.
func bringUp(d *rnic.Device, x *rnic.QP, peer roce.GID, peerQPN roce.QPN, mtu roce.MTU) error {
	a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return err
	}
	a = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: peer}, PathMTU: mtu, DestQPN: peerQPN,
		MaxDestRdAtomic: 1, MinRNRTimer: 12}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
		qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return err
	}
	a = qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	return d.ModifyQP(x, &a, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic)
}

// post starts the flow's WRITE.
func (f *flow) post() error {
	f.sgl[0] = qp.SGE{Addr: f.smr.Addr(), Length: uint32(f.Size), LKey: f.smr.LKey()}
	return f.sq.PostSend(&qp.SendWR{WRID: uint64(f.ID), Opcode: qp.WRWrite, Flags: qp.SendSignaled,
		SGL: f.sgl[:], RemoteAddr: f.rmr.Addr(), RKey: f.rmr.RKey()})
}

// verify checks every byte the flow wrote at its receiver.
func (f *flow) verify() error {
	for i, c := range f.rmr.Bytes() {
		if want := pattern(f.ID, i); c != want {
			return fmt.Errorf("flow %d: byte %d at the receiver is %#02x, want %#02x", f.ID, i, c, want)
		}
	}
	return nil
}
