package rnic

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/cm"
)

// bringUpXRC moves an XRC QP to RTR (a target stays there, as ibv_xsrq_pingpong's do)
// or RTS (an initiator) towards peerQPN, with the kernel's XRC_INI/XRC_TGT masks.
func bringUpXRC(t *testing.T, d *Device, x *QP, gid roce.GID, peerQPN roce.QPN) {
	t.Helper()
	rtr := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
	if x.q.Type() == qp.XRCRecv {
		rtr |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	}
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: loopbackAccess}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: gid}, PathMTU: roce.MTU1024, DestQPN: peerQPN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12}, rtr},
	}
	if x.q.Type() == qp.XRCSend {
		steps = append(steps, struct {
			a    qp.Attr
			mask qp.AttrMask
		}{qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qp.AttrState | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrSQPSN | qp.AttrMaxQPRdAtomic})
	}
	for _, s := range steps {
		if err := d.ModifyQP(x, &s.a, s.mask); err != nil {
			t.Fatalf("%v %v: %v", x.q.Type(), s.a.State, err)
		}
	}
}

// An XRC initiator sends through one target QP into two XRC SRQs of the target's
// domain, which complete on their own CQs; a domain opened twice by file is shared,
// one opened privately is not; the busy and missing cases fail as the verbs say.
func TestXRCDevice(t *testing.T) {
	v, d, _ := pair(t)
	gid, _ := d.QueryGID(0)
	file := XRCDFile{Dev: 1, Ino: 42}
	if _, err := d.OpenXRCD(&file, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open without O_CREAT of a file with no domain: %v, want ErrNotFound", err)
	}
	xa, err := d.OpenXRCD(&file, XRCDCreate)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := d.OpenXRCD(&file, 0) // a second process opening the same file
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenXRCD(&file, XRCDCreate|XRCDExclusive); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("O_CREAT|O_EXCL on a file with a domain: %v, want ErrInvalidArgument", err)
	}
	private, _ := d.OpenXRCD(nil, XRCDCreate)

	pdI, _ := d.AllocPD()
	pdT, _ := d.AllocPD()
	mrI, _ := d.RegMR(pdI, 8192, loopbackAccess)
	mrT, _ := d.RegMR(pdT, 8192, loopbackAccess)
	for i := range mrI.Bytes() {
		mrI.Bytes()[i] = byte(i * 7)
	}
	scq, _ := d.CreateCQ(8, nil)
	cq1, _ := d.CreateCQ(8, nil)
	cq2, _ := d.CreateCQ(8, nil)
	srq1, err := d.CreateXRCSRQ(pdT, xa, cq1, SRQInitAttr{MaxWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	srq2, _ := d.CreateXRCSRQ(pdT, xb, cq2, SRQInitAttr{MaxWR: 4})
	foreign, _ := d.CreateXRCSRQ(pdT, private, cq2, SRQInitAttr{MaxWR: 4})
	if srq1.SRQNum() == 0 || srq1.SRQNum() == srq2.SRQNum() {
		t.Fatalf("SRQ numbers %d and %d", srq1.SRQNum(), srq2.SRQNum())
	}
	if _, err := d.CreateQP(nil, QPInitAttr{Type: qp.XRCRecv, RecvCQ: cq1, XRCD: xa}); err == nil {
		t.Fatal("an XRC_RECV QP with a CQ was created")
	}
	tgt, err := d.CreateQP(nil, QPInitAttr{Type: qp.XRCRecv, XRCD: xa})
	if err != nil {
		t.Fatal(err)
	}
	ini, err := d.CreateQP(pdI, QPInitAttr{Type: qp.XRCSend, SendCQ: scq, Cap: QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenQP(private, tgt.QPN()); err == nil {
		t.Fatal("a QP was opened through another domain")
	}
	opened, err := d.OpenQP(xb, tgt.QPN())
	if err != nil || opened != tgt {
		t.Fatalf("open QP through the shared domain: %v", err)
	}
	bringUpXRC(t, d, tgt, gid, ini.QPN())
	bringUpXRC(t, d, ini, gid, tgt.QPN())

	sge := func(mr *MR, off, n int) []qp.SGE {
		return []qp.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
	}
	srq1.PostSRQRecv(&qp.RecvWR{WRID: 11, SGL: sge(mrT, 0, 2048)})
	srq2.PostSRQRecv(&qp.RecvWR{WRID: 22, SGL: sge(mrT, 4096, 2048)})
	for i, s := range []*SRQ{srq2, srq1} {
		if err := ini.PostSend(&qp.SendWR{WRID: uint64(i + 1), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: sge(mrI, 0, 1500), RemoteSRQN: s.SRQNum()}); err != nil {
			t.Fatal(err)
		}
	}
	v.RunFor(time.Millisecond)
	wcs := make([]qp.WC, 4)
	for _, c := range []struct {
		cq   *CQ
		wrid uint64
	}{{scq, 1}, {scq, 2}, {cq2, 22}, {cq1, 11}} {
		if n, _ := c.cq.PollCQ(wcs[:1]); n != 1 || wcs[0].WRID != c.wrid || wcs[0].Status != qp.WCSuccess {
			t.Fatalf("want WR %d on its CQ, got %d completions %+v", c.wrid, n, wcs[:n])
		}
	}
	if !bytes.Equal(mrT.Bytes()[:1500], mrI.Bytes()[:1500]) || !bytes.Equal(mrT.Bytes()[4096:5596], mrI.Bytes()[:1500]) {
		t.Fatal("the SENDs did not land in the buffers of the SRQs they named")
	}

	// Busy while used, in dependency order.
	if err := d.CloseXRCD(xa); !errors.Is(err, ErrBusy) {
		t.Fatalf("close of an XRCD with an SRQ and a QP: %v, want ErrBusy", err)
	}
	if err := d.DestroyQP(tgt); err != nil { // the creator's handle; xb's keeps it
		t.Fatal(err)
	}
	if _, ok := d.qps[tgt.QPN()]; !ok {
		t.Fatal("the target went with its creator's handle while another had it open")
	}
	if err := d.CloseQP(tgt, xb); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.qps[tgt.QPN()]; ok {
		t.Fatal("the target outlived its last handle")
	}
	if err := d.DestroySRQ(srq1); err != nil {
		t.Fatal(err)
	}
	if err := d.CloseXRCD(xa); err != nil {
		t.Fatal(err)
	}
	// The domain lives on in xb's opening: a new opening without O_CREAT finds it.
	xc, err := d.OpenXRCD(&file, 0)
	if err != nil {
		t.Fatalf("reopen while another opening holds the domain: %v", err)
	}
	if err := d.CloseXRCD(xc); err != nil {
		t.Fatal(err)
	}
	d.DestroySRQ(srq2)
	d.DestroySRQ(foreign)
	if err := d.CloseXRCD(xb); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenXRCD(&file, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the domain outlived its last opening: %v", err)
	}
}

// A request naming an XRC SRQ of another domain is NAKed: the initiator's WR fails with
// REM_INV_REQ_ERR.
func TestXRCForeignDomainNAK(t *testing.T) {
	v, d, _ := pair(t)
	gid, _ := d.QueryGID(0)
	mine, _ := d.OpenXRCD(nil, 0)
	other, _ := d.OpenXRCD(nil, 0)
	pd, _ := d.AllocPD()
	mr, _ := d.RegMR(pd, 4096, loopbackAccess)
	cq, _ := d.CreateCQ(8, nil)
	srq, _ := d.CreateXRCSRQ(pd, other, cq, SRQInitAttr{MaxWR: 4})
	srq.PostSRQRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}})
	tgt, _ := d.CreateQP(nil, QPInitAttr{Type: qp.XRCRecv, XRCD: mine})
	ini, _ := d.CreateQP(pd, QPInitAttr{Type: qp.XRCSend, SendCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	bringUpXRC(t, d, tgt, gid, ini.QPN())
	bringUpXRC(t, d, ini, gid, tgt.QPN())
	ini.PostSend(&qp.SendWR{WRID: 5, Opcode: qp.WRSend, Flags: qp.SendSignaled, RemoteSRQN: srq.SRQNum(),
		SGL: []qp.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}})
	v.RunFor(time.Millisecond)
	wcs := make([]qp.WC, 4)
	n, _ := cq.PollCQ(wcs)
	if n != 1 || wcs[0].WRID != 5 || wcs[0].Status != qp.WCRemInvReqErr {
		t.Fatalf("completions %+v, want WR 5 with REM_INV_REQ_ERR only", wcs[:n])
	}
}

// TestCMXRC is rdma_xserver -c x in virtual time: the CM agent connects an XRC_SEND QP
// to an XRC_RECV QP (RDMA_PS_IB) and moves each with its half's masks; the initiator's
// SEND then lands in the server's XRC SRQ.
func TestCMXRC(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	pdC, _ := h1.AllocPD()
	mrC, _ := h1.RegMR(pdC, 4096, loopbackAccess)
	cqC, _ := h1.CreateCQ(8, nil)
	ini, err := h1.CreateQP(pdC, QPInitAttr{Type: qp.XRCSend, SendCQ: cqC, Cap: QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pdS, _ := h2.AllocPD()
	mrS, _ := h2.RegMR(pdS, 4096, loopbackAccess)
	cqS, _ := h2.CreateCQ(8, nil)
	xrcd, _ := h2.OpenXRCD(nil, XRCDCreate)
	srq, _ := h2.CreateXRCSRQ(pdS, xrcd, cqS, SRQInitAttr{MaxWR: 4})
	tgt, err := h2.CreateQP(nil, QPInitAttr{Type: qp.XRCRecv, XRCD: xrcd})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := h2.CreateQP(pdS, QPInitAttr{Type: qp.RC, SendCQ: cqS, RecvCQ: cqS, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	var serverErr error
	listener, _ := h2.CreateCMIDType(cm.PortSpaceIB, qp.RC, func(e CMEvent) {
		if e.Type == CMEventConnectRequest {
			// An XRC REQ wants an XRC_RECV QP: an RC one is refused.
			if err := h2.Accept(e.ID, rc, CMConnParam{ResponderResources: 1, InitiatorDepth: 1}); err == nil {
				t.Error("an XRC REQ was accepted with an RC QP")
			}
			serverErr = h2.Accept(e.ID, tgt, CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
		}
	})
	if err := h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7474")); err != nil {
		t.Fatal(err)
	}
	var id *CMID
	var events []CMEventType
	id, _ = h1.CreateCMIDType(cm.PortSpaceIB, qp.RC, func(e CMEvent) {
		events = append(events, e.Type)
		switch e.Type {
		case CMEventAddrResolved:
			serverErr = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			serverErr = h1.Connect(id, ini, CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
		}
	})
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7474"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	v.RunFor(10 * time.Millisecond)
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	if len(events) == 0 || events[len(events)-1] != CMEventEstablished {
		t.Fatalf("client events %v, want ESTABLISHED last", events)
	}
	if ini.State() != qp.StateRTS || tgt.State() != qp.StateRTS {
		t.Fatalf("states after CM: initiator %v, target %v", ini.State(), tgt.State())
	}
	// The REQ says XRC as the kernel's cm_req_set_qp_type does for an XRC initiator.
	if len(*mads) == 0 || (*mads)[0].AttributeID() != cm.AttrREQ {
		t.Fatal("no REQ on the wire")
	}
	if req := cm.REQ((*mads)[0]); req.TransportType() != cm.TransportExtended || req.ExtendedTransport() != cm.ExtendedTransportXRC {
		t.Errorf("REQ transport %d, extended %d: want %d and XRC (%d)", req.TransportType(), req.ExtendedTransport(),
			cm.TransportExtended, cm.ExtendedTransportXRC)
	}
	copy(mrC.Bytes(), "xrc!")
	srq.PostSRQRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{{Addr: mrS.Addr(), Length: 64, LKey: mrS.LKey()}}})
	if err := ini.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, RemoteSRQN: srq.SRQNum(),
		SGL: []qp.SGE{{Addr: mrC.Addr(), Length: 4, LKey: mrC.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	v.RunFor(time.Millisecond)
	wcs := make([]qp.WC, 2)
	if n, _ := cqS.PollCQ(wcs); n != 1 || wcs[0].WRID != 1 || wcs[0].Status != qp.WCSuccess || string(mrS.Bytes()[:4]) != "xrc!" {
		t.Fatalf("server's SRQ completions %+v, buffer %q", wcs[:n], mrS.Bytes()[:4])
	}
}
