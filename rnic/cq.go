package rnic

import (
	"context"

	"github.com/rocelab/rocelab/qp"
)

// CQ is a completion queue (ibv_cq): a ring of completions that QPs push and the
// application polls. A CQ that overflows loses the completion, moves to an error state
// and raises EventCQErr, as a hardware CQ does.
type CQ struct {
	dev     *Device
	ring    []qp.WC
	head, n int
	channel *CompChannel
	armed   bool // ReqNotifyCQ was called: the next completion raises an event
	overrun bool
	refs    int // QPs bound to the CQ
	// Context is the application's cq_context, returned with events.
	Context any
}

var _ qp.CompletionQueue = (*CQ)(nil)

// CompChannel is a completion channel (ibv_comp_channel). An armed CQ bound to it
// announces its next completion here once. Under the Virtual clock, or when the
// consumer lives on the device's loop, set Handler: it runs on the loop, after the
// event that completed the work (never inside a QP's processing), so it may poll and
// post at once. Otherwise read events with GetCQEvent from any goroutine.
type CompChannel struct {
	// Handler, if set, receives events on the device's loop instead of the channel.
	Handler func(cq *CQ)
	events  chan *CQ
}

// CreateCompChannel creates a completion channel (ibv_create_comp_channel) that buffers
// up to depth undelivered events.
func (d *Device) CreateCompChannel(depth int) *CompChannel {
	return &CompChannel{events: make(chan *CQ, max(depth, 1))}
}

// GetCQEvent waits for the next CQ event (ibv_get_cq_event). Safe from any goroutine.
func (c *CompChannel) GetCQEvent(ctx context.Context) (*CQ, error) {
	select {
	case cq := <-c.events:
		return cq, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *CompChannel) notify(cq *CQ) {
	if c.Handler != nil {
		c.Handler(cq)
		return
	}
	select {
	case c.events <- cq:
	default: // the consumer is behind; it still finds the completions when it polls
	}
}

// CreateCQ creates a completion queue with room for cqe completions (ibv_create_cq).
// channel may be nil.
func (d *Device) CreateCQ(cqe int, channel *CompChannel) (*CQ, error) {
	if d.closed {
		return nil, errorf(ErrClosed, "create CQ")
	}
	if cqe < 1 || cqe > MaxCQE {
		return nil, errorf(ErrInvalidArgument, "CQ of %d entries: must be in [1, %d]", cqe, MaxCQE)
	}
	return &CQ{dev: d, ring: make([]qp.WC, cqe), channel: channel}, nil
}

// DestroyCQ destroys a completion queue (ibv_destroy_cq); it fails with ErrBusy while
// QPs use it.
func (d *Device) DestroyCQ(cq *CQ) error {
	if cq.refs != 0 {
		return errorf(ErrBusy, "CQ still bound to %d QPs", cq.refs)
	}
	cq.ring = nil
	return nil
}

// Push implements qp.CompletionQueue.
func (cq *CQ) Push(wc qp.WC) {
	if cq.overrun || cq.ring == nil {
		return
	}
	if cq.n == len(cq.ring) {
		cq.overrun = true
		cq.dev.raise(AsyncEvent{Type: EventCQErr, CQ: cq})
		return
	}
	cq.ring[(cq.head+cq.n)%len(cq.ring)] = wc
	cq.n++
	if cq.armed && cq.channel != nil {
		cq.armed = false
		cq.dev.pendingCQs = append(cq.dev.pendingCQs, cq)
	}
}

// PollCQ moves up to len(wcs) completions into wcs and returns how many (ibv_poll_cq).
// An overrun CQ fails every poll with an error wrapping ErrNoMemory.
func (cq *CQ) PollCQ(wcs []qp.WC) (int, error) {
	if cq.overrun {
		return 0, errorf(ErrNoMemory, "CQ overrun: %d entries were not enough", len(cq.ring))
	}
	k := min(len(wcs), cq.n)
	for i := range k {
		wcs[i] = cq.ring[cq.head]
		cq.head = (cq.head + 1) % len(cq.ring)
	}
	cq.n -= k
	return k, nil
}

// ReqNotifyCQ arms the CQ: its next completion raises one event on its channel
// (ibv_req_notify_cq). Completions do not carry the solicited bit (package qp does not
// report it), so solicitedOnly arms for any completion, which is what a consumer that
// polls after every event needs anyway. If completions are already queued the event is
// raised at once, so a consumer that polls, arms and waits never misses one.
func (cq *CQ) ReqNotifyCQ(solicitedOnly bool) error {
	if cq.channel == nil {
		return errorf(ErrInvalidArgument, "CQ has no completion channel")
	}
	_ = solicitedOnly
	cq.armed = true
	if cq.n > 0 {
		cq.armed = false
		cq.dev.pendingCQs = append(cq.dev.pendingCQs, cq)
		cq.dev.notify()
	}
	return nil
}

// Len returns the number of completions waiting to be polled.
func (cq *CQ) Len() int { return cq.n }

// ResizeCQ changes the CQ's capacity to cqe entries (ibv_resize_cq), keeping the
// completions it holds; fewer entries than it holds fail with ErrInvalidArgument, as
// rxe's "cqe < current # elements in queue".
func (cq *CQ) ResizeCQ(cqe int) error {
	if cqe < 1 || cqe > MaxCQE {
		return errorf(ErrInvalidArgument, "CQ of %d entries: must be in [1, %d]", cqe, MaxCQE)
	}
	if cqe < cq.n {
		return errorf(ErrInvalidArgument, "CQ of %d entries holds %d completions", cqe, cq.n)
	}
	ring := make([]qp.WC, cqe)
	for i := range cq.n {
		ring[i] = cq.ring[(cq.head+i)%len(cq.ring)]
	}
	cq.ring, cq.head = ring, 0
	return nil
}
