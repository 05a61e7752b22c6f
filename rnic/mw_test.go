package rnic

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
)

// incKey is ibv_inc_rkey: the next rkey of a window, the index kept.
func incKey(k uint32) uint32 { return k&^0xFF | (k+1)&0xFF }

// mwRun binds memory windows of B's PD, type 1 and type 2, and has QP a reach B's
// memory through them, between two QPs of one device in two PDs, as rxe does: the
// window's rkey grants what the bind granted over the MR's range, LOCAL_INV and
// SEND_WITH_INV free a type 2 window, and access with its old rkey then fails a's
// request with REM_ACCESS_ERR and takes a to ERR. It returns the run's completions.
func mwRun(t *testing.T) string {
	v, h1, _ := linkedPair(t, 10e9, 1500, Config{})
	var trace strings.Builder
	gid, _ := h1.QueryGID(0)
	pdA, _ := h1.AllocPD()
	pdB, _ := h1.AllocPD()
	const size = 16 << 10
	mrA, _ := h1.RegMR(pdA, size, qp.AccessLocalWrite)
	// No remote access of its own: only the windows grant it.
	mrB, err := h1.RegMR(pdB, size, qp.AccessLocalWrite|qp.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mrA.Bytes() {
		mrA.Bytes()[i], mrB.Bytes()[i] = byte(i*7), byte(i*13)
	}
	cqA, _ := h1.CreateCQ(16, nil)
	cqB, _ := h1.CreateCQ(16, nil)
	rcAttr := func(cq *CQ) QPInitAttr {
		return QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	a, _ := h1.CreateQP(pdA, rcAttr(cqA))
	b, _ := h1.CreateQP(pdB, rcAttr(cqB))
	bringUpLoopRC(t, h1, a, gid, b.QPN())
	bringUpLoopRC(t, h1, b, gid, a.QPN())

	complete := func(what string, cq *CQ, wrid uint64, status qp.WCStatus, op qp.WCOpcode) qp.WC {
		t.Helper()
		v.RunFor(time.Millisecond)
		wcs := make([]qp.WC, 4)
		n, err := cq.PollCQ(wcs)
		if err != nil || n != 1 || wcs[0].Status != status || wcs[0].WRID != wrid || wcs[0].Opcode != op {
			t.Fatalf("%s: %d completions %+v (%v); want WR %d, %v, opcode %d", what, n, wcs[:n], err, wrid, status, op)
		}
		fmt.Fprintf(&trace, "%s %v %+v\n", what, h1.Now(), wcs[0])
		return wcs[0]
	}
	post := func(what string, x *QP, wr qp.SendWR) {
		t.Helper()
		if err := x.PostSend(&wr); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	sge := func(mr *MR, off, n int) []qp.SGE {
		return []qp.SGE{{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}}
	}
	bind := func(w *MW, off, n int, access qp.Access) qp.MWBind {
		return qp.MWBind{MWRKey: w.RKey(), NewRKey: incKey(w.RKey()), MRLKey: mrB.LKey(),
			Addr: mrB.Addr() + uint64(off), Length: uint64(n), Access: access}
	}

	// MR access alone is refused.
	if err := pdB.Check(mrB.RKey(), mrB.Addr(), 8, qp.AccessRemoteWrite); !errors.Is(err, qp.ErrAccessDenied) {
		t.Fatalf("remote write through an MR without remote access: %v", err)
	}

	// Type 1: bound by a BIND_MW WR as ibv_bind_mw posts it, then WRITE and READ.
	mw1, err := h1.AllocMW(pdB, MWType1)
	if err != nil {
		t.Fatal(err)
	}
	old1 := mw1.RKey()
	post("bind type 1", b, qp.SendWR{WRID: 10, Opcode: qp.WRBindMW, Flags: qp.SendSignaled,
		Bind: bind(mw1, 4096, 4096, qp.AccessRemoteWrite|qp.AccessRemoteRead)})
	complete("bind type 1", cqB, 10, qp.WCSuccess, qp.WCBindMW)
	if mw1.RKey() != incKey(old1) {
		t.Fatalf("type 1 MW rkey %#x after bind, want %#x", mw1.RKey(), incKey(old1))
	}
	post("write via type 1", a, qp.SendWR{WRID: 1, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sge(mrA, 0, 3000),
		RemoteAddr: mrB.Addr() + 4096, RKey: mw1.RKey()})
	complete("write via type 1", cqA, 1, qp.WCSuccess, qp.WCWrite)
	if !bytes.Equal(mrB.Bytes()[4096:7096], mrA.Bytes()[:3000]) {
		t.Fatal("write via type 1: the target's bytes differ from the source's")
	}
	post("read via type 1", a, qp.SendWR{WRID: 2, Opcode: qp.WRRead, Flags: qp.SendSignaled, SGL: sge(mrA, 8192, 2000),
		RemoteAddr: mrB.Addr() + 6000, RKey: mw1.RKey()})
	complete("read via type 1", cqA, 2, qp.WCSuccess, qp.WCRead)
	if !bytes.Equal(mrA.Bytes()[8192:10192], mrB.Bytes()[6000:8000]) {
		t.Fatal("read via type 1: the fetched bytes differ from the target's")
	}
	if err := h1.DeregMR(mrB); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("deregister an MR with a window bound: %v, want EINVAL as rxe", err)
	}
	// A type 1 window cannot be invalidated (o10-37.2.26).
	if err := pdB.view(uint32(b.QPN())).Invalidate(mw1.RKey()); !errors.Is(err, qp.ErrInvalidKey) {
		t.Fatalf("invalidate a type 1 MW: %v", err)
	}

	// Type 2: bound by a send WR, used, freed by SEND_WITH_INV.
	mw2, _ := h1.AllocMW(pdB, MWType2)
	post("bind type 2", b, qp.SendWR{WRID: 11, Opcode: qp.WRBindMW, Flags: qp.SendSignaled,
		Bind: bind(mw2, 0, 4096, qp.AccessRemoteWrite)})
	complete("bind type 2", cqB, 11, qp.WCSuccess, qp.WCBindMW)
	post("write via type 2", a, qp.SendWR{WRID: 3, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sge(mrA, 100, 1000),
		RemoteAddr: mrB.Addr() + 10, RKey: mw2.RKey()})
	complete("write via type 2", cqA, 3, qp.WCSuccess, qp.WCWrite)
	if !bytes.Equal(mrB.Bytes()[10:1010], mrA.Bytes()[100:1100]) {
		t.Fatal("write via type 2: the target's bytes differ from the source's")
	}
	if err := b.PostRecv(&qp.RecvWR{WRID: 100, SGL: sge(mrB, 12288, 64)}); err != nil {
		t.Fatal(err)
	}
	post("send with invalidate", a, qp.SendWR{WRID: 4, Opcode: qp.WRSendWithInv, Flags: qp.SendSignaled,
		SGL: sge(mrA, 0, 64), InvalidateRKey: mw2.RKey()})
	complete("send with invalidate: sender", cqA, 4, qp.WCSuccess, qp.WCSend)
	wc := complete("send with invalidate: receiver", cqB, 100, qp.WCSuccess, qp.WCRecv)
	if wc.Flags&qp.WCFlagWithInv == 0 || wc.Imm != mw2.RKey() {
		t.Fatalf("send with invalidate: flags %#x, invalidated rkey %#x; want WITH_INV and %#x", wc.Flags, wc.Imm, mw2.RKey())
	}
	if err := pdB.view(uint32(b.QPN())).Check(mw2.RKey(), mrB.Addr(), 8, qp.AccessRemoteWrite); !errors.Is(err, qp.ErrInvalidKey) {
		t.Fatalf("access through an invalidated type 2 MW: %v", err)
	}

	// Bound again (free once more), then LOCAL_INV, then access with the old rkey.
	post("rebind type 2", b, qp.SendWR{WRID: 12, Opcode: qp.WRBindMW, Flags: qp.SendSignaled,
		Bind: bind(mw2, 0, 4096, qp.AccessRemoteWrite|qp.AccessRemoteRead)})
	complete("rebind type 2", cqB, 12, qp.WCSuccess, qp.WCBindMW)
	// The type 2 window is reachable only through the QP that bound it.
	if err := pdB.Check(mw2.RKey(), mrB.Addr(), 8, qp.AccessRemoteRead); !errors.Is(err, qp.ErrInvalidKey) {
		t.Fatalf("type 2 MW through another QP: %v", err)
	}
	post("local invalidate", b, qp.SendWR{WRID: 13, Opcode: qp.WRLocalInv, Flags: qp.SendSignaled, InvalidateRKey: mw2.RKey()})
	complete("local invalidate", cqB, 13, qp.WCSuccess, qp.WCLocalInv)
	post("read via invalidated", a, qp.SendWR{WRID: 5, Opcode: qp.WRRead, Flags: qp.SendSignaled, SGL: sge(mrA, 0, 8),
		RemoteAddr: mrB.Addr(), RKey: mw2.RKey()})
	complete("read via invalidated", cqA, 5, qp.WCRemAccessErr, qp.WCRead)
	if a.State() != qp.StateErr {
		t.Fatalf("requester in %v after REM_ACCESS_ERR, want ERR", a.State())
	}
	fmt.Fprintf(&trace, "%+v\n", h1.Stats())
	return trace.String()
}

// TestMemoryWindows runs mwRun twice: it passes, and the two runs give the same trace.
func TestMemoryWindows(t *testing.T) {
	first := mwRun(t)
	if second := mwRun(t); second != first {
		t.Errorf("two runs differ:\n%s\n%s", first, second)
	}
}

// TestMemoryWindowBindErrors: a bind rxe refuses fails its WR with MW_BIND_ERR and
// takes the QP to ERR; an unknown window type is EINVAL.
func TestMemoryWindowBindErrors(t *testing.T) {
	v, h1, _ := linkedPair(t, 10e9, 1500, Config{})
	gid, _ := h1.QueryGID(0)
	pd, _ := h1.AllocPD()
	bindable, _ := h1.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessMWBind)
	plain, _ := h1.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	readOnly, _ := h1.RegMR(pd, 4096, qp.AccessMWBind)
	if _, err := h1.AllocMW(pd, 3); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("alloc MW of type 3: %v, want EINVAL", err)
	}
	for _, c := range []struct {
		name string
		typ  MWType
		mr   *MR
		off  uint64
		n    uint64
		acc  qp.Access
	}{
		{"outside the MR", MWType1, bindable, 4000, 200, qp.AccessRemoteRead},
		{"type 2 outside the MR", MWType2, bindable, 0, 4097, qp.AccessRemoteRead},
		{"MR without MW_BIND", MWType2, plain, 0, 64, qp.AccessRemoteWrite},
		{"remote write, MR without local write", MWType1, readOnly, 0, 64, qp.AccessRemoteWrite},
		{"type 2 with length 0", MWType2, bindable, 0, 0, qp.AccessRemoteRead},
	} {
		t.Run(c.name, func(t *testing.T) {
			cq, _ := h1.CreateCQ(8, nil)
			x, _ := h1.CreateQP(pd, QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			bringUpLoopRC(t, h1, x, gid, 0x99)
			w, _ := h1.AllocMW(pd, c.typ)
			wr := qp.SendWR{WRID: 7, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: qp.MWBind{MWRKey: w.RKey(),
				NewRKey: incKey(w.RKey()), MRLKey: c.mr.LKey(), Addr: c.mr.Addr() + c.off, Length: c.n, Access: c.acc}}
			if err := x.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			v.RunFor(time.Millisecond)
			wcs := make([]qp.WC, 4)
			n, _ := cq.PollCQ(wcs)
			if n != 1 || wcs[0].Status != qp.WCMWBindErr || wcs[0].Opcode != qp.WCBindMW || x.State() != qp.StateErr {
				t.Fatalf("%d completions %+v, QP %v; want one MW_BIND_ERR and ERR", n, wcs[:n], x.State())
			}
			if err := h1.DeallocMW(w); err != nil {
				t.Fatal(err)
			}
		})
	}
}
