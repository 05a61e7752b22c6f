package service

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

// callFD makes one call whose response carries a descriptor, closes it and decodes
// the response into v.
func callFD(c *conn, op wire.Op, body, v any) error {
	req := wire.AppendRequest(nil, op, 0, body)
	_, reqBody, _ := wire.ParseHeader(req)
	out, fds := c.call(op, reqBody, nil, make([]byte, 0, wire.MaxMessage))
	wire.CloseFDs(fds)
	return wire.ParseResponse(out, op, v)
}

// TestXRCCalls: the XRC calls open domains by file as ibv_open_xrcd does, create XRC
// SRQs with their numbers and the two XRC QP types with the bindings each takes, open
// a target through a second opening of its domain, and refuse to close a domain in use.
func TestXRCCalls(t *testing.T) {
	c := testConn(t)
	c.byQPN = map[roce.QPN]*sQP{} // what HELLO sets up
	file := &wire.OpenXRCD{Dev: 8, Ino: 77, HasFile: 1}
	if err := do(c, wire.OpOpenXRCD, file, nil, &wire.Handle{}); !errors.Is(err, rnic.ErrNotFound) {
		t.Fatalf("open of a file without a domain and without O_CREAT: %v, want ENOENT", err)
	}
	file.OFlags = unix.O_CREAT
	var xa, xb, private wire.Handle
	if err := do(c, wire.OpOpenXRCD, file, nil, &xa); err != nil {
		t.Fatal(err)
	}
	file.OFlags = 0
	if err := do(c, wire.OpOpenXRCD, file, nil, &xb); err != nil {
		t.Fatalf("second opening of the file's domain: %v", err)
	}
	if err := do(c, wire.OpOpenXRCD, &wire.OpenXRCD{}, nil, &private); err != nil {
		t.Fatal(err)
	}
	var pd wire.Handle
	if err := do(c, wire.OpAllocPD, nil, nil, &pd); err != nil {
		t.Fatal(err)
	}
	var cq wire.RingResp
	if err := callFD(c, wire.OpCreateCQ, &wire.CreateCQ{CQE: 16}, &cq); err != nil {
		t.Fatal(err)
	}
	var srq wire.XRCSRQResp
	if err := callFD(c, wire.OpCreateXRCSRQ, &wire.CreateXRCSRQ{PD: pd.Handle, MaxWR: 8, MaxSGE: 1, XRCD: xa.Handle, CQ: cq.Handle}, &srq); err != nil {
		t.Fatal(err)
	}
	if srq.SRQN == 0 || srq.Ring.Cap != 8 {
		t.Errorf("XRC SRQ response %+v: want a number and 8 entries", srq)
	}
	if err := callFD(c, wire.OpCreateQP, &wire.CreateQP{PD: xa.Handle, RecvCQ: cq.Handle, Type: uint8(qp.XRCRecv)}, &wire.QPResp{}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("XRC_RECV QP with a receive CQ: %v, want EINVAL", err)
	}
	if err := callFD(c, wire.OpCreateQP, &wire.CreateQP{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, Type: uint8(qp.XRCSend),
		MaxSendWR: 4}, &wire.QPResp{}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("XRC_SEND QP with a receive CQ: %v, want EINVAL", err)
	}
	var tgt, ini wire.QPResp
	if err := callFD(c, wire.OpCreateQP, &wire.CreateQP{PD: xa.Handle, Type: uint8(qp.XRCRecv)}, &tgt); err != nil {
		t.Fatal(err)
	}
	if err := callFD(c, wire.OpCreateQP, &wire.CreateQP{PD: pd.Handle, SendCQ: cq.Handle, Type: uint8(qp.XRCSend), MaxSendWR: 4}, &ini); err != nil {
		t.Fatal(err)
	}
	if ini.MaxRecvWR != 0 || ini.Size == 0 {
		t.Errorf("XRC_SEND QP response %+v: want a send ring and no receive queue", ini)
	}
	// As the kernel's uverbs, the service drops the responder attributes an initiator
	// lacks (perftest -c XRC passes RC's) before the state table sees them.
	own := wire.FromQPAttr(&qp.Attr{State: qp.StateInit, Port: 1})
	if err := do(c, wire.OpModifyQP, &wire.ModifyQP{Handle: ini.Handle, Attr: own,
		Mask: uint32(qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	rtr := qp.Attr{State: qp.StateRTR, PathMTU: 1024, DestQPN: roce.QPN(tgt.QPN), MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AV: qp.AddressVector{DGID: roce.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))}}
	if err := do(c, wire.OpModifyQP, &wire.ModifyQP{Handle: ini.Handle, Attr: wire.FromQPAttr(&rtr),
		Mask: uint32(qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer)}, nil, nil); err != nil {
		t.Errorf("XRC_SEND INIT → RTR with RC's responder attributes: %v", err)
	}
	if err := do(c, wire.OpOpenQP, &wire.OpenQP{XRCD: private.Handle, QPN: tgt.QPN}, nil, &wire.QPResp{}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("open QP through another domain: %v, want EINVAL", err)
	}
	var opened wire.QPResp
	if err := do(c, wire.OpOpenQP, &wire.OpenQP{XRCD: xb.Handle, QPN: tgt.QPN}, nil, &opened); err != nil || opened.QPN != tgt.QPN {
		t.Fatalf("open QP %+v: %v", opened, err)
	}
	for _, h := range []uint32{xa.Handle, xb.Handle} {
		if err := do(c, wire.OpCloseXRCD, &wire.Handle{Handle: h}, nil, nil); !errors.Is(err, rnic.ErrBusy) {
			t.Errorf("close XRCD %d in use: %v, want EBUSY", h, err)
		}
	}
	for _, step := range []struct {
		op wire.Op
		h  uint32
	}{{wire.OpDestroyQP, tgt.Handle}, {wire.OpDestroyQP, opened.Handle}, {wire.OpDestroySRQ, srq.Ring.Handle},
		{wire.OpCloseXRCD, xa.Handle}, {wire.OpCloseXRCD, xb.Handle}, {wire.OpCloseXRCD, private.Handle}} {
		if err := do(c, step.op, &wire.Handle{Handle: step.h}, nil, nil); err != nil {
			t.Fatalf("%v %d: %v", step.op, step.h, err)
		}
	}
	if err := do(c, wire.OpOpenXRCD, file, nil, &wire.Handle{}); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("the file's domain outlived its openings: %v", err)
	}
	if n := c.reclaim(); n != 3 {
		t.Errorf("reclaimed %d objects, want the PD, the CQ and the initiator", n)
	}
}
