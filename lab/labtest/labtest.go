// Package labtest checks a running lab from outside, as its users would: pings and
// TCP exchanges between every pair of hosts, from inside the hosts' namespaces, through
// whatever runs the lab (lab.Up in the test's process, or a lab process started by
// rocelab up). It needs root.
package labtest

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/rocelab/rocelab/netns"
)

// Host is what the checks need of a lab host.
type Host struct {
	Name      string
	Namespace string
	IPv4      netip.Addr
	IPv6      netip.Addr // invalid when the host has none
}

func (h Host) addrs() []netip.Addr {
	var out []netip.Addr
	for _, a := range []netip.Addr{h.IPv4, h.IPv6} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

var echoID atomic.Int32

// Ping sends ICMP echoes from namespace ns to dst, one a second as ping(8) does, and
// waits up to 5 s in all for a reply. A single echo could be lost for good to address
// resolution on a link just brought up (the kernel drops what it queued for a
// neighbour whose solicitations went unanswered), and failed a lab test once in CI.
func Ping(ns string, dst netip.Addr) error {
	network, proto := "ip4:icmp", 1
	var typ icmp.Type = ipv4.ICMPTypeEcho
	if dst.Is6() {
		network, proto, typ = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest
	}
	var c *icmp.PacketConn
	if err := netns.Do(ns, func() (err error) {
		c, err = icmp.ListenPacket(network, "")
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	id := int(echoID.Add(1)) & 0xffff
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1500)
	for seq := 1; ; seq++ {
		msg, _ := (&icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("rocelab")}}).Marshal(nil)
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return err
		}
		next := time.Now().Add(time.Second)
		if next.After(deadline) {
			next = deadline
		}
		c.SetReadDeadline(next)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				if time.Now().Before(deadline) {
					break // the next echo
				}
				return fmt.Errorf("no echo reply from %v to %d echoes: %w", dst, seq, err)
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && (m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply) &&
				e.ID == id && from.(*net.IPAddr).IP.Equal(dst.AsSlice()) {
				return nil
			}
		}
	}
}

// PingAllPairs pings every host's addresses from every other host, all at once.
func PingAllPairs(t testing.TB, hosts []Host) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(hosts)*len(hosts))
	for _, src := range hosts {
		for _, dst := range hosts {
			if src.Name == dst.Name {
				continue
			}
			for _, a := range dst.addrs() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := Ping(src.Namespace, a); err != nil {
						errs <- fmt.Errorf("ping %s→%s (%v): %w", src.Name, dst.Name, a, err)
					}
				}()
			}
		}
	}
	wg.Wait()
	close(errs)
	report(t, "pings", errs)
}

// TCPPort is the port TCPAllPairs listens on in every host.
const TCPPort = 7000

// TCPAllPairs listens on TCP in every host and connects from every other host to each
// of its addresses, exchanging a line each way.
func TCPAllPairs(t testing.TB, hosts []Host) {
	t.Helper()
	for _, h := range hosts {
		var ln net.Listener
		if err := netns.Do(h.Namespace, func() (err error) {
			ln, err = net.Listen("tcp", fmt.Sprintf(":%d", TCPPort))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go serveEcho(ln, h.Name)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(hosts)*len(hosts)+len(hosts))
	for _, src := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := netns.Do(src.Namespace, func() error {
				for _, dst := range hosts {
					if dst.Name == src.Name {
						continue
					}
					for _, a := range dst.addrs() {
						if err := tcpExchange(src.Name, dst.Name, a); err != nil {
							errs <- err
						}
					}
				}
				return nil
			})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	report(t, "TCP exchanges", errs)
}

// serveEcho answers each connection with "<name> got <what it read>".
func serveEcho(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Write(append([]byte(name+" got "), buf[:n]...))
		}()
	}
}

func tcpExchange(src, dst string, a netip.Addr) error {
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, TCPPort).String(), 5*time.Second)
	if err != nil {
		return fmt.Errorf("%s→%s %v: %w", src, dst, a, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(src)); err != nil {
		return err
	}
	got, err := io.ReadAll(c)
	if want := dst + " got " + src; err != nil || string(got) != want {
		return fmt.Errorf("%s→%s %v: read %q, %v; want %q", src, dst, a, got, err, want)
	}
	return nil
}

// report fails t with the first few errors and their count.
func report(t testing.TB, what string, errs <-chan error) {
	t.Helper()
	n := 0
	for err := range errs {
		if n++; n <= 3 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d %s failed", n, what)
	}
}
