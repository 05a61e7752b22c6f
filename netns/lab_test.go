package netns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestTwoHostsRelayFrames builds two hosts, checks their view of their NIC from inside
// their namespaces, then plays the lab process: a UDP datagram that h1 sends to h2 is
// read as an Ethernet frame from h1's TAP, checked, and written into h2's TAP, where
// h2's kernel delivers it to a socket. Once over IPv4, once over IPv6.
func TestTwoHostsRelayFrames(t *testing.T) {
	needRoot(t)
	store, _, lab := newLab(t, self(t))
	h1cfg, h2cfg := hostConfig(1), hostConfig(2)
	h1cfg.Neighbours, h2cfg.Neighbours = neighbours(1, 2), neighbours(2, 2)
	h2cfg.Queues = 2
	tap1, tap2 := addHost(t, store, lab, h1cfg), addHost(t, store, lab, h2cfg)

	checkInside(t, NamespaceName(lab, "h1"), h1cfg)
	checkInside(t, NamespaceName(lab, "h2"), h2cfg)
	if tap2.Queues() != 2 {
		t.Errorf("h2 TAP has %d queues, want 2", tap2.Queues())
	}

	for _, family := range []struct {
		network string
		src     netip.Addr
		dst     netip.Addr
	}{
		{"udp4", h1cfg.IPv4.Addr(), h2cfg.IPv4.Addr()},
		{"udp6", h1cfg.IPv6.Addr(), h2cfg.IPv6.Addr()},
	} {
		t.Run(family.network, func(t *testing.T) {
			send := listenUDP(t, NamespaceName(lab, "h1"), family.network)
			recv := listenUDP(t, NamespaceName(lab, "h2"), family.network)
			payload := []byte("rocelab " + family.network)
			dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(family.dst, uint16(recv.LocalAddr().(*net.UDPAddr).Port)))
			if _, err := send.WriteTo(payload, dst); err != nil {
				t.Fatal(err)
			}

			frame := readUDPFrame(t, tap1, dst.AddrPort())
			if !bytes.Equal(frame[0:6], h2cfg.MAC) || !bytes.Equal(frame[6:12], h1cfg.MAC) {
				t.Errorf("frame goes %x -> %x, want %s -> %s (static neighbour)", frame[6:12], frame[0:6], h1cfg.MAC, h2cfg.MAC)
			}
			if !bytes.HasSuffix(frame, payload) {
				t.Errorf("frame %x does not end with the payload", frame)
			}

			// Relay: into h2's second queue, which must work as well as the first.
			if n, err := tap2.Write(1, [][]byte{frame}); n != 1 || err != nil {
				t.Fatalf("write to h2 TAP: %d, %v", n, err)
			}
			// Bounded: the kernel delivers the frame to the socket from softirq context.
			recv.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 1500)
			n, from, err := recv.ReadFrom(buf)
			if err != nil {
				t.Fatalf("h2 received nothing: %v", err)
			}
			if got := from.(*net.UDPAddr).AddrPort().Addr().Unmap(); got != family.src || !bytes.Equal(buf[:n], payload) {
				t.Errorf("h2 received %q from %v, want %q from %v", buf[:n], got, payload, family.src)
			}
		})
	}
}

// checkInside asserts, through netlink inside ns, that the TAP and loopback are up and
// carry the configured MTU, MAC, addresses (usable: not tentative, local route
// installed) and neighbours.
func checkInside(t *testing.T, ns string, cfg HostConfig) {
	t.Helper()
	h, err := openNetlink(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	if want := []string{"lo", TapName(cfg.Name)}; !slices.Equal(names, want) {
		t.Fatalf("%s: links %v, want %v", ns, names, want)
	}
	tap, err := h.LinkByName(TapName(cfg.Name))
	if err != nil {
		t.Fatal(err)
	}
	a := tap.Attrs()
	if tap.Type() != "tuntap" || a.MTU != cfg.MTU || !bytes.Equal(a.HardwareAddr, cfg.MAC) || a.Flags&net.FlagUp == 0 {
		t.Errorf("%s: TAP is %s, MTU %d, MAC %s, flags %v; want tuntap, %d, %s, up", ns, tap.Type(), a.MTU, a.HardwareAddr, a.Flags, cfg.MTU, cfg.MAC)
	}
	lo, err := h.LinkByName("lo")
	if err != nil || lo.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s: loopback not up (%v)", ns, err)
	}
	addrs, err := h.AddrList(tap, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []netip.Prefix{cfg.IPv4, cfg.IPv6} {
		found := false
		for _, got := range addrs {
			ip, _ := netip.AddrFromSlice(got.IP)
			ones, _ := got.Mask.Size()
			if netip.PrefixFrom(ip.Unmap(), ones) == want {
				found = true
				if got.Flags&unix.IFA_F_TENTATIVE != 0 {
					t.Errorf("%s: %s still tentative (DAD not skipped)", ns, want)
				}
			}
		}
		if !found {
			t.Errorf("%s: address %s missing from %v", ns, want, addrs)
		}
		// The kernel delivers to an address only once its local route exists, which
		// for IPv6 it installs asynchronously: ConfigureLink must have waited for it.
		if routes, err := h.RouteGet(net.IP(want.Addr().AsSlice())); err != nil || len(routes) == 0 || routes[0].Type != unix.RTN_LOCAL {
			t.Errorf("%s: no local route for %s yet (%v, %v)", ns, want.Addr(), routes, err)
		}
	}
	neighs, err := h.NeighList(a.Index, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	permanent := 0
	for _, n := range neighs {
		if n.State == netlink.NUD_PERMANENT {
			permanent++
		}
	}
	if want := len(cfg.Neighbours); permanent != want {
		t.Errorf("%s: %d permanent neighbours, want %d", ns, permanent, want)
	}
}

// listenUDP opens a UDP socket inside ns (it stays there wherever it is used).
func listenUDP(t *testing.T, ns, network string) net.PacketConn {
	t.Helper()
	var conn net.PacketConn
	err := Do(ns, func() error {
		var err error
		conn, err = net.ListenPacket(network, ":0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readUDPFrame reads frames from the TAP until the UDP datagram to dst, skipping what
// else the kernel sends on a fresh link (IPv6 router solicitations, MLD reports). The
// deadline bounds the wait: the kernel transmits asynchronously from the sender.
func readUDPFrame(t *testing.T, tap *TAP, dst netip.AddrPort) []byte {
	t.Helper()
	tap.File(0).SetReadDeadline(time.Now().Add(5 * time.Second))
	bufs := [][]byte{make([]byte, 9000), make([]byte, 9000), make([]byte, 9000), make([]byte, 9000)}
	sizes := make([]int, len(bufs))
	for {
		n, err := tap.Read(0, bufs, sizes)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no UDP frame to %v on %s", dst, tap.Name())
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if f := bufs[i][:sizes[i]]; isUDPTo(f, dst) {
				return bytes.Clone(f)
			}
		}
	}
}

// isUDPTo reports whether Ethernet frame f carries a UDP datagram to dst.
func isUDPTo(f []byte, dst netip.AddrPort) bool {
	if len(f) < 14 {
		return false
	}
	ip := f[14:]
	var proto byte
	var addr netip.Addr
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:14]) {
	case unix.ETH_P_IP:
		if len(ip) < 20 {
			return false
		}
		proto, addr, l4 = ip[9], netip.AddrFrom4([4]byte(ip[16:20])), ip[int(ip[0]&0xf)*4:]
	case unix.ETH_P_IPV6:
		if len(ip) < 40 {
			return false
		}
		proto, addr, l4 = ip[6], netip.AddrFrom16([16]byte(ip[24:40])), ip[40:]
	default:
		return false
	}
	return proto == unix.IPPROTO_UDP && addr == dst.Addr() && len(l4) >= 8 &&
		binary.BigEndian.Uint16(l4[2:4]) == dst.Port()
}
