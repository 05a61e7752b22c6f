package service

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// sAsync is a client's asynchronous events (ibv_get_async_event): the events of its
// CQs, SRQs and QPs, oldest first, and the eventfd the service increments for each.
// The client's eventfd is a semaphore, so poll and epoll see it readable exactly
// while an event is pending, as the kernel's async fd.
type sAsync struct {
	fd     int
	events []wire.AsyncEvent
}

// asyncFD takes the client's eventfd for asynchronous events (once per connection;
// libibverbs.so.1 passes it when it opens the device).
func (c *conn) asyncFD(body []byte, fd int) (any, int, error) {
	if err := wire.DecodeBody(body, &struct{}{}); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	if c.async != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("%w: the connection already has its asynchronous event fd", rnic.ErrBusy)
	}
	if err := c.reserve(Usage{FDs: 1}); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	c.async = &sAsync{fd: fd}
	return nil, -1, nil
}

func (c *conn) getAsyncEvent(body []byte) (any, int, error) {
	if err := wire.DecodeBody(body, &struct{}{}); err != nil {
		return nil, -1, err
	}
	if c.async == nil || len(c.async.events) == 0 {
		return nil, -1, fmt.Errorf("%w: no asynchronous event pending", rnic.ErrNotFound)
	}
	e := c.async.events[0]
	c.async.events = c.async.events[1:]
	return &e, -1, nil
}

// asyncEvent is the device's asynchronous event handler (on the loop): the event
// goes to the client that owns the object, named by its handle there. Events of
// the device's own objects (the CM agent's) and of clients that passed no eventfd
// are dropped.
func (s *Server) asyncEvent(e rnic.AsyncEvent) {
	var c *conn
	var h uint32
	switch {
	case e.QP != nil:
		if x, ok := e.QP.Context.(*sQP); ok {
			c, h = x.c, x.h
		}
	case e.CQ != nil:
		if q, ok := e.CQ.Context.(*sCQ); ok {
			c, h = q.c, q.h
		}
	case e.SRQ != nil:
		if q, ok := e.SRQ.Context.(*sSRQ); ok {
			c, h = q.c, q.h
		}
	}
	if c == nil || c.closed || c.async == nil {
		return
	}
	c.async.events = append(c.async.events, wire.AsyncEvent{Type: uint32(e.Type), Handle: h})
	signal(c.async.fd)
}
