package network

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// write is one RC RDMA WRITE between two hosts of a network, set up on their devices.
type write struct {
	src, dst *rnic.Device
	sq       *rnic.QP
	smr, rmr *rnic.MR
	cq       *rnic.CQ
}

func newWrite(t *testing.T, src, dst *rnic.Device, size int, seed byte) *write {
	t.Helper()
	w := &write{src: src, dst: dst}
	spd, _ := src.AllocPD()
	dpd, _ := dst.AllocPD()
	var err error
	if w.smr, err = src.RegMR(spd, size, qp.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if w.rmr, err = dst.RegMR(dpd, size, qp.AccessLocalWrite|qp.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	for i := range w.smr.Bytes() {
		w.smr.Bytes()[i] = byte(i*7) ^ seed
	}
	if w.cq, err = src.CreateCQ(16, nil); err != nil {
		t.Fatal(err)
	}
	dcq, _ := dst.CreateCQ(16, nil)
	attr := rnic.QPInitAttr{Type: qp.RC, SendCQ: w.cq, RecvCQ: w.cq, Cap: rnic.QPCap{MaxSendWR: 4, MaxRecvWR: 4}}
	if w.sq, err = src.CreateQP(spd, attr); err != nil {
		t.Fatal(err)
	}
	attr.SendCQ, attr.RecvCQ = dcq, dcq
	rq, err := dst.CreateQP(dpd, attr)
	if err != nil {
		t.Fatal(err)
	}
	sgid, _ := src.QueryGID(1)
	dgid, _ := dst.QueryGID(1)
	connect(t, src, w.sq, dgid, rq.QPN())
	connect(t, dst, rq, sgid, w.sq.QPN())
	sgl := []qp.SGE{{Addr: w.smr.Addr(), Length: uint32(size), LKey: w.smr.LKey()}}
	if err := w.sq.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sgl,
		RemoteAddr: w.rmr.Addr(), RKey: w.rmr.RKey()}); err != nil {
		t.Fatal(err)
	}
	return w
}

func connect(t *testing.T, d *rnic.Device, x *rnic.QP, peer roce.GID, peerQPN roce.QPN) {
	t.Helper()
	a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite}
	if err := d.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	a = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: peer}, PathMTU: roce.MTU1024, DestQPN: peerQPN,
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

// check polls the sender's completion and compares the receiver's buffer.
func (w *write) check(t *testing.T) {
	t.Helper()
	var wc [1]qp.WC
	if n, err := w.cq.PollCQ(wc[:]); n != 1 || err != nil || wc[0].Status != qp.WCSuccess {
		t.Fatalf("%s→%s: completion %d %v %+v", w.src.Name(), w.dst.Name(), n, err, wc[0])
	}
	if !bytes.Equal(w.smr.Bytes(), w.rmr.Bytes()) {
		t.Fatalf("%s→%s: the receiver's buffer differs from the sender's", w.src.Name(), w.dst.Name())
	}
}

// TestBuildLeafSpine builds a 2-spine leaf-spine with HPCC over INT in virtual time and
// moves data both ways between hosts on different leaves (over the spines, ECMP) and
// between hosts of one leaf; a capture on the first leaf's uplink sees the traffic.
// TestBuildLeafSpine: four hosts write to each other across two leaves and two spines,
// with every node on its own loop and with the eight nodes sharing three loops.
func TestBuildLeafSpine(t *testing.T) {
	for _, tc := range []struct{ threads, loops int }{{0, 8}, {3, 3}} {
		t.Run(fmt.Sprintf("threads=%d", tc.threads), func(t *testing.T) { testBuildLeafSpine(t, tc.threads, tc.loops) })
	}
}

func testBuildLeafSpine(t *testing.T, threads, wantLoops int) {
	tp, err := topo.LeafSpine(2, 2, 2, topo.Params{Rate: 25e9, Delay: time.Microsecond, MTU: 1500,
		Telemetry: "int", CongestionControl: "hpcc"})
	if err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(3)
	n, err := Build(tp, v, Options{StaticNeighbours: true, Monitors: true, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Hosts) != 4 || len(n.Switches) != 4 {
		t.Fatalf("%d hosts, %d switches", len(n.Hosts), len(n.Switches))
	}
	loops := map[clock.Loop]bool{}
	for _, s := range n.Switches {
		loops[s.Loop] = true
	}
	for _, h := range n.Hosts {
		loops[h.Loop] = true
	}
	if len(loops) != wantLoops {
		t.Errorf("the nodes run on %d loops, want %d", len(loops), wantLoops)
	}
	// 4 links of 25G at 1 µs: 8 µs of propagation plus serialization.
	if n.BaseRTT < 8*time.Microsecond || n.BaseRTT > 12*time.Microsecond {
		t.Errorf("base RTT %v", n.BaseRTT)
	}
	leaf := n.Switch(tp.Switches[0].Name)
	var buf bytes.Buffer
	session, err := leaf.Monitors[0].Start(&buf, time.Time{}, 0) // the leaf's first link
	if err != nil {
		t.Fatal(err)
	}
	h := func(i int) *rnic.Device { return n.Hosts[i].Device }
	writes := []*write{
		newWrite(t, h(0), h(3), 300_000, 1),
		newWrite(t, h(3), h(0), 300_000, 2),
		newWrite(t, h(1), h(2), 200_000, 3),
		newWrite(t, h(0), h(1), 100_000, 4),
	}
	v.RunFor(50 * time.Millisecond)
	for _, w := range writes {
		w.check(t)
	}
	if err := session.Stop(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	for {
		if _, _, err := r.ReadPacketData(); err != nil {
			break
		}
		frames++
	}
	if frames < 100 {
		t.Errorf("the capture of %s holds %d frames", leaf.Monitors[0].Name(), frames)
	}
	for _, x := range n.Hosts {
		if s := x.Device.Stats(); s.RxMalformed+s.RxBadICRC+s.RxUnknownQP > 0 {
			t.Errorf("%s: %+v", x.Name, s)
		}
	}
}

// TestBuildRejects: topology choices Build cannot honour are errors that say so.
func TestBuildRejects(t *testing.T) {
	tp, _ := topo.Star(2, topo.Params{Rate: 10e9, Delay: time.Microsecond, MTU: 1500, Telemetry: "none", CongestionControl: "none"})
	tp.CongestionControl = "hpcc"
	if _, err := Build(tp, clock.NewVirtual(1), Options{}); err == nil {
		t.Error("HPCC without telemetry accepted")
	}
	// Every lab rate is a whole number of Mb/s, which the HPCC hop carries through
	// rocelab's extension; 1.5 Mb/s is not, and Build names the link and the format.
	tp, _ = topo.Star(2, topo.Params{Rate: 1e9, Delay: time.Microsecond, MTU: 1500, Telemetry: "hpcc", CongestionControl: "hpcc"})
	if _, err := Build(tp, clock.NewVirtual(1), Options{}); err != nil {
		t.Errorf("1 Gb/s with hpcc telemetry: %v", err)
	}
	tp.Links[1].Rate = 1_500_000
	_, err := Build(tp, clock.NewVirtual(1), Options{})
	if want := tp.Links[1].Endpoints[0] + "–" + tp.Links[1].Endpoints[1]; err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "telemetry hpcc") {
		t.Errorf("1.5 Mb/s link with hpcc telemetry: %v; want an error naming %s and the format", err, want)
	}
}

// TestGIDTable: labs lay out GIDs as rxe does (fe80:: from the EUI-64, IPv4, IPv6).
func TestGIDTable(t *testing.T) {
	tp, _ := topo.Star(1, topo.Params{Rate: 10e9, Delay: time.Microsecond, MTU: 1500})
	tp.Hosts[0].IPv6 = netip.MustParseAddr("fd00::1")
	n, err := Build(tp, clock.NewVirtual(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := n.Hosts[0].Device
	want := []string{"fe80::ff:fe00:1", "10.0.0.1", "fd00::1"} // GID.Addr unmaps ::ffff:10.0.0.1
	for i, w := range want {
		g, err := d.QueryGID(i)
		if err != nil || g.Addr().String() != w {
			t.Errorf("GID %d: %v %v, want %s", i, g.Addr(), err, w)
		}
	}
}

// TestBuildCCModes: a lab's congestion control is the topology's, in the topology's
// HPCC mode. Two 1 MB WRITEs into one host of a 1 Gb/s star, in virtual time, under
// each choice: hpcc_mode probe sends telemetry probes and no data packet carries
// telemetry (the switch stamps the probes only, fewer frames than the data); per-ack
// and rx stamp every data packet and send no probe; DCQCN, on a switch the topology
// gives no ecn thresholds, still marks (the simulator's thresholds at the switch's
// 1 Gb/s: 4 KB and 16 KB) and the receiver answers with CNPs.
func TestBuildCCModes(t *testing.T) {
	for _, tc := range []struct{ cc, mode string }{
		{"hpcc", "probe"}, {"hpcc", "per-ack"}, {"hpcc", "rx"}, {"dcqcn", ""},
	} {
		t.Run(tc.cc+"/"+tc.mode, func(t *testing.T) {
			y := "telemetry: int\ncongestion_control: " + tc.cc + "\n"
			if tc.mode != "" {
				y += "hpcc_mode: " + tc.mode + "\n"
			}
			y += "hosts:\n"
			for i := 1; i <= 3; i++ {
				y += fmt.Sprintf("  - {name: h%d, ipv4: 10.0.0.%d}\n", i, i)
			}
			y += "switches:\n  - name: s1\nlinks:\n"
			for i := 1; i <= 3; i++ {
				y += fmt.Sprintf("  - {endpoints: [h%d, s1], rate: 1G, delay: 10us}\n", i)
			}
			tp, err := topo.Parse([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			v := clock.NewVirtual(1)
			n, err := Build(tp, v, Options{StaticNeighbours: true})
			if err != nil {
				t.Fatal(err)
			}
			h := func(i int) *rnic.Device { return n.Hosts[i].Device }
			writes := []*write{newWrite(t, h(0), h(2), 1<<20, 1), newWrite(t, h(1), h(2), 1<<20, 2)}
			v.RunFor(100 * time.Millisecond)
			for _, w := range writes {
				w.check(t)
			}
			toH3 := n.Switch("s1").Switch.Ports()[2].Stats()
			probes := h(0).Stats().ProbesSent + h(1).Stats().ProbesSent
			t.Logf("to h3: %d frames, %d stamped, %d ECN marks; %d probes, %d CNPs",
				toH3.TxFrames, toH3.Stamped, toH3.ECNMarks, probes, h(2).Stats().CNPsSent)
			switch tc.mode {
			case "probe":
				if probes == 0 || toH3.Stamped != probes || toH3.Stamped*4 > toH3.TxFrames {
					t.Errorf("probe: %d probes, %d of %d frames stamped: want only the probes stamped", probes, toH3.Stamped, toH3.TxFrames)
				}
			case "per-ack", "rx":
				if probes != 0 || toH3.Stamped < 2*(1<<20)/1024 {
					t.Errorf("%s: %d probes, %d stamped: want no probe and every data packet stamped", tc.mode, probes, toH3.Stamped)
				}
			default:
				if toH3.ECNMarks == 0 || h(2).Stats().CNPsSent == 0 || toH3.Stamped != 0 {
					t.Errorf("dcqcn: %d marks, %d CNPs, %d stamped: want marks and CNPs, no telemetry", toH3.ECNMarks, h(2).Stats().CNPsSent, toH3.Stamped)
				}
			}
		})
	}
}

// TestTopologyCCRealTimeBaseRTT checks HPCC's T as a lab sets it: the links' round trip
// in virtual time, at least RealTimeMinBaseRTT on the real-time clock, where links
// faster than the loop can fill leave the loop to set the round trip (the two-host
// lab's 100 Gb/s); a topology of 1 Gb/s links keeps its derived T in both.
func TestTopologyCCRealTimeBaseRTT(t *testing.T) {
	for _, tc := range []struct {
		link       string
		realTimeAt time.Duration // T on the real-time clock; 0: the derived T
	}{
		{"rate: 100G, delay: 1µs, mtu: 1500", RealTimeMinBaseRTT},
		{"rate: 1G, delay: 10µs", 0},
	} {
		y := "telemetry: hpcc\ncongestion_control: hpcc\nhosts:\n  - {name: h1, ipv4: 10.0.0.1}\n  - {name: h2, ipv4: 10.0.0.2}\n" +
			"switches:\n  - name: s1\nlinks:\n  - {endpoints: [h1, s1], " + tc.link + "}\n  - {endpoints: [h2, s1], " + tc.link + "}\n"
		tp, err := topo.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		derived := BaseRTT(tp)
		want := map[bool]time.Duration{false: derived, true: derived}
		if tc.realTimeAt > 0 {
			want[true] = tc.realTimeAt
		}
		for _, realTime := range []bool{false, true} {
			cc, err := topologyCC(tp, telemetry.FormatHPCC, realTime)
			if err != nil {
				t.Fatal(err)
			}
			if cc.HPCC.BaseRTT != want[realTime] {
				t.Errorf("%s, real time %v: T = %v, want %v (links' round trip %v)", tc.link, realTime, cc.HPCC.BaseRTT, want[realTime], derived)
			}
		}
	}
}

// TestTopologyNamesAreTheTypes: the names a topology file may give its congestion
// control, HPCC mode and telemetry (fabric/topo, which may not import rnic) are exactly
// the ones rnic.ParseCC and telemetry.ParseFormat take, so that a file the loader
// accepts always builds.
func TestTopologyNamesAreTheTypes(t *testing.T) {
	if !slices.Equal(topo.CongestionControls, rnic.CCNames) {
		t.Errorf("topo.CongestionControls %q, rnic.CCNames %q", topo.CongestionControls, rnic.CCNames)
	}
	modes := make([]string, len(rnic.HPCCModes))
	for i, m := range rnic.HPCCModes {
		modes[i] = string(m)
	}
	if !slices.Equal(topo.HPCCModes, modes) {
		t.Errorf("topo.HPCCModes %q, rnic.HPCCModes %q", topo.HPCCModes, modes)
	}
	for _, cc := range topo.CongestionControls {
		for _, m := range append([]string{""}, topo.HPCCModes...) {
			if _, err := rnic.ParseCC(cc, m); err != nil {
				t.Errorf("ParseCC(%q, %q): %v", cc, m, err)
			}
		}
	}
	for _, f := range topo.TelemetryFormats {
		if _, err := telemetry.ParseFormat(f); err != nil {
			t.Errorf("ParseFormat(%q): %v", f, err)
		}
	}
}
