package rnic

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// hostSink is a host netdev double: it keeps copies of what the device relays to it.
type hostSink struct{ frames [][]byte }

func (h *hostSink) Receive(frames []*link.Frame) {
	for _, f := range frames {
		h.frames = append(h.frames, bytes.Clone(f.Bytes()))
		f.Release()
	}
}

// openHostDevice opens a device at 02:00:00:00:00:mac with address ip on ep, relaying
// what it does not terminate to host (nil: none).
func openHostDevice(t *testing.T, v *clock.Virtual, name string, ep link.Endpoint, pool *link.Pool, mac byte, ip string, host link.Receiver) *Device {
	t.Helper()
	d, err := Open(Config{Name: name, MAC: [6]byte{2, 0, 0, 0, 0, mac}, GIDs: []netip.Addr{netip.MustParseAddr(ip)},
		Loop: v.NewLoop(name), Link: ep, Pool: pool, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHostRelay sends kernel frames into h1 (SendFromHost) and expects them, unchanged,
// at h2's host netdev: the two directions of a lab host's TAP relay. The backlog bound
// and oversized frames are counted drops.
func TestHostRelay(t *testing.T) {
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	pool := link.NewPool(1518)
	sink := &hostSink{}
	h1 := openHostDevice(t, v, "h1", a, pool, 1, "10.0.0.1", nil)
	h2 := openHostDevice(t, v, "h2", b, pool, 2, "10.0.0.2", sink)

	// An ARP request from h1's kernel for 10.0.0.2 and an IPv4 ICMP echo to it.
	arp := []byte{
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
		0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
	}
	ping := []byte{
		2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
		0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		8, 0, 0xf7, 0xfe, 0, 1, 0, 0,
	}
	if n := h1.SendFromHost([][]byte{arp, ping, make([]byte, 4000)}); n != 2 {
		t.Fatalf("SendFromHost accepted %d of 3 frames, want 2 (the 4000-byte frame exceeds the pool)", n)
	}
	v.Run()
	if len(sink.frames) != 2 || !bytes.Equal(sink.frames[0], arp) || !bytes.Equal(sink.frames[1], ping) {
		t.Fatalf("h2's host received %x, want the ARP request and the ping", sink.frames)
	}
	if s := h1.Stats(); s.HostFrames != 2 || s.HostDropped != 1 || s.TxFrames != 2 {
		t.Errorf("h1 stats %+v: want 2 host frames sent, 1 dropped", s)
	}
	if mac, ok := h2.Neighbour(netip.MustParseAddr("10.0.0.1")); !ok || mac != [6]byte{2, 0, 0, 0, 0, 1} {
		t.Errorf("h2 did not learn h1 from the relayed ARP request: %x %v", mac, ok)
	}

	burst := make([][]byte, MaxHostBacklog+5)
	for i := range burst {
		burst[i] = ping
	}
	if n := h1.SendFromHost(burst); n != MaxHostBacklog {
		t.Errorf("a burst of %d accepted %d, want the backlog bound %d", len(burst), n, MaxHostBacklog)
	}
	v.Run()
	if got := len(sink.frames) - 2; got != MaxHostBacklog {
		t.Errorf("h2's host received %d of the burst, want %d", got, MaxHostBacklog)
	}
	if s := h1.Stats(); s.HostDropped != 6 {
		t.Errorf("h1 dropped %d host frames, want 6", s.HostDropped)
	}
}

// TestNeighbourTableIsBounded: a host that sends ARP requests from ever new sender
// addresses makes its peer learn at most maxNeighbours of them, counted past that; a
// neighbour learned before still resolves and still updates.
func TestNeighbourTableIsBounded(t *testing.T) {
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	pool := link.NewPool(1518)
	h1 := openHostDevice(t, v, "h1", a, pool, 1, "10.0.0.1", &hostSink{})
	h2 := openHostDevice(t, v, "h2", b, pool, 2, "10.0.0.2", &hostSink{})
	// arp is an ARP request for 10.0.0.2 from sender address 10.i and MAC 02:..:last.
	arp := func(i int, last byte) []byte {
		return []byte{
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
			0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, last, 10, byte(i >> 16), byte(i >> 8), byte(i), 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
		}
	}
	const extra = 1000
	for i := 1; i <= maxNeighbours+extra; i += MaxHostBacklog {
		var batch [][]byte
		for j := i; j < i+MaxHostBacklog && j <= maxNeighbours+extra; j++ {
			batch = append(batch, arp(j, 1))
		}
		if n := h1.SendFromHost(batch); n != len(batch) {
			t.Fatalf("SendFromHost took %d of %d", n, len(batch))
		}
		v.Run()
	}
	if got := len(h2.neigh.macs); got != maxNeighbours {
		t.Errorf("h2 holds %d neighbours, want the bound %d", got, maxNeighbours)
	}
	if got := h2.Stats().NeighboursFull; got != extra {
		t.Errorf("NeighboursFull %d, want %d", got, extra)
	}
	first := netip.AddrFrom4([4]byte{10, 0, 0, 1})
	if mac, ok := h2.Neighbour(first); !ok || mac != [6]byte{2, 0, 0, 0, 0, 1} {
		t.Errorf("the first neighbour resolves to %x, %v", mac, ok)
	}
	h1.SendFromHost([][]byte{arp(1, 9)}) // the same address from another MAC: an update
	v.Run()
	if mac, _ := h2.Neighbour(first); mac != [6]byte{2, 0, 0, 0, 0, 9} {
		t.Errorf("a full table did not update a neighbour it holds: %x", mac)
	}
}
