package verbs_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/verbs"
)

// TestCMThroughService runs rping's RDMA-CM sequence between two clients of two lab
// hosts' verbs services: the server listens, the client resolves, connects with
// private data, the server accepts; a SEND crosses the connection the CM agents
// brought up; the client disconnects, both see DISCONNECTED; a connection to a port
// nobody listens on is REJECTED with reason 8; destroying a channel that still has
// identifiers is refused.
func TestCMThroughService(t *testing.T) {
	l := newLab(t)
	srv, cli := newApp(t, l.addrs[1], qp.RC, 4096, nil), newApp(t, l.addrs[0], qp.RC, 4096, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect := func(ch *verbs.CMChannel, want rnic.CMEventType) verbs.CMEvent {
		t.Helper()
		e, err := ch.GetEvent(ctx)
		must(err)
		if e.Type != want {
			t.Fatalf("event %v (status %d), want %v", e.Type, e.Status, want)
		}
		return e
	}
	sch, err := srv.ctx.CreateCMChannel()
	must(err)
	listener, err := sch.CreateID()
	must(err)
	must(listener.Listen(netip.MustParseAddrPort("0.0.0.0:7174"), 1))

	cch, err := cli.ctx.CreateCMChannel()
	must(err)
	id, err := cch.CreateID()
	must(err)
	must(id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), 2*time.Second))
	expect(cch, rnic.CMEventAddrResolved)
	must(id.ResolveRoute())
	expect(cch, rnic.CMEventRouteResolved)
	param := rnic.CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	offer := param
	offer.PrivateData = []byte("rping")
	must(id.Connect(cli.qp, offer))

	req := expect(sch, rnic.CMEventConnectRequest)
	if req.Listener != listener || string(req.Param.PrivateData[:5]) != "rping" || req.Remote.Addr() != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("connect request %+v", req)
	}
	// As librdmacm's rdma_create_qp does, the application's QP is in INIT before it
	// posts receives; the agent takes it from there.
	must(srv.ctx.ModifyQP(srv.qp, &qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: access},
		qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags))
	must(srv.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: []qp.SGE{{Addr: srv.mr.Addr(), Length: 64, LKey: srv.mr.LKey()}}}))
	must(req.ID.Accept(srv.qp, param))
	expect(cch, rnic.CMEventEstablished)
	expect(sch, rnic.CMEventEstablished)

	copy(cli.mr.Bytes(), "rdma-ping-0")
	must(cli.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: cli.mr.Addr(), Length: 11, LKey: cli.mr.LKey()}}}))
	wcs := make([]qp.WC, 1)
	for n := 0; n == 0; {
		n, err = srv.cq.PollCQ(wcs)
		must(err)
		if ctx.Err() != nil {
			t.Fatal("no receive completion")
		}
	}
	if wcs[0].Status != qp.WCSuccess || string(srv.mr.Bytes()[:11]) != "rdma-ping-0" {
		t.Fatalf("receive %+v: %q", wcs[0], srv.mr.Bytes()[:11])
	}

	must(id.Disconnect())
	expect(sch, rnic.CMEventDisconnected)
	must(req.ID.Disconnect())
	expect(cch, rnic.CMEventDisconnected)

	other, err := cch.CreateID()
	must(err)
	must(other.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:9"), time.Second))
	expect(cch, rnic.CMEventAddrResolved)
	must(other.ResolveRoute())
	expect(cch, rnic.CMEventRouteResolved)
	x, err := cli.ctx.CreateQP(cli.pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: cli.cq, RecvCQ: cli.cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	must(err)
	must(other.Connect(x, param))
	if e := expect(cch, rnic.CMEventRejected); e.Status != 8 {
		t.Errorf("rejected with status %d, want 8 (invalid service ID)", e.Status)
	}

	if err := cch.Destroy(); err == nil {
		t.Error("destroying a channel with identifiers: no error")
	}
	for _, i := range []*verbs.CMID{id, other} {
		must(i.Destroy())
	}
	must(cch.Destroy())
}

// TestCMListenBacklog: a listener's connection requests queue up to its backlog
// (rdma_listen's); past it, while the server fetches none, a request is refused with
// a REJ (consumer defined, as the kernel's ucma refuses it), and once the server
// fetches one, the next queues again.
func TestCMListenBacklog(t *testing.T) {
	l := newLab(t)
	srv, cli := newApp(t, l.addrs[1], qp.RC, 4096, nil), newApp(t, l.addrs[0], qp.RC, 4096, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	sch, err := srv.ctx.CreateCMChannel()
	must(err)
	listener, err := sch.CreateID()
	must(err)
	must(listener.Listen(netip.MustParseAddrPort("0.0.0.0:7174"), 1))
	cch, err := cli.ctx.CreateCMChannel()
	must(err)
	param := rnic.CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	// connect starts a connection to the listener from a new identifier.
	connect := func() *verbs.CMID {
		t.Helper()
		id, err := cch.CreateID()
		must(err)
		must(id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), 2*time.Second))
		for _, want := range []rnic.CMEventType{rnic.CMEventAddrResolved, rnic.CMEventRouteResolved} {
			e, err := cch.GetEvent(ctx)
			must(err)
			if e.Type != want {
				t.Fatalf("event %v, want %v", e.Type, want)
			}
			if want == rnic.CMEventAddrResolved {
				must(id.ResolveRoute())
			}
		}
		x, err := cli.ctx.CreateQP(cli.pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: cli.cq, RecvCQ: cli.cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		must(err)
		must(id.Connect(x, param))
		return id
	}
	connect() // queued: the backlog's one
	second := connect()
	e, err := cch.GetEvent(ctx)
	must(err)
	if e.Type != rnic.CMEventRejected || e.ID != second || e.Status != 28 {
		t.Fatalf("past the backlog: event %v (status %d) for %p, want REJECTED (28) for the second request %p", e.Type, e.Status, e.ID, second)
	}
	if req, err := sch.GetEvent(ctx); err != nil || req.Type != rnic.CMEventConnectRequest {
		t.Fatalf("the queued request: %v, %v", req.Type, err)
	}
	connect() // room again
	if req, err := sch.GetEvent(ctx); err != nil || req.Type != rnic.CMEventConnectRequest {
		t.Fatalf("after a fetch, the next request: %v, %v", req.Type, err)
	}
}
