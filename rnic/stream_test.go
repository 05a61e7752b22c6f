package rnic

import (
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// stream is a backlogged RDMA WRITE stream on one RC QP pair: depth WRITEs of size
// bytes stay posted, each re-posted from the sender's completion handler, so the QP
// always has data while the test runs.
type stream struct {
	t         *testing.T
	sq, rq    *QP
	wr        qp.SendWR
	sgl       [1]qp.SGE
	wcs       [16]qp.WC
	completed int
}

// newStream connects an RC QP of src (created with init's Weight and CC) to one of
// dst and starts depth WRITEs of size bytes. The devices must know each other's
// MACs.
func newStream(t *testing.T, src, dst *Device, init QPInitAttr, size, depth int, mtu roce.MTU) *stream {
	t.Helper()
	s := &stream{t: t}
	spd, _ := src.AllocPD()
	dpd, _ := dst.AllocPD()
	smr, err := src.RegMR(spd, size, qp.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	rmr, err := dst.RegMR(dpd, size, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ch := src.CreateCompChannel(1)
	scq, _ := src.CreateCQ(2*depth, ch)
	dcq, _ := dst.CreateCQ(4, nil)
	init.Type = qp.RC
	init.Cap = QPCap{MaxSendWR: depth, MaxRecvWR: 1}
	init.SendCQ, init.RecvCQ = scq, scq
	if s.sq, err = src.CreateQP(spd, init); err != nil {
		t.Fatal(err)
	}
	peer := QPInitAttr{Type: qp.RC, Cap: init.Cap, SendCQ: dcq, RecvCQ: dcq, CC: init.CC}
	if s.rq, err = dst.CreateQP(dpd, peer); err != nil {
		t.Fatal(err)
	}
	sgid, _ := src.QueryGID(0)
	dgid, _ := dst.QueryGID(0)
	bringUpRC(t, src, s.sq, dgid, s.rq.QPN(), mtu)
	bringUpRC(t, dst, s.rq, sgid, s.sq.QPN(), mtu)
	s.sgl[0] = qp.SGE{Addr: smr.Addr(), Length: uint32(size), LKey: smr.LKey()}
	s.wr = qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: s.sgl[:], RemoteAddr: rmr.Addr(), RKey: rmr.RKey()}
	ch.Handler = s.onCQ
	if err := scq.ReqNotifyCQ(false); err != nil {
		t.Fatal(err)
	}
	for range depth {
		s.post()
	}
	return s
}

func (s *stream) post() {
	s.wr.WRID++
	if err := s.sq.PostSend(&s.wr); err != nil {
		s.t.Errorf("QP %v: re-post: %v", s.sq.QPN(), err)
	}
}

func (s *stream) onCQ(cq *CQ) {
	for {
		n, err := cq.PollCQ(s.wcs[:])
		if err != nil {
			s.t.Errorf("QP %v: %v", s.sq.QPN(), err)
			return
		}
		if n == 0 {
			break
		}
		for _, wc := range s.wcs[:n] {
			if wc.Status != qp.WCSuccess {
				s.t.Errorf("QP %v: completion %v", s.sq.QPN(), wc.Status)
				return
			}
			s.completed++
			s.post()
		}
	}
	if err := cq.ReqNotifyCQ(false); err != nil {
		s.t.Error(err)
	}
}

// bringUpRC moves an RC QP through INIT and RTR to RTS towards the peer.
func bringUpRC(t *testing.T, d *Device, x *QP, peer roce.GID, peerQPN roce.QPN, mtu roce.MTU) {
	t.Helper()
	a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	a = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: peer}, PathMTU: mtu, DestQPN: peerQPN,
		MaxDestRdAtomic: 1, MinRNRTimer: 12}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
		qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	a = qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		t.Fatal(err)
	}
}

// linkedPair is two devices with cfg's settings joined by one link of rate bit/s and
// 1 µs delay on a virtual clock, each knowing the other's MAC.
func linkedPair(t *testing.T, rate uint64, mtu int, cfg Config) (*clock.Virtual, *Device, *Device) {
	t.Helper()
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: rate, Delay: time.Microsecond, MTU: mtu})
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := openPair(t, v, a, b, mtu, cfg)
	return v, d1, d2
}

// openPair opens two devices with cfg's settings on v, on the two ends a and b of a
// link of mtu, each knowing the other's MAC.
func openPair(t *testing.T, v *clock.Virtual, a, b link.Endpoint, mtu int, cfg Config) (*Device, *Device) {
	t.Helper()
	pool := link.NewPool(mtu + 18)
	open := func(name string, ep link.Endpoint, i byte) *Device {
		c := cfg
		c.Name, c.MAC, c.GIDs = name, [6]byte{2, 0, 0, 0, 0, i}, []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, i})}
		c.Loop, c.Link, c.Pool = v.NewLoop(name), ep, pool
		d, err := Open(c)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d1, d2 := open("h1", a, 1), open("h2", b, 2)
	d1.AddNeighbour(netip.AddrFrom4([4]byte{10, 0, 0, 2}), d2.cfg.MAC)
	d2.AddNeighbour(netip.AddrFrom4([4]byte{10, 0, 0, 1}), d1.cfg.MAC)
	return d1, d2
}
