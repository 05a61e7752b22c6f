package rnic

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// loopbackAccess is what the loopback test's QPs and MRs allow their peer.
const loopbackAccess = qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic

// bringUpLoopRC moves an RC QP through INIT and RTR to RTS towards peerQPN at gid,
// allowing every remote access (bringUpRC leaves out atomics).
func bringUpLoopRC(t *testing.T, d *Device, x *QP, gid roce.GID, peerQPN roce.QPN) {
	t.Helper()
	steps := []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: loopbackAccess},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: gid}, PathMTU: roce.MTU1024, DestQPN: peerQPN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			qp.AttrState | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrSQPSN | qp.AttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := d.ModifyQP(x, &s.a, s.mask); err != nil {
			t.Fatalf("%v: %v", s.a.State, err)
		}
	}
}

// bringUpUD moves a UD QP to RTS with Q_Key qkey.
func bringUpUD(t *testing.T, d *Device, x *QP, qkey uint32) {
	t.Helper()
	for _, s := range []struct {
		a    qp.Attr
		mask qp.AttrMask
	}{
		{qp.Attr{State: qp.StateInit, Port: 1, QKey: qkey}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey},
		{qp.Attr{State: qp.StateRTR}, qp.AttrState},
		{qp.Attr{State: qp.StateRTS}, qp.AttrState | qp.AttrSQPSN},
	} {
		if err := d.ModifyQP(x, &s.a, s.mask); err != nil {
			t.Fatalf("UD %v: %v", s.a.State, err)
		}
	}
}

// loopbackRun runs RC SEND, RDMA WRITE, RDMA READ, fetch-and-add and compare-and-swap,
// and a UD SEND, between two QPs of one device (in two PDs, as two processes' QPs
// are), under congestion control cc. The device's link leads to a second device, which
// must see nothing. It returns the run's trace: every completion with its time, and the
// counters.
func loopbackRun(t *testing.T, cfg Config) string {
	t.Helper()
	cc := cfg.CC
	v, h1, h2 := linkedPair(t, 10e9, 1500, cfg)
	var trace strings.Builder
	gid, _ := h1.QueryGID(0)
	pdA, _ := h1.AllocPD()
	pdB, _ := h1.AllocPD()
	const size = 16 << 10
	mrA, err := h1.RegMR(pdA, size, loopbackAccess)
	if err != nil {
		t.Fatal(err)
	}
	mrB, _ := h1.RegMR(pdB, size, loopbackAccess)
	for i := range mrA.Bytes() {
		mrA.Bytes()[i], mrB.Bytes()[i] = byte(i*7), byte(i*13)
	}
	cqA, _ := h1.CreateCQ(16, nil)
	cqB, _ := h1.CreateCQ(16, nil)
	rcAttr := func(cq *CQ) QPInitAttr {
		return QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	a, err := h1.CreateQP(pdA, rcAttr(cqA))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := h1.CreateQP(pdB, rcAttr(cqB))
	bringUpLoopRC(t, h1, a, gid, b.QPN())
	bringUpLoopRC(t, h1, b, gid, a.QPN())

	// complete runs until cq holds one completion and checks it; a wantLen below 0
	// accepts any length (a send completion's).
	complete := func(what string, cq *CQ, wrid uint64, wantLen int) qp.WC {
		t.Helper()
		v.RunFor(time.Millisecond)
		wcs := make([]qp.WC, 4)
		n, err := cq.PollCQ(wcs)
		if err != nil || n != 1 || wcs[0].Status != qp.WCSuccess || wcs[0].WRID != wrid || wantLen >= 0 && int(wcs[0].ByteLen) != wantLen {
			t.Fatalf("%s: %d completions %+v (%v); want WR %d, success, %d bytes", what, n, wcs[:n], err, wrid, wantLen)
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

	// SEND of two packets into a receive of the other QP.
	if err := b.PostRecv(&qp.RecvWR{WRID: 100, SGL: sge(mrB, 0, 2048)}); err != nil {
		t.Fatal(err)
	}
	post("send", a, qp.SendWR{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: sge(mrA, 0, 2000)})
	complete("send: sender", cqA, 1, -1)
	complete("send: receiver", cqB, 100, 2000)
	if !bytes.Equal(mrB.Bytes()[:2000], mrA.Bytes()[:2000]) {
		t.Fatal("send: the received bytes differ from the sent ones")
	}
	// RDMA WRITE of three packets.
	post("write", a, qp.SendWR{WRID: 2, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sge(mrA, 2048, 3000),
		RemoteAddr: mrB.Addr() + 4096, RKey: mrB.RKey()})
	complete("write", cqA, 2, -1)
	if !bytes.Equal(mrB.Bytes()[4096:7096], mrA.Bytes()[2048:5048]) {
		t.Fatal("write: the target's bytes differ from the source's")
	}
	// RDMA READ of three packets.
	post("read", a, qp.SendWR{WRID: 3, Opcode: qp.WRRead, Flags: qp.SendSignaled, SGL: sge(mrA, 8192, 3000),
		RemoteAddr: mrB.Addr() + 8192, RKey: mrB.RKey()})
	complete("read", cqA, 3, -1)
	if !bytes.Equal(mrA.Bytes()[8192:11192], mrB.Bytes()[8192:11192]) {
		t.Fatal("read: the fetched bytes differ from the target's")
	}
	// Atomics on a word of the other PD's region.
	word := mrB.Bytes()[12288:12296]
	binary.LittleEndian.PutUint64(word, 5)
	post("fetch-add", a, qp.SendWR{WRID: 4, Opcode: qp.WRFetchAdd, Flags: qp.SendSignaled, SGL: sge(mrA, 12288, 8),
		RemoteAddr: mrB.Addr() + 12288, RKey: mrB.RKey(), CompareAdd: 37})
	complete("fetch-add", cqA, 4, -1)
	post("compare-swap", a, qp.SendWR{WRID: 5, Opcode: qp.WRCompareSwap, Flags: qp.SendSignaled, SGL: sge(mrA, 12296, 8),
		RemoteAddr: mrB.Addr() + 12288, RKey: mrB.RKey(), CompareAdd: 42, Swap: 7})
	complete("compare-swap", cqA, 5, -1)
	if got, orig1, orig2 := binary.LittleEndian.Uint64(word), binary.LittleEndian.Uint64(mrA.Bytes()[12288:]),
		binary.LittleEndian.Uint64(mrA.Bytes()[12296:]); got != 7 || orig1 != 5 || orig2 != 42 {
		t.Fatalf("atomics: word %d (want 5+37, swapped for 7), originals %d and %d (want 5 and 42)", got, orig1, orig2)
	}

	// UD SEND through an address handle to the device's own GID.
	const qkey = 0x1234
	udA, _ := h1.CreateQP(pdA, QPInitAttr{Type: qp.UD, SendCQ: cqA, RecvCQ: cqA, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	udB, _ := h1.CreateQP(pdB, QPInitAttr{Type: qp.UD, SendCQ: cqB, RecvCQ: cqB, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	bringUpUD(t, h1, udA, qkey)
	bringUpUD(t, h1, udB, qkey)
	ah, err := h1.CreateAH(pdA, AHAttr{DGID: gid})
	if err != nil {
		t.Fatalf("address handle to the own GID: %v", err)
	}
	if err := udB.PostRecv(&qp.RecvWR{WRID: 200, SGL: sge(mrB, 13312, 40+512)}); err != nil {
		t.Fatal(err)
	}
	post("ud send", udA, qp.SendWR{WRID: 6, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: sge(mrA, 0, 512),
		AH: ah.AV(), RemoteQPN: uint32(udB.QPN()), RemoteQKey: qkey})
	complete("ud send: sender", cqA, 6, -1)
	wc := complete("ud send: receiver", cqB, 200, 40+512) // the GRH comes first
	if wc.SrcQP != uint32(udA.QPN()) || !bytes.Equal(mrB.Bytes()[13312+40:13312+40+512], mrA.Bytes()[:512]) {
		t.Fatalf("ud send: source QP %d (want %d), or the bytes differ", wc.SrcQP, udA.QPN())
	}

	s := h1.Stats()
	fmt.Fprintf(&trace, "%+v\n", s)
	if s.LoopbackFrames == 0 || s.LoopbackFrames != s.TxFrames || s.RxFrames != s.TxFrames || s.ARPReqs != 0 {
		t.Errorf("h1 sent %d frames, looped %d and received %d, asked ARP %d times: want every frame looped back, no ARP",
			s.TxFrames, s.LoopbackFrames, s.RxFrames, s.ARPReqs)
	}
	if s.RxMalformed+s.RxBadICRC+s.RxUnknownQP+s.RxNotForUs+s.TxTelemetryErrors != 0 {
		t.Errorf("h1 dropped frames: %+v", s)
	}
	if sent := h1.cfg.Link.Stats().Frames; sent != 0 || h2.Stats().RxFrames != 0 {
		t.Errorf("the fabric saw h1's loopback traffic: %d frames on its link, %d received by h2", sent, h2.Stats().RxFrames)
	}
	// A probe goes while data is in flight. Without lookahead a looped packet's ACK is
	// back before the next packet leaves, so nothing is in flight when the scheduler
	// looks; with it, several packets leave together and probes go.
	if cc.Mode == ModeHPCCProbe && (s.ProbeResponses != s.ProbesSent || cfg.TxLookahead > 0 && s.ProbesSent == 0) {
		t.Errorf("probe mode: %d probes sent, %d answered; want each one answered", s.ProbesSent, s.ProbeResponses)
	}
	for _, x := range []*QP{a, b} {
		if st, ok := x.HPCC(); ok && st.W < cc.HPCC.WInit {
			// No switch on the path, no hop in the telemetry: HPCC has nothing to react
			// to and must keep its initial window (a stall shows here as a shrunk one).
			t.Errorf("QP %v: HPCC window %v below W_init %v without any telemetry", x.QPN(), st.W, cc.HPCC.WInit)
		}
	}
	return trace.String()
}

// TestLoopbackTwoQPsOneDevice: two QPs of one soft-RNIC reach each other through the
// port's loopback, never through the fabric, under every congestion-control mode and
// telemetry format (looped frames carry no switch hop: HPCC must cope with none), and
// the same run twice gives the same trace.
func TestLoopbackTwoQPsOneDevice(t *testing.T) {
	const baseRTT = 10 * time.Microsecond
	params := hpcc.DraftParams(10e9, baseRTT, 2)
	params.WInit = 10e9 / 8 * baseRTT.Seconds()
	for _, cfg := range []Config{
		{},
		{CC: CC{Mode: ModeDCQCN}},
		{CC: CC{Mode: ModeHPCC, Telemetry: telemetry.FormatINTMD, HPCC: params}},
		{CC: CC{Mode: ModeHPCCProbe, Telemetry: telemetry.FormatINTMD, HPCC: params}},
		{CC: CC{Mode: ModeRxHPCC, Telemetry: telemetry.FormatINTMD, HPCC: params}},
		{CC: CC{Mode: ModeHPCCEveryN, Telemetry: telemetry.FormatHPCC, HPCC: params}},
		{CC: CC{Mode: ModeHPCC, Telemetry: telemetry.FormatIFA, HPCC: params}},
		// The real-time lab's transmit lookahead: frames are handed over ahead of
		// their time, several wait in the loopback queue, and are delivered in batches.
		{CC: CC{Mode: ModeHPCCProbe, Telemetry: telemetry.FormatINTMD, HPCC: params}, TxLookahead: 20 * time.Microsecond},
	} {
		name := cmp.Or(string(cfg.CC.Mode), "none") + "-" + cmp.Or(string(cfg.CC.Telemetry), "none")
		if cfg.TxLookahead > 0 {
			name += "-lookahead"
		}
		t.Run(name, func(t *testing.T) {
			first := loopbackRun(t, cfg)
			if second := loopbackRun(t, cfg); second != first {
				t.Errorf("two runs differ:\n%s\n%s", first, second)
			}
		})
	}
}

// TestOwnAddressResolves: the own addresses resolve to the own MAC without asking the
// network, as the kernel's neighbour lookup of a local address does.
func TestOwnAddressResolves(t *testing.T) {
	_, h1, _ := pair(t)
	gid, _ := h1.QueryGID(0)
	if mac, ok := h1.Neighbour(gid.Addr()); !ok || mac != h1.cfg.MAC {
		t.Errorf("neighbour of the own address: %v, %v; want %v", mac, ok, h1.cfg.MAC)
	}
	if h1.Stats().ARPReqs != 0 {
		t.Errorf("asked the network for the own address")
	}
}
