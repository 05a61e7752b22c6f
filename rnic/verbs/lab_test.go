package verbs_test

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

// lab is two soft-RNICs behind one switch, in real time, each with a verbs service.
type lab struct {
	r     *clock.Real
	devs  [2]*rnic.Device
	srvs  [2]*service.Server
	addrs [2]string
}

func hostMAC(i int) [6]byte   { return [6]byte{2, 0, 0, 0, 0, byte(i + 1)} }
func hostIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}) }
func testAddr(tb testing.TB, i int) string {
	// Unique per process and test: other test binaries share the namespace.
	return fmt.Sprintf("@rocelab-test/%d/%s/h%d", os.Getpid(), tb.Name(), i)
}

func newLab(tb testing.TB, opts ...service.Option) *lab {
	tb.Helper()
	const mtu = 4096 + 400
	l := &lab{r: clock.NewReal(clock.RealOptions{Seed: 1, GrowProcs: true})}
	pool := link.NewPool(mtu + 18)
	var prio [64]uint8
	sw, err := fabric.New(l.r.NewLoop("s1"), fabric.Config{ID: 1, Buffer: 32 << 20, SharedBuffer: true, Pool: pool, DSCPPriority: &prio})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range l.devs {
		a, b, err := link.New(link.Config{Rate: 100e9, Delay: time.Microsecond, MTU: mtu})
		if err != nil {
			tb.Fatal(err)
		}
		d, err := rnic.Open(rnic.Config{Name: fmt.Sprintf("h%d", i+1), MAC: hostMAC(i), GIDs: []netip.Addr{hostIP(i)},
			Loop: l.r.NewLoop(fmt.Sprintf("h%d", i+1)), Link: a, Pool: pool, CC: rnic.CC{Mode: rnic.ModeNone},
			TxLookahead: 50 * time.Microsecond})
		if err != nil {
			tb.Fatal(err)
		}
		l.devs[i] = d
		sw.AddPort(b, fabric.MAC{0x02, 0xff, 0, 0, 0, byte(i)})
		sw.SetRoute(hostMAC(i), []uint16{uint16(i)})
	}
	l.devs[0].AddNeighbour(hostIP(1), hostMAC(1))
	l.devs[1].AddNeighbour(hostIP(0), hostMAC(0))
	// GrowProcs: one P per loop plus one, as the lab process needs (see clock.RealOptions);
	// the applications' goroutines stand for processes of their own.
	procs := runtime.GOMAXPROCS(0)
	tb.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	if err := l.r.Start(); err != nil {
		tb.Fatal(err)
	}
	for i, d := range l.devs {
		l.addrs[i] = testAddr(tb, i)
		s, err := service.Listen(d, l.addrs[i], opts...)
		if err != nil {
			l.r.Close()
			tb.Fatal(err)
		}
		l.srvs[i] = s
	}
	tb.Cleanup(func() {
		for _, s := range l.srvs {
			s.Close()
		}
		l.r.Close()
	})
	return l
}

// app is one client's objects: a PD, a CQ for everything, an MR and an RC QP.
type app struct {
	ctx *verbs.Context
	pd  *verbs.PD
	cq  *verbs.CQ
	mr  *verbs.MR
	qp  *verbs.QP
	gid roce.GID
}

const access = qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic

func newApp(tb testing.TB, addr string, typ qp.Type, mrSize int, ch *verbs.CompChannel) *app {
	tb.Helper()
	ctx, err := verbs.Open(addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ctx.Close() })
	return newAppOn(tb, ctx, typ, mrSize, ch)
}

func newAppOn(tb testing.TB, ctx *verbs.Context, typ qp.Type, mrSize int, ch *verbs.CompChannel) *app {
	tb.Helper()
	a := &app{ctx: ctx}
	var err error
	must := func(e error) {
		if e != nil {
			tb.Helper()
			tb.Fatal(e)
		}
	}
	a.pd, err = ctx.AllocPD()
	must(err)
	a.cq, err = ctx.CreateCQ(1024, ch)
	must(err)
	a.mr, err = ctx.RegMR(a.pd, mrSize, access)
	must(err)
	a.qp, err = ctx.CreateQP(a.pd, verbs.QPInitAttr{Type: typ, SendCQ: a.cq, RecvCQ: a.cq,
		Cap: rnic.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 2}})
	must(err)
	a.gid, err = ctx.QueryGID(0)
	must(err)
	return a
}

// connect brings a's QP to RTS towards b's.
func connect(tb testing.TB, a, b *app) {
	tb.Helper()
	connectTo(tb, a, b.gid, b.qp.QPN())
}

func gidOf(n int) roce.GID       { return roce.GIDFromAddr(netip.AddrFrom4([4]byte{10, 0, 0, byte(n)})) }
func uint32ToQPN(n int) roce.QPN { return roce.QPN(n) }

// connectTo brings a's QP to RTS towards QP qpn at gid.
func connectTo(tb testing.TB, a *app, gid roce.GID, qpn roce.QPN) {
	tb.Helper()
	c := a.ctx
	at := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: access}
	if err := c.ModifyQP(a.qp, &at, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		tb.Fatal(err)
	}
	at = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: gid}, PathMTU: roce.MTU4096, DestQPN: qpn,
		MaxDestRdAtomic: 16, MinRNRTimer: 12}
	if err := c.ModifyQP(a.qp, &at, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
		qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		tb.Fatal(err)
	}
	at = qp.Attr{State: qp.StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16}
	if err := c.ModifyQP(a.qp, &at, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic); err != nil {
		tb.Fatal(err)
	}
}

// pair returns two connected RC apps, one per host.
func pair(tb testing.TB, l *lab, mrSize int) (*app, *app) {
	a := newApp(tb, l.addrs[0], qp.RC, mrSize, nil)
	b := newApp(tb, l.addrs[1], qp.RC, mrSize, nil)
	connect(tb, a, b)
	connect(tb, b, a)
	return a, b
}

// poll busy-polls cq until it has n completions (failing after a timeout that only a
// broken service reaches) and returns them.
func poll(tb testing.TB, cq *verbs.CQ, n int) []qp.WC {
	tb.Helper()
	wcs := make([]qp.WC, n)
	got := 0
	deadline := time.Now().Add(20 * time.Second)
	for got < n {
		k, err := cq.PollCQ(wcs[got:])
		if err != nil {
			tb.Fatal(err)
		}
		got += k
		if k == 0 {
			if time.Now().After(deadline) {
				tb.Fatalf("%d of %d completions after 20 s", got, n)
			}
			runtime.Gosched()
		}
	}
	return wcs
}

func wantOK(tb testing.TB, wcs []qp.WC) {
	tb.Helper()
	for _, wc := range wcs {
		if wc.Status != qp.WCSuccess {
			tb.Fatalf("completion %+v: %v", wc, wc.Status)
		}
	}
}
