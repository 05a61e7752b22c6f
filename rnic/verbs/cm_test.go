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

// cmPair is two clients of two lab hosts' verbs services, the server's and the
// client's, for RDMA-CM tests.
type cmPair struct {
	t        *testing.T
	ctx      context.Context
	srv, cli *app
}

func newCMPair(t *testing.T) *cmPair {
	l := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return &cmPair{t: t, ctx: ctx, srv: newApp(t, l.addrs[1], qp.RC, 4096, nil), cli: newApp(t, l.addrs[0], qp.RC, 4096, nil)}
}

func (p *cmPair) must(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatal(err)
	}
}

// expect returns ch's next event, which must be of type want.
func (p *cmPair) expect(ch *verbs.CMChannel, want rnic.CMEventType) verbs.CMEvent {
	p.t.Helper()
	e, err := ch.GetEvent(p.ctx)
	p.must(err)
	if e.Type != want {
		p.t.Fatalf("event %v (status %d), want %v", e.Type, e.Status, want)
	}
	return e
}

// resolved returns a new identifier on ch with its address and route to dst resolved.
func (p *cmPair) resolved(ch *verbs.CMChannel, dst string, timeout time.Duration) *verbs.CMID {
	p.t.Helper()
	id, err := ch.CreateID()
	p.must(err)
	p.must(id.ResolveAddr(netip.Addr{}, netip.MustParseAddrPort(dst), timeout))
	p.expect(ch, rnic.CMEventAddrResolved)
	p.must(id.ResolveRoute())
	p.expect(ch, rnic.CMEventRouteResolved)
	return id
}

// clientQP returns a new RC QP of the client's, of one send and one receive WR.
func (p *cmPair) clientQP() *verbs.QP {
	p.t.Helper()
	c := p.cli
	x, err := c.ctx.CreateQP(c.pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: c.cq, RecvCQ: c.cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	p.must(err)
	return x
}

// TestCMThroughService runs rping's RDMA-CM sequence between two clients of two lab
// hosts' verbs services: the server listens, the client resolves, connects with
// private data, the server accepts; a SEND crosses the connection the CM agents
// brought up; the client disconnects, both see DISCONNECTED; a connection to a port
// nobody listens on is REJECTED with reason 8; destroying a channel that still has
// identifiers is refused.
func TestCMThroughService(t *testing.T) {
	p := newCMPair(t)
	srv, cli, ctx, must, expect := p.srv, p.cli, p.ctx, p.must, p.expect
	sch, err := srv.ctx.CreateCMChannel()
	must(err)
	listener, err := sch.CreateID()
	must(err)
	must(listener.Listen(netip.MustParseAddrPort("0.0.0.0:7174"), 1))

	cch, err := cli.ctx.CreateCMChannel()
	must(err)
	id := p.resolved(cch, "10.0.0.2:7174", 2*time.Second)
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

	other := p.resolved(cch, "10.0.0.2:9", time.Second)
	must(other.Connect(p.clientQP(), param))
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
	p := newCMPair(t)
	ctx, must := p.ctx, p.must
	sch, err := p.srv.ctx.CreateCMChannel()
	must(err)
	listener, err := sch.CreateID()
	must(err)
	must(listener.Listen(netip.MustParseAddrPort("0.0.0.0:7174"), 1))
	cch, err := p.cli.ctx.CreateCMChannel()
	must(err)
	param := rnic.CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	// connect starts a connection to the listener from a new identifier.
	connect := func() *verbs.CMID {
		t.Helper()
		id := p.resolved(cch, "10.0.0.2:7174", 2*time.Second)
		must(id.Connect(p.clientQP(), param))
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
