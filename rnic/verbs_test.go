package rnic

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// pair is two devices joined by one link, on a virtual clock.
func pair(t *testing.T) (*clock.Virtual, *Device, *Device) {
	t.Helper()
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	pool := link.NewPool(1518)
	var events []AsyncEvent
	open := func(name string, ep link.Endpoint, mac byte, ip string) *Device {
		d, err := Open(Config{Name: name, MAC: [6]byte{2, 0, 0, 0, 0, mac}, GIDs: []netip.Addr{netip.MustParseAddr(ip)},
			Loop: v.NewLoop(name), Link: ep, Pool: pool, AsyncHandler: func(e AsyncEvent) { events = append(events, e) }})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return v, open("h1", a, 1, "10.0.0.1"), open("h2", b, 2, "10.0.0.2")
}

func TestMRChecks(t *testing.T) {
	_, d, _ := pair(t)
	pd, _ := d.AllocPD()
	if _, err := d.RegMR(pd, 4096, qp.AccessRemoteWrite); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("remote write without local write: %v", err)
	}
	mr, err := d.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Write(mr.RKey(), mr.Addr()+4090, make([]byte, 8), qp.AccessRemoteWrite); !errors.Is(err, qp.ErrOutOfBounds) {
		t.Errorf("write past the end: %v", err)
	}
	if err := pd.Read(mr.LKey(), mr.Addr(), make([]byte, 8), qp.AccessRemoteRead); !errors.Is(err, qp.ErrAccessDenied) {
		t.Errorf("remote read of a region without it: %v", err)
	}
	if err := pd.Write(mr.RKey()+1, mr.Addr(), make([]byte, 8), qp.AccessRemoteWrite); !errors.Is(err, qp.ErrInvalidKey) {
		t.Errorf("unknown key: %v", err)
	}
	if err := pd.Write(mr.RKey(), mr.Addr()+8, []byte{1, 0, 0, 0, 0, 0, 0, 0}, qp.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	orig, err := pd.Atomic(mr.RKey(), mr.Addr()+8, qp.AtomicOp{SwapAdd: 41}, qp.AccessLocalWrite)
	if err != nil || orig != 1 || mr.Bytes()[8] != 42 {
		t.Errorf("fetch-add: orig %d, err %v, word now %d", orig, err, mr.Bytes()[8])
	}
	if err := d.DeallocPD(pd); !errors.Is(err, ErrBusy) {
		t.Errorf("dealloc PD holding an MR: %v", err)
	}
	if err := d.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
}

// TestLookupAfterDereg: the PD's last-found region (PD.hot) answers only while it is
// registered; lookups alternating between two regions find each.
func TestLookupAfterDereg(t *testing.T) {
	_, d, _ := pair(t)
	pd, _ := d.AllocPD()
	a, errA := d.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	b, errB := d.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for i, m := range []*MR{a, b, a, b} {
		if err := pd.Write(m.RKey(), m.Addr(), []byte{byte(i + 1)}, qp.AccessRemoteWrite); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if a.Bytes()[0] != 3 || b.Bytes()[0] != 4 {
		t.Errorf("regions hold %d and %d, want 3 and 4", a.Bytes()[0], b.Bytes()[0])
	}
	if err := pd.Write(b.RKey(), b.Addr(), []byte{5}, qp.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if err := d.DeregMR(b); err != nil {
		t.Fatal(err)
	}
	if err := pd.Write(b.RKey(), b.Addr(), []byte{6}, qp.AccessRemoteWrite); !errors.Is(err, qp.ErrInvalidKey) {
		t.Errorf("write to the region just deregistered: %v, want an invalid key", err)
	}
	if err := pd.Write(a.RKey(), a.Addr(), []byte{7}, qp.AccessRemoteWrite); err != nil || a.Bytes()[0] != 7 {
		t.Errorf("write to the other region: %v", err)
	}
	if err := d.DeregMR(a); err != nil {
		t.Fatal(err)
	}
}

func TestCQOverflowRaisesEvent(t *testing.T) {
	_, d, _ := pair(t)
	var got []AsyncEvent
	d.cfg.AsyncHandler = func(e AsyncEvent) { got = append(got, e) }
	ch := d.CreateCompChannel(1)
	woken := 0
	ch.Handler = func(*CQ) { woken++ }
	cq, _ := d.CreateCQ(2, ch)
	cq.ReqNotifyCQ(false)
	for i := range 3 {
		cq.Push(qp.WC{WRID: uint64(i)})
	}
	d.notify() // what the device does when the event that completed the work ends
	if woken != 1 || len(got) != 1 || got[0].Type != EventCQErr || got[0].CQ != cq {
		t.Fatalf("woken %d, events %+v", woken, got)
	}
	if _, err := cq.PollCQ(make([]qp.WC, 4)); !errors.Is(err, ErrNoMemory) {
		t.Errorf("poll of an overrun CQ: %v", err)
	}
}

func TestSRQLimit(t *testing.T) {
	_, d, _ := pair(t)
	var got []AsyncEvent
	d.cfg.AsyncHandler = func(e AsyncEvent) { got = append(got, e) }
	pd, _ := d.AllocPD()
	srq, _ := d.CreateSRQ(pd, SRQInitAttr{MaxWR: 4})
	for i := range 3 {
		if err := srq.PostSRQRecv(&qp.RecvWR{WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	srq.ModifySRQ(2)
	if wr, ok := srq.Pop(); !ok || wr.WRID != 0 || len(got) != 0 {
		t.Fatalf("first pop: %v %v, events %v", wr, ok, got)
	}
	srq.Pop()
	if len(got) != 1 || got[0].Type != EventSRQLimitReached {
		t.Fatalf("events %+v", got)
	}
}

// TestARPResolvesPeer: an AH towards an unknown neighbour fails with ErrUnresolved and
// asks; the peer answers; the retry succeeds with the learned MAC.
func TestARPResolvesPeer(t *testing.T) {
	v, a, b := pair(t)
	pd, _ := a.AllocPD()
	gid, _ := b.QueryGID(0)
	if _, err := a.CreateAH(pd, AHAttr{DGID: gid}); !errors.Is(err, ErrUnresolved) {
		t.Fatalf("first AH: %v", err)
	}
	v.RunFor(10 * time.Microsecond)
	ah, err := a.CreateAH(pd, AHAttr{DGID: gid})
	if err != nil {
		t.Fatal(err)
	}
	if ah.AV().DstMAC != b.cfg.MAC || b.Stats().ARPReplies != 1 {
		t.Errorf("resolved %v, replies %d", ah.AV().DstMAC, b.Stats().ARPReplies)
	}
}

// TestRoutedHopLimit: like the kernel's RoCE ports, a routed destination gets the
// route's hop limit (64) whatever the caller asked for (rdma-core's examples ask for 1);
// a link-local one keeps the caller's.
func TestRoutedHopLimit(t *testing.T) {
	v, a, b := pair(t)
	pd, _ := a.AllocPD()
	gid, _ := b.QueryGID(0)
	a.CreateAH(pd, AHAttr{DGID: gid}) // asks for the MAC
	v.RunFor(10 * time.Microsecond)
	ah, err := a.CreateAH(pd, AHAttr{DGID: gid, HopLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := ah.AV().HopLimit; got != roce.DefaultTTL {
		t.Errorf("routed destination: hop limit %d, want %d", got, roce.DefaultTTL)
	}
	sgid, _ := a.QueryGID(0)
	av := qp.AddressVector{DGID: roce.GIDFromAddr(netip.MustParseAddr("fe80::2")), SGID: sgid, HopLimit: 1, DstMAC: b.cfg.MAC}
	if err := a.resolveAV(&av); err != nil {
		t.Fatal(err)
	}
	if av.HopLimit != 1 {
		t.Errorf("link-local destination: hop limit %d, want the caller's 1", av.HopLimit)
	}
}

// TestMalformedFramesDropped feeds garbage and truncated RoCE frames: counted, dropped,
// nothing else happens.
func TestMalformedFramesDropped(t *testing.T) {
	_, d, _ := pair(t)
	pool := link.NewPool(1518)
	frames := [][]byte{
		{1, 2, 3},
		append(make([]byte, 12), 0x08, 0x00, 0x45), // IPv4 cut off
	}
	for _, b := range frames {
		f := pool.Get()
		f.SetBytes(b)
		d.receive(f)
	}
	if s := d.Stats(); s.RxFrames != 2 || s.RxMalformed+s.RxNotForUs != 2 {
		t.Errorf("stats %+v", s)
	}
}

// icmpv6Frame is an Ethernet frame carrying an ICMPv6 message of type typ with body
// (after the 4-byte header) from fe80::1 to ff02::2.
func icmpv6Frame(typ byte, body []byte) []byte {
	msg := append([]byte{typ, 0, 0, 0}, body...)
	b := []byte{0x33, 0x33, 0, 0, 0, 2, 2, 0, 0, 0, 0, 9, 0x86, 0xdd}
	ip := make([]byte, roce.IPv6Size)
	ip[0] = 0x60
	ip[4], ip[5] = byte(len(msg)>>8), byte(len(msg))
	ip[6], ip[7] = 58, 255
	ip[8], ip[9], ip[23] = 0xfe, 0x80, 1
	ip[24], ip[25], ip[39] = 0xff, 0x02, 2
	return append(append(b, ip...), msg...)
}

// TestShortICMPv6ToHost: the kernel's router solicitation (16 bytes of ICMPv6, shorter
// than a neighbour message) is the host's, not malformed; a neighbour solicitation cut
// short is.
func TestShortICMPv6ToHost(t *testing.T) {
	_, d, _ := pair(t)
	pool := link.NewPool(1518)
	for _, c := range []struct {
		name      string
		frame     []byte
		malformed uint64
	}{
		{"router solicitation with source link-layer option", icmpv6Frame(133, append(make([]byte, 4), 1, 1, 2, 0, 0, 0, 0, 9)), 0},
		{"neighbour solicitation without its target", icmpv6Frame(135, make([]byte, 4)), 1},
	} {
		before := d.Stats().RxMalformed
		f := pool.Get()
		if err := f.SetBytes(c.frame); err != nil {
			t.Fatal(err)
		}
		d.receive(f)
		if got := d.Stats().RxMalformed - before; got != c.malformed {
			t.Errorf("%s: RxMalformed +%d, want +%d", c.name, got, c.malformed)
		}
	}
}
