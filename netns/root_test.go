package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
)

// needRoot skips tests that create namespaces when the process may not.
func needRoot(t *testing.T) {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("netns: needs root (CAP_SYS_ADMIN) to create namespaces")
	}
}

var labSeq atomic.Int32

// uniqueName is unique among concurrent test processes on this machine: the pid
// separates processes, the counter the tests of one process.
func uniqueName(kind string) string {
	return fmt.Sprintf("t%s%dx%d", kind, os.Getpid(), labSeq.Add(1))
}

// newLab records a lab owned by owner in a fresh store, and registers a cleanup that
// removes whatever is left of it and fails the test if anything survives.
func newLab(t *testing.T, owner Process) (Store, *Cleaner, string) {
	t.Helper()
	store := Store{Root: t.TempDir()}
	lab := uniqueName("lab")
	if err := store.Save(&Lab{Name: lab, Owner: owner, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := &Cleaner{Store: store, Log: zaptest.NewLogger(t), Grace: 200 * time.Millisecond}
	t.Cleanup(func() {
		if _, err := c.Down(lab); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cleanup: %v", err)
		}
		assertNoNamespaces(t, Prefix+lab+"-")
	})
	return store, c, lab
}

func self(t *testing.T) Process {
	t.Helper()
	p, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// assertNoNamespaces fails if a namespace named with prefix is pinned, or a netdev so
// named exists in the namespace the test runs in.
func assertNoNamespaces(t *testing.T, prefix string) {
	t.Helper()
	names, err := ListNamespaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range names {
		if strings.HasPrefix(ns, prefix) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, Prefix) {
			t.Errorf("netdev %s left in the test's namespace", l.Attrs().Name)
		}
	}
}

// createForeign creates a namespace that no state file records and deletes it when
// the test ends.
func createForeign(t *testing.T, name string) {
	t.Helper()
	if err := CreateNamespace(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := DeleteNamespace(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// hostConfig is host i of a /24 and /64 lab, with MACs 02:00:00:00:00:<i>.
func hostConfig(i int) HostConfig {
	return HostConfig{
		Name: fmt.Sprintf("h%d", i),
		MAC:  mac(i),
		IPv4: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 24),
		IPv6: netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(i)}), 64),
		MTU:  4200,
	}
}

func mac(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }

// neighbours makes every other host of n a static neighbour, over IPv4 and IPv6.
func neighbours(self, n int) []Neighbour {
	var ns []Neighbour
	for j := 1; j <= n; j++ {
		if j != self {
			peer := hostConfig(j)
			ns = append(ns, Neighbour{IP: peer.IPv4.Addr(), MAC: peer.MAC}, Neighbour{IP: peer.IPv6.Addr(), MAC: peer.MAC})
		}
	}
	return ns
}

func addHost(t *testing.T, store Store, lab string, cfg HostConfig) *TAP {
	t.Helper()
	tap, err := AddHost(store, lab, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	return tap
}
