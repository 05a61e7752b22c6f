// Package apptest runs the sample apps' tests against two in-process soft-RNICs: two
// devices behind one switch on the real-time clock, each with a verbs service on an
// abstract Unix socket of its own, as a lab's hosts have.
package apptest

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
)

// Lab is two soft-RNICs h1 (10.0.0.1, fd00::1) and h2 (10.0.0.2, fd00::2) with verbs
// services at Addrs.
type Lab struct {
	Devs  [2]*rnic.Device
	Addrs [2]string
}

// LinkMTU is the links' MTU: a lab's default, which gives a path MTU of 1024.
const LinkMTU = 1500

// New starts a lab for one test and stops it when the test ends.
func New(tb testing.TB) *Lab {
	tb.Helper()
	r := clock.NewReal(clock.RealOptions{Seed: 1})
	pool := link.NewPool(LinkMTU + 18)
	var prio [64]uint8
	sw, err := fabric.New(r.NewLoop("s1"), fabric.Config{ID: 1, Buffer: 32 << 20, SharedBuffer: true, Pool: pool, DSCPPriority: &prio})
	if err != nil {
		tb.Fatal(err)
	}
	l := &Lab{}
	mac := func(i int) [6]byte { return [6]byte{2, 0, 0, 0, 0, byte(i + 1)} }
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}) }
	v6 := func(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd00::%d", i+1)) }
	for i := range l.Devs {
		a, b, err := link.New(link.Config{Rate: 100e9, Delay: time.Microsecond, MTU: LinkMTU})
		if err != nil {
			tb.Fatal(err)
		}
		d, err := rnic.Open(rnic.Config{Name: fmt.Sprintf("h%d", i+1), MAC: mac(i), GIDs: []netip.Addr{v4(i), v6(i)},
			Loop: r.NewLoop(fmt.Sprintf("h%d", i+1)), Link: a, Pool: pool, CC: rnic.CC{Mode: rnic.ModeNone},
			TxLookahead: 50 * time.Microsecond, MaxUnackedPSNs: qp.RXEMaxUnackedPSNs, // as the lab runtime
			// The apps' tests check the apps, not retry semantics: a test machine stalled
			// past the ~0.5 s that retry_cnt 7 allows (seen at load average 20 on 2 cores,
			// in the -a sweeps) retries as rxe does instead of failing the run.
			RXERetryCnt: true})
		if err != nil {
			tb.Fatal(err)
		}
		l.Devs[i] = d
		sw.AddPort(b, fabric.MAC{0x02, 0xff, 0, 0, 0, byte(i)})
		sw.SetRoute(mac(i), []uint16{uint16(i)})
	}
	l.Devs[0].AddNeighbour(v4(1), mac(1))
	l.Devs[1].AddNeighbour(v4(0), mac(0))
	l.Devs[0].AddNeighbour(v6(1), mac(1))
	l.Devs[1].AddNeighbour(v6(0), mac(0))
	if err := r.Start(); err != nil {
		tb.Fatal(err)
	}
	var srvs []*service.Server
	for i, d := range l.Devs {
		// Unique per process and test: other test binaries share the namespace.
		l.Addrs[i] = fmt.Sprintf("@rocelab-apptest/%d/%s/h%d", os.Getpid(), strings.ReplaceAll(tb.Name(), "/", "_"), i+1)
		s, err := service.Listen(d, l.Addrs[i])
		if err != nil {
			r.Close()
			tb.Fatal(err)
		}
		srvs = append(srvs, s)
	}
	tb.Cleanup(func() {
		for _, s := range srvs {
			s.Close()
		}
		r.Close()
	})
	return l
}
