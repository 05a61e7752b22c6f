package qp

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// Memory layout of the RC tests: key 1 is a local buffer on each node, key 2 the
// remotely accessible region.
const (
	localKey, localBase   = 1, 0x1000
	remoteKey, remoteBase = 2, 0x100000
	regionSize            = 64 << 10
)

func withRegions(a, b *node, remoteAccess Access) (la, lb, ra, rb []byte) {
	la = a.mem.reg(localKey, localBase, regionSize, AccessLocalWrite)
	lb = b.mem.reg(localKey, localBase, regionSize, AccessLocalWrite)
	ra = a.mem.reg(remoteKey, remoteBase, regionSize, AccessLocalWrite|remoteAccess)
	rb = b.mem.reg(remoteKey, remoteBase, regionSize, AccessLocalWrite|remoteAccess)
	return
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func post(t *testing.T, n *node, wr SendWR) {
	t.Helper()
	if err := n.qp.PostSend(&wr); err != nil {
		t.Fatal(err)
	}
}

func postRecv(t *testing.T, n *node, wrid uint64, addr uint64, length uint32) {
	t.Helper()
	if err := n.qp.PostRecv(&RecvWR{WRID: wrid, SGL: []SGE{{Addr: addr, Length: length, LKey: localKey}}}); err != nil {
		t.Fatal(err)
	}
}

func expectWC(t *testing.T, got []WC, want ...WC) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d completions %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.WRID != w.WRID || g.Status != w.Status || g.Opcode != w.Opcode ||
			(w.ByteLen != 0 && g.ByteLen != w.ByteLen) || g.Flags != w.Flags || g.Imm != w.Imm {
			t.Errorf("completion %d: got %+v (%v), want %+v (%v)", i, g, g.Status, w, w.Status)
		}
	}
}

// TestRCWriteWithImmMultiPacket: a WRITE WITH IMMEDIATE of several packets lands
// whole, its last packet after the others although it takes the receive WR (rsockets
// move their data this way).
func TestRCWriteWithImmMultiPacket(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	la, _, _, rb := withRegions(a, b, AccessRemoteWrite)
	for i := range 5000 {
		la[i] = byte(i * 7 / 3)
	}
	postRecv(t, b, 100, localBase, 0)
	post(t, a, SendWR{WRID: 1, Opcode: WRWriteWithImm, Imm: 3, SGL: []SGE{{localBase, 5000, localKey}}, RemoteAddr: remoteBase + 16, RKey: remoteKey})
	exchange(t, 0, a, b)
	expectWC(t, b.rcq.take(), WC{WRID: 100, Opcode: WCRecvWriteWithImm, ByteLen: 5000, Imm: 3, Flags: WCFlagWithImm})
	if !bytes.Equal(rb[16:5016], la[:5000]) {
		t.Error("WRITE WITH IMMEDIATE data differs")
	}
}

func TestRCOperations(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	la, lb, _, rb := withRegions(a, b, AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic)
	fill(la[:10000], 1)
	postRecv(t, b, 100, localBase, 8000)
	postRecv(t, b, 101, localBase+8000, 16)

	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 3000, localKey}}, RemoteAddr: remoteBase + 8, RKey: remoteKey})
	post(t, a, SendWR{WRID: 2, Opcode: WRSendWithImm, Imm: 0xdeadbeef, SGL: []SGE{{localBase, 2500, localKey}, {localBase + 5000, 2500, localKey}}})
	post(t, a, SendWR{WRID: 3, Opcode: WRRead, SGL: []SGE{{localBase + 20000, 3000, localKey}}, RemoteAddr: remoteBase + 8, RKey: remoteKey})
	binary.LittleEndian.PutUint64(rb[4096:], 40)
	post(t, a, SendWR{WRID: 4, Opcode: WRFetchAdd, SGL: []SGE{{localBase + 30000, 8, localKey}}, RemoteAddr: remoteBase + 4096, RKey: remoteKey, CompareAdd: 2})
	post(t, a, SendWR{WRID: 5, Opcode: WRCompareSwap, SGL: []SGE{{localBase + 30008, 8, localKey}}, RemoteAddr: remoteBase + 4096, RKey: remoteKey, CompareAdd: 42, Swap: 7})
	post(t, a, SendWR{WRID: 6, Opcode: WRWriteWithImm, Imm: 9, SGL: []SGE{{localBase, 0, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	exchange(t, 0, a, b)

	expectWC(t, a.scq.take(),
		WC{WRID: 1, Opcode: WCWrite}, WC{WRID: 2, Opcode: WCSend}, WC{WRID: 3, Opcode: WCRead, ByteLen: 3000},
		WC{WRID: 4, Opcode: WCFetchAdd}, WC{WRID: 5, Opcode: WCCompareSwap}, WC{WRID: 6, Opcode: WCWrite})
	expectWC(t, b.rcq.take(),
		WC{WRID: 100, Opcode: WCRecv, ByteLen: 5000, Imm: 0xdeadbeef, Flags: WCFlagWithImm},
		WC{WRID: 101, Opcode: WCRecvWriteWithImm, Imm: 9, Flags: WCFlagWithImm})
	if !bytes.Equal(rb[8:3008], la[:3000]) {
		t.Error("WRITE data differs")
	}
	if !bytes.Equal(lb[:2500], la[:2500]) || !bytes.Equal(lb[2500:5000], la[5000:7500]) {
		t.Error("SEND data differs")
	}
	if !bytes.Equal(la[20000:23000], la[:3000]) {
		t.Error("READ data differs")
	}
	if got := binary.LittleEndian.Uint64(la[30000:]); got != 40 {
		t.Errorf("FETCH_ADD returned %d, want 40", got)
	}
	if got := binary.LittleEndian.Uint64(la[30008:]); got != 42 {
		t.Errorf("CMP_SWAP returned %d, want 42", got)
	}
	if got := binary.LittleEndian.Uint64(rb[4096:]); got != 7 {
		t.Errorf("word is %d after the atomics, want 7", got)
	}
	if a.qp.InFlightBytes() != 0 || a.qp.HasRequest() || b.qp.HasResponse() {
		t.Errorf("idle QP reports in-flight %d, request %v, response %v", a.qp.InFlightBytes(), a.qp.HasRequest(), b.qp.HasResponse())
	}
}

func TestDuplicatesAnsweredNotReexecuted(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	la, _, _, rb := withRegions(a, b, AccessRemoteWrite|AccessRemoteAtomic|AccessRemoteRead)
	fill(rb[64:1088], 5)
	post(t, a, SendWR{WRID: 1, Opcode: WRFetchAdd, SGL: []SGE{{localBase, 8, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey, CompareAdd: 1})
	post(t, a, SendWR{WRID: 2, Opcode: WRRead, SGL: []SGE{{localBase + 64, 1024, localKey}}, RemoteAddr: remoteBase + 64, RKey: remoteKey})
	post(t, a, SendWR{WRID: 3, Opcode: WRWrite, SGL: []SGE{{localBase, 8, localKey}}, RemoteAddr: remoteBase + 2048, RKey: remoteKey})
	// Every request reaches the responder twice; every response is lost once, so the
	// requester times out and retries: the atomic must come from the replay cache.
	seen := map[string]bool{}
	exchangeWith(t, 0, a, b, func(from *node, f []byte) bool {
		if from == a {
			b.qp.ReceiveFrame(0, f)
			return false
		}
		k := string(f)
		drop := !seen[k]
		seen[k] = true
		return drop
	})
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCFetchAdd}, WC{WRID: 2, Opcode: WCRead}, WC{WRID: 3, Opcode: WCWrite})
	if got := binary.LittleEndian.Uint64(rb); got != 1 {
		t.Errorf("FETCH_ADD applied %d times", got)
	}
	if got := binary.LittleEndian.Uint64(la); got != 0 {
		t.Errorf("FETCH_ADD returned %d, want 0", got)
	}
	if !bytes.Equal(la[64:1088], rb[64:1088]) {
		t.Error("READ data differs")
	}
	if c := b.qp.Counters(); c.DupRequests == 0 || a.qp.Counters().Timeouts == 0 {
		t.Errorf("no duplicates answered (%d) or no timeouts (%d)", c.DupRequests, a.qp.Counters().Timeouts)
	}
}

// TestReadBacklogDefersRetry: the first response of eight outstanding READs is lost
// while the responder goes on streaming the others, each within the transport timeout
// of the last. The gap sends the outstanding READs once more (an implied NAK), and the
// requester must not time out while the backlog's responses still arrive: a retry of
// every outstanding READ per timeout, each queued behind the backlog, was a
// retransmission storm against rxe. Everything completes with one retry pass.
func TestReadBacklogDefersRetry(t *testing.T) {
	o := defaultOpts()
	a, b := newPair(t, o)
	la, _, _, rb := withRegions(a, b, AccessRemoteRead)
	fill(rb[:8*4096], 9)
	for i := range 8 {
		off := uint64(i * 4096)
		post(t, a, SendWR{WRID: uint64(i), Opcode: WRRead, SGL: []SGE{{localBase + off, 4096, localKey}},
			RemoteAddr: remoteBase + off, RKey: remoteKey})
	}
	buf := make([]byte, MaxFrameSize)
	var now int64
	requests := 0
	sendRequests := func() {
		for {
			n, ok := a.qp.NextRequest(now, buf)
			if !ok {
				return
			}
			requests++
			b.qp.ReceiveFrame(now, buf[:n])
		}
	}
	sendRequests()
	step := rto(o.timeout) * 3 / 4
	for i := 0; ; i++ {
		n, ok := b.qp.NextResponse(buf)
		if !ok {
			break
		}
		if i > 0 { // the first response is lost
			a.qp.ReceiveFrame(now, buf[:n])
		}
		now += step
		a.qp.OnTimer(now)
		sendRequests()
	}
	expectWC(t, a.scq.take(), func() (want []WC) {
		for i := range 8 {
			want = append(want, WC{WRID: uint64(i), Opcode: WCRead})
		}
		return want
	}()...)
	if !bytes.Equal(la[:8*4096], rb[:8*4096]) {
		t.Error("READ data differs")
	}
	if c := a.qp.Counters().Timeouts; c != 0 {
		t.Errorf("%d timeouts while the responder was still answering", c)
	}
	if requests != 16 {
		t.Errorf("%d READ requests sent, want 8 and one retry of each", requests)
	}
}

func TestPSNWrapAndSegmentation(t *testing.T) {
	// newPair starts both directions at PSN 0xFFFFF0: 40 packets cross the wrap.
	o := defaultOpts()
	o.mtu = 256
	a, b := newPair(t, o)
	la, _, _, rb := withRegions(a, b, AccessRemoteWrite)
	fill(la[:10000], 11)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 10000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	var frames int
	exchangeWith(t, 0, a, b, func(from *node, _ []byte) bool {
		if from == a {
			frames++
		}
		return false
	})
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCWrite})
	if frames != 40 || !bytes.Equal(rb[:10000], la[:10000]) {
		t.Errorf("%d packets (want ⌈10000/256⌉ = 40), data equal %v", frames, bytes.Equal(rb[:10000], la[:10000]))
	}
	if got := b.qp.resp.psn; got != 0xFFFFF0+40-(1<<24) {
		t.Errorf("responder expects PSN %v after the wrap", got)
	}
}

// TestSegmentBelowPathMTU: with Config.Segment 1000 on both ends (the HPCC simulator's
// payload size), a 10000-byte WRITE at path MTU 1024 goes as ⌈10000/1000⌉ = 10
// packets of 1000 payload bytes, arrives intact and advances the responder's PSN by 10.
func TestSegmentBelowPathMTU(t *testing.T) {
	o := defaultOpts()
	o.segment = 1000
	a, b := newPair(t, o)
	la, _, _, rb := withRegions(a, b, AccessRemoteWrite)
	fill(la[:10000], 5)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{localBase, 10000, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey})
	var frames, shortest, longest int
	exchangeWith(t, 0, a, b, func(from *node, f []byte) bool {
		if from == a {
			frames++
			if shortest == 0 || len(f) < shortest {
				shortest = len(f)
			}
			longest = max(longest, len(f))
		}
		return false
	})
	expectWC(t, a.scq.take(), WC{WRID: 1, Opcode: WCWrite})
	if frames != 10 || !bytes.Equal(rb[:10000], la[:10000]) {
		t.Errorf("%d packets (want 10), data equal %v", frames, bytes.Equal(rb[:10000], la[:10000]))
	}
	// The first packet carries the RETH (16 bytes) on top of the others' headers.
	if longest-shortest != 16 {
		t.Errorf("packets from %d to %d bytes: want equal payloads, the first 16 bytes longer (RETH)", shortest, longest)
	}
	if got := b.qp.resp.psn; got != 0xFFFFF0+10 {
		t.Errorf("responder expects PSN %v, want %v", got, 0xFFFFF0+10)
	}
	if _, err := New(Config{Type: RC, QPN: 0x33, Memory: a.mem, SendCQ: a.scq, RecvCQ: a.rcq, MaxSendWR: 1, MaxRecvWR: 1, Segment: -1}); err == nil {
		t.Error("a negative segment was accepted")
	}
}
