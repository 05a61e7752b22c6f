package verbs_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
)

// TestCMListenBacklogFlood is the flood at a listener of backlog 3 whose
// server never fetches its events, scaled to 300 requests: as the kernel's ucma, the
// first 3 wait on the listener's channel and every later one is refused with a REJ
// (consumer defined, 28) at once, so the listener's host holds 3 pending connections
// and no more descriptors than before, whatever the number of requests.
func TestCMListenBacklogFlood(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := &cmPair{t: t, ctx: ctx, srv: newApp(t, l.addrs[1], qp.RC, 4096, nil), cli: newApp(t, l.addrs[0], qp.RC, 4096, nil)}
	sch, err := p.srv.ctx.CreateCMChannel()
	p.must(err)
	listener, err := sch.CreateID()
	p.must(err)
	p.must(listener.Listen(netip.MustParseAddrPort("0.0.0.0:7175"), 3))
	objects, fds := l.srvs[1].Stats().Objects, openFDs(t)
	cch, err := p.cli.ctx.CreateCMChannel()
	p.must(err)
	param := rnic.CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	const requests, backlog = 300, 3
	rejected := 0
	for i := range requests {
		id := p.resolved(cch, "10.0.0.2:7175", 2*time.Second)
		x := p.clientQP()
		p.must(id.Connect(x, param))
		if i < backlog {
			continue // queued at the listener: no answer until its server fetches it
		}
		for {
			e, err := cch.GetEvent(ctx)
			p.must(err)
			if e.ID != id {
				continue // a queued request's retries running out: not this one's answer
			}
			if e.Type != rnic.CMEventRejected || e.Status != 28 {
				t.Fatalf("request %d past the backlog: %v (status %d), want REJECTED (28)", i, e.Type, e.Status)
			}
			break
		}
		rejected++
		p.must(id.Destroy())
		p.must(p.cli.ctx.DestroyQP(x))
	}
	if got := l.srvs[1].Stats().Objects - objects; got != backlog {
		t.Errorf("the listener's host holds %d new objects after %d requests, want the %d queued", got, requests, backlog)
	}
	if n := openFDs(t); n > fds+2 {
		t.Errorf("descriptors %d before the flood, %d after", fds, n)
	}
	t.Logf("%d requests: %d queued, %d rejected", requests, backlog, rejected)
}
