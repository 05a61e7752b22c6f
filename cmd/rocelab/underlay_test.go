package main

import (
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/netns"
)

// The multi-machine test's underlay: machines a and b each have one end of a veth
// whose other end is in a "wan" namespace, where a bridge joins them. To impair the
// underlay, the test takes the two ends off the bridge and forwards between them in
// userspace with a delay and a loss rate (impair): the kernels this project's CI runs
// on are built without tc's netem (CONFIG_NET_SCH_NETEM is not set), which would do
// the same in the kernel (`tc qdisc add dev DEV root netem delay 100us loss 2%`, as
// docs/multi-machine.md shows).

// underlay is the wan namespace between the machines.
type underlay struct {
	netns, bridge string
	ends          [2]string // its ends of the machines' veths, a's then b's
}

// ipCmd runs ip with args, failing the test on error.
func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newUnderlay makes the wan namespace and its bridge, removed when the test ends.
func newUnderlay(t testing.TB, suffix string) *underlay {
	u := &underlay{netns: "mach-w" + suffix, bridge: "wbr" + suffix, ends: [2]string{"wa" + suffix, "wb" + suffix}}
	ipCmd(t, "netns", "add", u.netns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", u.netns).Run() })
	ipCmd(t, "-n", u.netns, "link", "add", u.bridge, "type", "bridge")
	ipCmd(t, "-n", u.netns, "link", "set", u.bridge, "mtu", "9000", "up")
	return u
}

// attach joins machine m to the underlay as its i-th end.
func (u *underlay) attach(t testing.TB, i int, m *machine) {
	ipCmd(t, "link", "add", m.veth, "netns", m.netns, "mtu", "9000", "type", "veth", "peer", "name", u.ends[i], "netns", u.netns, "mtu", "9000")
	ipCmd(t, "-n", u.netns, "link", "set", u.ends[i], "master", u.bridge, "up")
	// Frames as the wire carries them: a forwarder reading the veth with AF_PACKET would
	// otherwise get TCP's 64 KB segmentation-offload packets, which it cannot send on,
	// and UDP and TCP checksums left for an offload that never computes them.
	for _, end := range [][2]string{{m.netns, m.veth}, {u.netns, u.ends[i]}} {
		if out, err := exec.Command("ip", "netns", "exec", end[0], "ethtool", "-K", end[1], "tx", "off", "tso", "off", "gso", "off", "gro", "off").CombinedOutput(); err != nil {
			t.Fatalf("ethtool -K %s: %v\n%s", end[1], err, out)
		}
	}
	ipCmd(t, "-n", m.netns, "addr", "add", m.addr+"/24", "dev", m.veth)
	ipCmd(t, "-n", m.netns, "link", "set", m.veth, "up")
	ipCmd(t, "-n", m.netns, "link", "set", "lo", "up")
}

// impair takes the underlay's ends off the bridge and forwards the frames between them
// with delay added and a loss rate, until the returned function puts them back.
func (u *underlay) impair(t testing.TB, delay time.Duration, loss float64) (restore func()) {
	t.Helper()
	for _, end := range u.ends {
		ipCmd(t, "-n", u.netns, "link", "set", end, "nomaster")
	}
	var fds [2]int
	err := netns.Do(u.netns, func() error {
		for i, end := range u.ends {
			ifc, err := net.InterfaceByName(end)
			if err != nil {
				return err
			}
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
			if err != nil {
				return err
			}
			fds[i] = fd
			if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
				return err
			}
			// Readers look at the stop flag this often.
			tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("impair the underlay: %v", err)
	}
	var stop sync.WaitGroup
	var stopped bool
	var mu sync.Mutex
	done := func() bool { mu.Lock(); defer mu.Unlock(); return stopped }
	for i := range 2 {
		in, out := fds[i], fds[1-i]
		type delayed struct {
			due   time.Time
			frame []byte
		}
		line := make(chan delayed, 4096)
		stop.Add(2)
		go func() { // the direction's reader: what enters the wire
			defer stop.Done()
			defer close(line)
			buf := make([]byte, 65536)
			for !done() {
				n, from, err := unix.Recvfrom(in, buf, 0)
				if err != nil {
					continue // the timeout: look at the flag
				}
				if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
					continue // the other direction's writes
				}
				if rand.Float64() < loss {
					continue
				}
				select {
				case line <- delayed{time.Now().Add(delay), append([]byte(nil), buf[:n]...)}:
				default: // the line is full: dropped as a full queue drops
				}
			}
		}()
		go func() { // the direction's writer: what leaves it, delay later
			defer stop.Done()
			for d := range line {
				// nanosleep on this thread: a Go timer may fire a millisecond late
				// on a busy machine, ten times the delay.
				if wait := time.Until(d.due); wait > 0 {
					ts := unix.NsecToTimespec(wait.Nanoseconds())
					unix.Nanosleep(&ts, nil)
				}
				unix.Write(out, d.frame)
			}
		}()
	}
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		stop.Wait()
		for i, fd := range fds {
			unix.Close(fd)
			ipCmd(t, "-n", u.netns, "link", "set", u.ends[i], "master", u.bridge)
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
