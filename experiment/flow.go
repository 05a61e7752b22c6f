package experiment

import (
	"errors"
	"fmt"
	"math"

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
	// SrcGID and DstGID are the indexes of the GIDs the two ends use (0 in a star,
	// whose devices have one address each).
	SrcGID, DstGID int
	src, dst       *rnic.Device
	sq, rq         *rnic.QP
	smr, rmr       *rnic.MR
	spd, dpd       *rnic.PD
	scq, dcq       *rnic.CQ
	sgl            [1]qp.SGE
	wcs            [4]qp.WC
	// seg is the payload of a full packet; lastT and lastDelivered are the previous
	// rate sample's time and delivered bytes, if sampled.
	seg           int
	sampled       bool
	lastT         clock.Time
	lastDelivered uint64
}

// pattern is the byte a flow writes at offset i: distinct per flow, so misplaced data
// is caught as surely as missing data.
func pattern(id, i int) byte { return byte(i*7 + id*13 + i>>10) }

// connect creates the flow's QPs, MRs and CQs and brings both QPs to RTS at cfg's MTU
// and payload.
func (f *flow) connect(src, dst *rnic.Device, cfg *Config, onDone func(*flow)) error {
	mtu := cfg.MTU
	f.seg = cfg.segment()
	f.src, f.dst = src, dst
	spd, err := src.AllocPD()
	if err != nil {
		return err
	}
	f.spd = spd
	dpd, err := dst.AllocPD()
	if err != nil {
		return err
	}
	f.dpd = dpd
	if f.smr, err = src.RegMR(spd, f.Size, qp.AccessLocalWrite); err != nil {
		return err
	}
	if f.rmr, err = dst.RegMR(dpd, f.Size, qp.AccessLocalWrite|qp.AccessRemoteWrite); err != nil {
		return err
	}
	b := f.smr.Bytes() // nil on a payload-free device
	for i := range b {
		b[i] = pattern(f.ID, i)
	}
	// The receiver's memory is touched before the run, as an application's buffers are
	// (perftest fills them): otherwise the run takes its page faults, a soft-RNIC's
	// loop thread stalling for each first write into a 4 KiB page (39% of a 10 Gb/s
	// real-time incast's CPU was the receivers' writes).
	clear(f.rmr.Bytes())
	ch := src.CreateCompChannel(1)
	scq, err := src.CreateCQ(16, ch)
	if err != nil {
		return err
	}
	f.scq = scq
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
	f.dcq = dcq
	init := rnic.QPInitAttr{Type: qp.RC, Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4}, Segment: cfg.Payload}
	init.SendCQ, init.RecvCQ = scq, scq
	if f.sq, err = src.CreateQP(spd, init); err != nil {
		return err
	}
	init.SendCQ, init.RecvCQ = dcq, dcq
	if f.rq, err = dst.CreateQP(dpd, init); err != nil {
		return err
	}
	sgid, err := src.QueryGID(f.SrcGID)
	if err != nil {
		return err
	}
	dgid, err := dst.QueryGID(f.DstGID)
	if err != nil {
		return err
	}
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

// rateSample is the flow's pacing rate, window, bytes in flight and HPCC++'s U at t,
// and the rate of its payload delivered since its previous sample; an unpaced flow's
// rate is the line rate, a flow without a window has window 0, and outside the HPCC
// modes it has no U.
func (f *flow) rateSample(t clock.Time, lineRate uint64) RateSample {
	r := RateSample{T: t, Flow: f.ID}
	r.Rate, r.Window = f.sq.Rate()
	if math.IsInf(r.Rate, 1) {
		r.Rate = float64(lineRate)
	}
	if math.IsInf(r.Window, 1) {
		r.Window = 0
	}
	r.InFlight = f.sq.InFlightBytes()
	if st, ok := f.sq.HPCC(); ok {
		r.U, r.HasU = st.U, true
	}
	d := f.deliveredBytes()
	if f.sampled && t > f.lastT {
		r.Measured = float64(d-f.lastDelivered) * 8e9 / float64(t-f.lastT)
	}
	f.sampled, f.lastT, f.lastDelivered = true, t, d
	return r
}

// deliveredBytes is the flow's payload the receiver has accepted in sequence: every
// packet but a message's last is full, so it is the packets accepted times the
// payload of one, up to the size; all of it once finished. Counted at the receiver,
// it does not lag by an ACK interval (64 packets under DCQCN).
func (f *flow) deliveredBytes() uint64 {
	if f.Done > 0 && f.Failed == "" {
		return uint64(f.Size)
	}
	return f.receivedBytes()
}

// receivedBytes is deliveredBytes as the receiver alone knows it (read on its loop):
// the packets its QP accepted times the payload of one, up to the size.
func (f *flow) receivedBytes() uint64 {
	if f.rq == nil {
		return 0
	}
	return min(f.rq.Counters().RxRequests*uint64(f.seg), uint64(f.Size))
}

// verify checks every byte the flow wrote at its receiver; a payload-free run has none
// to check.
func (f *flow) verify() error {
	for i, c := range f.rmr.Bytes() {
		if want := pattern(f.ID, i); c != want {
			return fmt.Errorf("flow %d: byte %d at the receiver is %#02x, want %#02x", f.ID, i, c, want)
		}
	}
	return nil
}

// release destroys the flow's QPs, CQs, MRs and PDs on both devices once its data is
// checked, so that a long mix holds memory only for the flows in progress. Each device
// does it on its own loop after the current event (the completion being handled). A
// frame of the flow still in flight then finds no QP and is counted as such.
func (f *flow) release() {
	for _, side := range []struct {
		d   *rnic.Device
		q   *rnic.QP
		cq  *rnic.CQ
		mr  *rnic.MR
		pd  *rnic.PD
		who string
	}{{f.src, f.sq, f.scq, f.smr, f.spd, "sender"}, {f.dst, f.rq, f.dcq, f.rmr, f.dpd, "receiver"}} {
		side.d.Do(func() {
			err := errors.Join(side.d.DestroyQP(side.q), side.d.DestroyCQ(side.cq), side.d.DeregMR(side.mr), side.d.DeallocPD(side.pd))
			if err != nil && f.Failed == "" {
				f.Failed = fmt.Sprintf("releasing the %s's resources: %v", side.who, err)
			}
		})
	}
	f.sq, f.rq, f.smr, f.rmr = nil, nil, nil, nil
}
