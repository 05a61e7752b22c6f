package service

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

// maxObjects bounds what one client may hold, so that a runaway client exhausts its own
// quota before the lab process's memory.
const maxObjects = 1 << 16

// conn is one client. The socket and the doorbell belong to the connection's
// goroutines; everything else (objects, rings) is touched only on the device's loop.
type conn struct {
	s    *Server
	sock *net.UnixConn
	pid  int32  // SO_PEERCRED at accept
	uid  uint32 // likewise

	// Doorbell page (wire.Pending, wire.Awake), polled by the server's watcher.
	page []byte

	// Loop-owned.
	objs   map[uint32]any
	next   uint32
	qps    []*sQP
	srqs   []*sSRQ
	byQPN  map[roce.QPN]*sQP
	closed bool
	async  *sAsync // the client's asynchronous events, once it passed their eventfd

	// Budget (docs/verbs-service.md): used is the client's charge (under the budget's
	// lock), costs each object's share of it; pending is what the running call
	// reserved before allocating, which add gives the object it creates.
	used    Usage
	costs   map[uint32]Usage
	pending Usage
}

func (c *conn) serve() {
	defer c.s.wg.Done()
	defer func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		if c.s.byUID[c.uid]--; c.s.byUID[c.uid] == 0 {
			delete(c.s.byUID, c.uid)
		}
		c.s.mu.Unlock()
		c.sock.Close()
		c.s.budget.release(c.s.host, &c.used, c.used) // the connection's own, and anything left
	}()
	buf := make([]byte, wire.MaxMessage)
	oob := make([]byte, wire.OOBSpace)
	resp := make([]byte, 0, wire.MaxMessage)

	// The peer was admitted at accept (SO_PEERCRED, limits); it must say HELLO in time.
	c.sock.SetReadDeadline(time.Now().Add(c.s.handshake))
	msg, fds, err := wire.Recv(c.sock, buf, oob)
	wire.CloseFDs(fds)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.s.timedOut.Add(1)
		}
		return
	}
	c.sock.SetReadDeadline(time.Time{})
	if err := c.hello(msg, resp); err != nil {
		c.s.logf("verbs service %s: pid %d: %v", c.s.addr, c.pid, err)
		return
	}
	c.s.clients.Add(1)
	defer func() {
		var n int
		c.s.onLoop(func() { n = c.reclaim() })
		unix.Munmap(c.page) // the loop no longer polls it
		// Before the hook: whoever hears of the reclaim sees the client gone too.
		c.s.clients.Add(-1)

		if n > 0 {
			c.s.logf("verbs service %s: pid %d went away: reclaimed %d objects", c.s.addr, c.pid, n)
		}
		if c.s.onReclaim != nil {
			c.s.onReclaim(c.pid, n)
		}
	}()

	for {
		msg, fds, err := wire.Recv(c.sock, buf, oob)
		if err != nil {
			if errors.Is(err, wire.ErrProtocol) {
				c.s.logf("verbs service %s: pid %d: %v", c.s.addr, c.pid, err)
				if wire.Send(c.sock, wire.AppendError(resp, 0, err)) == nil {
					continue
				}
			}
			return
		}
		var out []byte
		var outFDs []int
		h, body, err := wire.ParseHeader(msg)
		if err != nil {
			wire.CloseFDs(fds)
			out = wire.AppendError(resp, h.Op, err)
		} else {
			c.s.onLoop(func() { out, outFDs = c.call(h.Op, body, fds, resp) })
		}
		err = wire.Send(c.sock, out, outFDs...)
		wire.CloseFDs(outFDs) // the service keeps its mappings, not the descriptors
		if err != nil {
			return
		}
	}
}

// hello answers the client's Hello with the service's doorbell eventfd and the
// connection's doorbell page, which the device's loop polls from then on.
func (c *conn) hello(msg, resp []byte) error {
	h, body, err := wire.ParseHeader(msg)
	var req wire.Hello
	if err == nil && h.Op != wire.OpHello {
		err = fmt.Errorf("%w: first message is %v, not HELLO", wire.ErrProtocol, h.Op)
	}
	if err == nil {
		err = wire.DecodeBody(body, &req)
	}
	if err == nil && (req.MinVersion > wire.Version || req.MaxVersion < wire.Version) {
		err = fmt.Errorf("%w: client speaks versions %d..%d, the service %d", wire.ErrProtocol, req.MinVersion, req.MaxVersion, wire.Version)
	}
	if err != nil {
		wire.Send(c.sock, wire.AppendError(resp, wire.OpHello, err))
		return err
	}
	pfd, page, err := wire.SealedMemfd("rocelab-verbs-doorbell", wire.PageSize)
	if err != nil {
		err = fmt.Errorf("%w: doorbell page: %v", rnic.ErrNoMemory, err)
		wire.Send(c.sock, wire.AppendError(resp, wire.OpHello, err))
		return err
	}
	c.page = page
	c.byQPN = map[roce.QPN]*sQP{}
	c.s.onLoop(func() { c.s.active = append(c.s.active, c) })
	err = wire.Send(c.sock, wire.AppendResponse(resp, wire.OpHello,
		&wire.HelloResp{Version: wire.Version, PageSize: wire.PageSize, PID: uint32(os.Getpid())}), c.s.bellFD, pfd)
	unix.Close(pfd)
	if err != nil {
		c.s.onLoop(func() { c.reclaim() })
		unix.Munmap(page)
	}
	return err
}

// scan drains every work ring of the connection, on the loop. Pending is cleared first:
// a post that lands after the clear sets it again (see wire.Pending).
func (c *conn) scan() {
	if c.closed {
		return
	}
	wire.Store(wire.Pending(c.page), 0)
	for _, x := range c.qps {
		if x.typ == qp.XRCRecv {
			continue // no work queues: its receives are the XRC SRQs'
		}
		x.drainSQ()
		if x.srq == nil {
			x.drainRQ()
		}
	}
	for _, s := range c.srqs {
		s.drain()
	}
}

// reserve charges u to the client before the running call allocates it: the object
// the call adds carries it, and a call that fails releases it (see call).
func (c *conn) reserve(u Usage) error {
	if err := c.s.budget.charge(c.s.host, &c.used, c.pid, u); err != nil {
		return err
	}
	c.pending = c.pending.plus(u)
	return nil
}

// settle ends a call's reservation: an object took it, the connection keeps it (ok:
// an asynchronous event fd), or the failed call returns it.
func (c *conn) settle(ok bool) {
	if !ok {
		c.s.budget.release(c.s.host, &c.used, c.pending)
	}
	c.pending = Usage{}
}

// add registers an object under a fresh handle; it carries the running call's
// reservation, or the cost of a small object.
func (c *conn) add(o any) (uint32, error) {
	if len(c.objs) >= maxObjects {
		return 0, fmt.Errorf("%w: the client holds %d objects", rnic.ErrNoMemory, len(c.objs))
	}
	cost := c.pending
	if cost == (Usage{}) {
		cost = Usage{Memory: objectMemory}
		if err := c.s.budget.charge(c.s.host, &c.used, c.pid, cost); err != nil {
			return 0, err
		}
	}
	c.pending = Usage{}
	for {
		c.next++
		if c.next != 0 && c.objs[c.next] == nil {
			break
		}
	}
	c.objs[c.next] = o
	c.costs[c.next] = cost
	c.s.objects.Add(1)
	return c.next, nil
}

// checkEventfd says whether fd, which a client passed as the eventfd the service
// signals (completion channel, CM channel, asynchronous events), is one: any other
// descriptor (a pipe, a socket, a file) could block the device's loop on a write or
// make the lab write where the client could not.
func checkEventfd(fd int) error {
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return fmt.Errorf("%w: passed descriptor: %v", rnic.ErrInvalidArgument, err)
	}
	if target != "anon_inode:[eventfd]" {
		return fmt.Errorf("%w: passed descriptor is %s, not an eventfd", rnic.ErrInvalidArgument, target)
	}
	return nil
}

// signal adds one to a client's eventfd without blocking the device's loop: a blocking
// eventfd whose counter a client drove to its maximum would block the write, so the
// write happens only when poll says it will not block (else the event is lost, to that
// client alone, which asked for it). A client that races its own write in between can
// still block it (docs/verbs-service.md, Not done yet).
func signal(fd int) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	if n, err := unix.Poll(pfd, 0); err != nil || n != 1 || pfd[0].Revents&unix.POLLOUT == 0 {
		return
	}
	unix.Write(fd, one[:])
}

func (c *conn) remove(h uint32) {
	delete(c.objs, h)
	c.s.budget.release(c.s.host, &c.used, c.costs[h])
	delete(c.costs, h)
	c.s.objects.Add(-1)
}

// get returns handle h's object if it is a T.
func get[T any](c *conn, h uint32, kind string) (T, error) {
	o, ok := c.objs[h].(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: no %s with handle %d", rnic.ErrNotFound, kind, h)
	}
	return o, nil
}

// reclaim destroys everything the client holds, in dependency order, on the loop, and
// returns how many objects there were.
func (c *conn) reclaim() int {
	n := len(c.objs)
	c.closed = true
	c.s.deactivate(c)
	if c.async != nil {
		unix.Close(c.async.fd)
		c.async = nil
	}
	for _, kind := range []int{kindCMID, kindQP, kindSRQ, kindXRCD, kindAH, kindCQ, kindMW, kindMR, kindPD, kindChannel, kindCMChannel} {
		for h, o := range c.objs {
			if kindOf(o) == kind {
				if err := c.destroy(o); err != nil {
					c.s.logf("verbs service %s: pid %d: reclaim: %v", c.s.addr, c.pid, err)
				}
				c.remove(h)
			}
		}
	}
	return n
}

const (
	kindPD = iota
	kindMR
	kindChannel
	kindCQ
	kindSRQ
	kindAH
	kindQP
	kindCMChannel
	kindCMID
	kindMW
	kindXRCD
)

func kindOf(o any) int {
	switch o.(type) {
	case *sPD:
		return kindPD
	case *sMR:
		return kindMR
	case *sMW:
		return kindMW
	case *sChannel:
		return kindChannel
	case *sCQ:
		return kindCQ
	case *sSRQ:
		return kindSRQ
	case *sAH:
		return kindAH
	case *sCMChannel:
		return kindCMChannel
	case *sCMID:
		return kindCMID
	case *sXRCD:
		return kindXRCD
	default:
		return kindQP
	}
}

// destroy releases one object on the device (the handle is the caller's to drop).
func (c *conn) destroy(o any) error {
	d := c.s.dev
	switch o := o.(type) {
	case *sPD:
		return d.DeallocPD(o.pd)
	case *sMR:
		return d.DeregMR(o.mr)
	case *sMW:
		return d.DeallocMW(o.mw)
	case *sChannel:
		if o.refs > 0 {
			return fmt.Errorf("%w: completion channel still bound to %d CQs", rnic.ErrBusy, o.refs)
		}
		unix.Close(o.fd)
		o.fd = -1
	case *sCQ:
		if err := d.DestroyCQ(o.cq); err != nil {
			return err
		}
		o.dead = true
		if o.ch != nil {
			o.ch.refs--
		}
		unix.Munmap(o.mem)
	case *sSRQ:
		if err := d.DestroySRQ(o.srq); err != nil {
			return err
		}
		for i, s := range c.srqs {
			if s == o {
				c.srqs = append(c.srqs[:i], c.srqs[i+1:]...)
				break
			}
		}
		unix.Munmap(o.mem)
	case *sAH:
		return d.DestroyAH(o.ah)
	case *sCMChannel:
		if o.refs > 0 {
			return fmt.Errorf("%w: CM event channel still holds %d identifiers", rnic.ErrBusy, o.refs)
		}
		unix.Close(o.fd)
		o.fd = -1
	case *sCMID:
		if err := d.DestroyCMID(o.id); err != nil {
			return err
		}
		o.ch.refs--
	case *sXRCD:
		return d.CloseXRCD(o.x)
	case *sQP:
		if err := c.destroyQP(o); err != nil {
			return err
		}
		if o.opened != nil {
			return nil // a handle of another client's QP: no rings
		}
		delete(c.byQPN, o.x.QPN())
		for i, x := range c.qps {
			if x == o {
				c.qps = append(c.qps[:i], c.qps[i+1:]...)
				break
			}
		}
		unix.Munmap(o.mem)
	}
	return nil
}
