package verbs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/verbs"
)

func fill(b []byte, seed uint32) {
	x := seed*2654435761 + 1
	for i := 0; i+4 <= len(b); i += 4 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		binary.LittleEndian.PutUint32(b[i:], x)
	}
}

// TestRCWrite64MiB writes 64 MiB in 64 KB RDMA WRITEs from h1's app into h2's app's
// MR and checks every byte (CRC of the whole region, then the bytes if it differs).
func TestRCWrite64MiB(t *testing.T) {
	l := newLab(t)
	const size, msg = 64 << 20, 64 << 10
	a, b := pair(t, l, size)
	fill(a.mr.Bytes(), 7)
	want := crc32.ChecksumIEEE(a.mr.Bytes())
	const depth = 64
	sgl := []qp.SGE{{Length: msg, LKey: a.mr.LKey()}}
	wr := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sgl, RKey: b.mr.RKey()}
	wcs := make([]qp.WC, depth)
	posted, done := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for done < size/msg {
		for posted < size/msg && posted-done < depth {
			off := uint64(posted * msg)
			sgl[0].Addr = a.mr.Addr() + off
			wr.RemoteAddr, wr.WRID = b.mr.Addr()+off, uint64(posted)
			if err := a.qp.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		n, err := a.cq.PollCQ(wcs)
		if err != nil {
			t.Fatal(err)
		}
		wantOK(t, wcs[:n])
		for _, wc := range wcs[:n] {
			if wc.WRID != uint64(done) || wc.Opcode != qp.WCWrite {
				t.Fatalf("completion %+v, want WRID %d", wc, done)
			}
			done++
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d WRITEs done after 60 s", done, size/msg)
		}
	}
	if got := crc32.ChecksumIEEE(b.mr.Bytes()); got != want {
		for i := range b.mr.Bytes() {
			if b.mr.Bytes()[i] != a.mr.Bytes()[i] {
				t.Fatalf("byte %d: %#x, want %#x", i, b.mr.Bytes()[i], a.mr.Bytes()[i])
			}
		}
	}
}

// TestRCSendReadAtomics: SEND with immediate into a posted receive, RDMA WRITE with
// immediate, READ, fetch-add and compare-swap, each checked in the peer's memory.
func TestRCSendReadAtomics(t *testing.T) {
	l := newLab(t)
	a, b := pair(t, l, 1<<16)
	copy(a.mr.Bytes(), "hello over the verbs service")
	if err := b.qp.PostRecv(&qp.RecvWR{WRID: 77, SGL: []qp.SGE{{Addr: b.mr.Addr() + 100, Length: 64, LKey: b.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostRecv(&qp.RecvWR{WRID: 78}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRSendWithImm, Flags: qp.SendSignaled, Imm: 0xabcd,
		SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 28, LKey: a.mr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, a.cq, 1))
	wc := poll(t, b.cq, 1)[0]
	if wc.WRID != 77 || wc.Opcode != qp.WCRecv || wc.ByteLen != 28 || wc.Flags&qp.WCFlagWithImm == 0 || wc.Imm != 0xabcd {
		t.Fatalf("receive completion %+v", wc)
	}
	if got := string(b.mr.Bytes()[100:128]); got != "hello over the verbs service" {
		t.Fatalf("received %q", got)
	}
	// WRITE with immediate consumes the second receive.
	if err := a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRWriteWithImm, Flags: qp.SendSignaled, Imm: 5,
		SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 5, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr() + 200, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, a.cq, 1))
	if wc := poll(t, b.cq, 1)[0]; wc.WRID != 78 || wc.Opcode != qp.WCRecvWriteWithImm || wc.Imm != 5 {
		t.Fatalf("write-with-imm completion %+v", wc)
	}
	if got := string(b.mr.Bytes()[200:205]); got != "hello" {
		t.Fatalf("written %q", got)
	}
	// READ back what b holds.
	copy(b.mr.Bytes()[300:], "remote bytes")
	if err := a.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRRead, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: a.mr.Addr() + 1000, Length: 12, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr() + 300, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq, 1)[0]; wc.Status != qp.WCSuccess || wc.Opcode != qp.WCRead {
		t.Fatalf("read completion %+v", wc)
	}
	if got := string(a.mr.Bytes()[1000:1012]); got != "remote bytes" {
		t.Fatalf("read %q", got)
	}
	// Atomics on the word at b+512.
	binary.LittleEndian.PutUint64(b.mr.Bytes()[512:], 40)
	if err := a.qp.PostSend(&qp.SendWR{WRID: 4, Opcode: qp.WRFetchAdd, Flags: qp.SendSignaled, CompareAdd: 2,
		SGL: []qp.SGE{{Addr: a.mr.Addr() + 2000, Length: 8, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend(&qp.SendWR{WRID: 5, Opcode: qp.WRCompareSwap, Flags: qp.SendSignaled, CompareAdd: 42, Swap: 99,
		SGL: []qp.SGE{{Addr: a.mr.Addr() + 2008, Length: 8, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	wcs := poll(t, a.cq, 2)
	wantOK(t, wcs)
	if wcs[0].Opcode != qp.WCFetchAdd || wcs[1].Opcode != qp.WCCompareSwap {
		t.Fatalf("atomic completions %+v", wcs)
	}
	le := binary.LittleEndian
	if o1, o2, now := le.Uint64(a.mr.Bytes()[2000:]), le.Uint64(a.mr.Bytes()[2008:]), le.Uint64(b.mr.Bytes()[512:]); o1 != 40 || o2 != 42 || now != 99 {
		t.Fatalf("fetch-add returned %d, compare-swap %d, word now %d", o1, o2, now)
	}
	// Queries agree with what the QP was given.
	attr, err := a.ctx.QueryQP(a.qp)
	if err != nil || attr.State != qp.StateRTS || attr.DestQPN != b.qp.QPN() {
		t.Fatalf("query QP: %+v, %v", attr, err)
	}
	dev, err := a.ctx.QueryDevice()
	if err != nil || dev.MaxSGE != rnic.MaxSGE || dev.PhysPortCnt != 1 {
		t.Fatalf("query device: %+v, %v", dev, err)
	}
	port, err := a.ctx.QueryPort(1)
	if err != nil || port.State != "ACTIVE" || port.ActiveMTU != 4096 {
		t.Fatalf("query port: %+v, %v", port, err)
	}
}

// TestUDWithSRQ: UD SENDs through an address handle into a QP that receives from an
// SRQ; the receiver sees the GRH and the sender's QPN.
func TestUDWithSRQ(t *testing.T) {
	l := newLab(t)
	a := newApp(t, l.addrs[0], qp.UD, 1<<16, nil)
	ctx, err := verbs.Open(l.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(64, nil)
	mr, err := ctx.RegMR(pd, 1<<16, qp.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := ctx.CreateSRQ(pd, rnic.SRQInitAttr{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	rq, err := ctx.CreateQP(pd, verbs.QPInitAttr{Type: qp.UD, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: rnic.QPCap{MaxSendWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	const qkey = 0x1111
	for _, x := range []struct {
		c *verbs.Context
		q *verbs.QP
	}{{a.ctx, a.qp}, {ctx, rq}} {
		at := qp.Attr{State: qp.StateInit, Port: 1, QKey: qkey}
		if err := x.c.ModifyQP(x.q, &at, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrQKey); err != nil {
			t.Fatal(err)
		}
		at = qp.Attr{State: qp.StateRTR}
		if err := x.c.ModifyQP(x.q, &at, qp.AttrState); err != nil {
			t.Fatal(err)
		}
		at = qp.Attr{State: qp.StateRTS}
		if err := x.c.ModifyQP(x.q, &at, qp.AttrState|qp.AttrSQPSN); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if err := srq.PostSRQRecv(&qp.RecvWR{WRID: uint64(100 + i), SGL: []qp.SGE{{Addr: mr.Addr() + uint64(i)*1024, Length: 1024, LKey: mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	dgid, _ := ctx.QueryGID(0)
	ah, err := a.ctx.CreateAH(a.pd, rnic.AHAttr{DGID: dgid})
	if err != nil {
		t.Fatal(err)
	}
	copy(a.mr.Bytes(), "datagram!")
	for i := range 3 {
		if err := a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, AH: ah.AV(),
			RemoteQPN: uint32(rq.QPN()), RemoteQKey: qkey, SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 9, LKey: a.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	wantOK(t, poll(t, a.cq, 3))
	wcs := poll(t, cq, 3)
	wantOK(t, wcs)
	for i, wc := range wcs {
		if wc.WRID != uint64(100+i) || wc.SrcQP != uint32(a.qp.QPN()) || wc.Flags&qp.WCFlagGRH == 0 || wc.ByteLen != 40+9 {
			t.Fatalf("UD receive %d: %+v", i, wc)
		}
		if got := string(mr.Bytes()[i*1024+40 : i*1024+49]); got != "datagram!" {
			t.Fatalf("UD payload %d: %q", i, got)
		}
	}
	// A UD WR without an AH of the context is refused at once.
	if err := a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, AH: &qp.AddressVector{}}); !errors.Is(err, qp.ErrInvalidWR) {
		t.Errorf("UD send without AH: %v", err)
	}
}

// TestCompletionChannel: an armed CQ wakes a goroutine blocked in GetCQEvent.
func TestCompletionChannel(t *testing.T) {
	l := newLab(t)
	ctxA, err := verbs.Open(l.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ctxA.Close()
	ctxB, err := verbs.Open(l.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer ctxB.Close()
	ch, err := ctxB.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	a := newAppOn(t, ctxA, qp.RC, 4096, nil)
	b := newAppOn(t, ctxB, qp.RC, 4096, ch)
	connect(t, a, b)
	connect(t, b, a)
	for round := range 3 {
		if err := b.cq.ReqNotifyCQ(false); err != nil {
			t.Fatal(err)
		}
		if err := b.qp.PostRecv(&qp.RecvWR{WRID: uint64(round), SGL: []qp.SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cq, err := ch.GetCQEvent(ctx)
			if err == nil && cq != b.cq {
				err = errors.New("event for another CQ")
			}
			if cq != nil {
				cq.AckCQEvents(1)
			}
			got <- err
		}()
		if err := a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if wc := poll(t, b.cq, 1)[0]; wc.WRID != uint64(round) || wc.Status != qp.WCSuccess {
			t.Fatalf("round %d: %+v", round, wc)
		}
		poll(t, a.cq, 1)
	}
	// Arming with completions queued raises the event at once (as package rnic does).
	b.qp.PostRecv(&qp.RecvWR{WRID: 9})
	a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := b.cq.ReqNotifyCQ(false); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		cq, err := ch.GetCQEvent(ctx)
		cancel()
		if err == nil && cq == b.cq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no event for the queued completion")
		}
	}
	// A cancelled wait returns the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ch.GetCQEvent(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
}
