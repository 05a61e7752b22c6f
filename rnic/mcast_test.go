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

// hub floods every frame arriving at one of its ports out of all the others, as the
// lab's switches do with a multicast MAC.
type hub struct {
	loop  clock.Loop
	ports []link.Endpoint
}

type hubPort struct {
	h *hub
	i int
}

func (p hubPort) Receive(frames []*link.Frame) {
	for _, f := range frames {
		for j, out := range p.h.ports {
			if j != p.i {
				c := f.Clone()
				c.Time = p.h.loop.Now()
				out.Send([]*link.Frame{c})
			}
		}
		f.Release()
	}
}

// TestMulticast sends UD datagrams to a group from one device to three others, two of
// which have a QP attached, and to a QP attached on the sender's device: only attached
// QPs get them, nothing reaches a host kernel, and a detached QP gets no more.
func TestMulticast(t *testing.T) {
	v := clock.NewVirtual(1)
	pool := link.NewPool(1518)
	h := &hub{loop: v.NewLoop("hub")}
	var devs []*Device
	for i := range 4 {
		a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		b.Attach(h.loop, hubPort{h, i})
		h.ports = append(h.ports, b)
		name := string(rune('a' + i))
		d, err := Open(Config{Name: name, MAC: [6]byte{2, 0, 0, 0, 0, byte(i + 1)},
			GIDs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})}, Loop: v.NewLoop(name), Link: a, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	const qkey = 0x01234567
	group := roce.GIDFromAddr(netip.MustParseAddr("239.1.2.3"))
	type end struct {
		x  *QP
		cq *CQ
		mr *MR
	}
	var udKey func(d *Device, typ qp.Type, qkey uint32) end
	ud := func(d *Device, typ qp.Type) end { return udKey(d, typ, qkey) }
	udKey = func(d *Device, typ qp.Type, qkey uint32) end {
		t.Helper()
		pd, _ := d.AllocPD()
		mr, err := d.RegMR(pd, 4096, qp.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		cq, _ := d.CreateCQ(16, nil)
		x, err := d.CreateQP(pd, QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if typ == qp.UD {
			bringUpUD(t, d, x, qkey)
			for i := range 4 {
				if err := x.PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{{Addr: mr.Addr() + uint64(i)*1024, Length: 1024, LKey: mr.LKey()}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return end{x, cq, mr}
	}
	sender, r1, r2, other := ud(devs[0], qp.UD), ud(devs[1], qp.UD), ud(devs[2], qp.UD), ud(devs[3], qp.UD)
	local := ud(devs[0], qp.UD) // a member on the sender's own device hears it by loopback
	for _, r := range []end{r1, r2, local} {
		if err := r.x.dev.AttachMcast(r.x, group); err != nil {
			t.Fatal(err)
		}
		if err := r.x.dev.AttachMcast(r.x, group); err != nil {
			t.Fatalf("attaching a member again: %v, want no error", err)
		}
	}
	// ib_attach_mcast's checks: a unicast GID, a QP that is not UD.
	if err := devs[3].AttachMcast(other.x, roce.GIDFromAddr(netip.MustParseAddr("10.0.0.9"))); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("attach to a unicast GID: %v, want EINVAL", err)
	}
	rc := ud(devs[3], qp.RC)
	if err := devs[3].AttachMcast(rc.x, group); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("attach an RC QP: %v, want EINVAL", err)
	}
	if err := devs[3].DetachMcast(other.x, group); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("detach a non-member: %v, want EINVAL", err)
	}
	if g := devs[1].McastGroups(); len(g) != 1 || g[0].GID != group || len(g[0].QPs) != 1 || g[0].QPs[0] != r1.x.QPN() {
		t.Errorf("groups of the first receiver: %+v, want %v with QP %v once", g, group, r1.x.QPN())
	}

	spd := sender.x.pd
	ah, err := devs[0].CreateAH(spd, AHAttr{DGID: group})
	if err != nil {
		t.Fatalf("address handle to the group: %v", err)
	}
	if ah.AV().DstMAC != [6]byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03} {
		t.Errorf("group MAC %x, want 01:00:5e:01:02:03", ah.AV().DstMAC)
	}
	send := func(wrid uint64, payload byte) {
		t.Helper()
		copy(sender.mr.Bytes(), []byte{payload, payload, payload})
		wr := qp.SendWR{WRID: wrid, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: sender.mr.Addr(), Length: 100, LKey: sender.mr.LKey()}},
			AH: ah.AV(), RemoteQPN: roce.QPNMask, RemoteQKey: qkey}
		if err := sender.x.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		v.RunFor(time.Millisecond)
	}
	polled := func(e end) []qp.WC {
		wcs := make([]qp.WC, 8)
		n, err := e.cq.PollCQ(wcs)
		if err != nil {
			t.Fatal(err)
		}
		return wcs[:n]
	}
	send(1, 0xaa)
	if wcs := polled(sender); len(wcs) != 1 || wcs[0].Status != qp.WCSuccess {
		t.Fatalf("sender completions %+v, want one success", wcs)
	}
	for i, r := range []end{r1, r2, local} {
		wcs := polled(r)
		if len(wcs) != 1 || wcs[0].Status != qp.WCSuccess || wcs[0].ByteLen != 40+100 || wcs[0].SrcQP != uint32(sender.x.QPN()) ||
			r.mr.Bytes()[40] != 0xaa {
			t.Errorf("receiver %d: completions %+v, payload %#x; want one of 140 bytes from QP %v", i+1, wcs, r.mr.Bytes()[40], sender.x.QPN())
		}
	}
	if wcs := polled(other); len(wcs) != 0 {
		t.Errorf("the unattached QP completed %+v", wcs)
	}
	if s := devs[3].Stats(); s.RxMcastDropped != 1 {
		t.Errorf("unattached device dropped %d multicast packets, want 1", s.RxMcastDropped)
	}
	for i, d := range devs[1:] {
		if s := d.Stats(); s.RxNotForUs != 0 {
			t.Errorf("device %d passed %d frames towards its (absent) host", i+1, s.RxNotForUs)
		}
	}

	// Detach the first receiver, destroy the second: neither gets the next datagram.
	if err := devs[1].DetachMcast(r1.x, group); err != nil {
		t.Fatal(err)
	}
	if err := devs[2].DestroyQP(r2.x); err != nil {
		t.Fatal(err)
	}
	if g := devs[2].McastGroups(); len(g) != 0 {
		t.Errorf("groups after the only member's QP went: %+v", g)
	}
	send(2, 0xbb)
	if wcs := polled(r1); len(wcs) != 0 {
		t.Errorf("detached QP completed %+v", wcs)
	}
	for i, d := range devs[1:] {
		if s := d.Stats(); s.RxMcastDropped != uint64(1+i/2) {
			t.Errorf("device %d dropped %d multicast packets, want %d", i+1, s.RxMcastDropped, 1+i/2)
		}
	}

	// A member whose Q_Key differs drops the datagram, as a UD QP does; the device
	// delivered it (a member), so it counts no multicast drop.
	wrong := udKey(devs[3], qp.UD, qkey+1)
	if err := devs[3].AttachMcast(wrong.x, group); err != nil {
		t.Fatal(err)
	}
	send(3, 0xcc)
	if wcs := polled(wrong); len(wcs) != 0 {
		t.Errorf("a member with another Q_Key completed %+v", wcs)
	}
	if s := devs[3].Stats(); s.RxMcastDropped != 2 {
		t.Errorf("device with the wrong-key member dropped %d multicast packets, want 2", s.RxMcastDropped)
	}
}
