package service

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/cm"
)

// sCMChannel is a client's RDMA-CM event channel: the events of its identifiers,
// oldest first, and the eventfd the service increments for each.
type sCMChannel struct {
	fd     int
	refs   int
	events []cmQueued
}

// cmQueued is an event on a channel, with the listener of a connection request.
type cmQueued struct {
	w        wire.CMEvent
	listener *sCMID
}

// sCMID is a client's communication identifier.
type sCMID struct {
	id *rnic.CMID
	h  uint32
	ch *sCMChannel
	// A listener's backlog (rdma_listen), and its connection requests queued on the
	// channel that the client has not fetched yet.
	backlog, queued int
}

// openPortRange opens the calling thread's network namespace's
// ip_local_port_range: Listen runs in the host's namespace, and a sysctl file opened
// there reads that namespace's value from any thread, as the kernel's rdma_cm reads
// its namespace's range for every ephemeral port (cma_alloc_any_port). nil if
// unreadable: the agent then uses Linux's default range.
func openPortRange() *os.File {
	f, err := os.Open("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return nil
	}
	return f
}

// localPortRange reads the range now (the agent asks at each allocation); 0, 0 if it
// cannot.
func (s *Server) localPortRange() (lo, hi uint16) {
	var b [32]byte
	n, err := s.ports.ReadAt(b[:], 0)
	if n == 0 || err != nil && err != io.EOF {
		return 0, 0
	}
	var l, h uint16
	if _, err := fmt.Sscan(string(b[:n]), &l, &h); err != nil {
		return 0, 0
	}
	return l, h
}

// maxBacklog is the most connection requests a listener may have queued: the
// kernel's net.rdma_ucm.max_backlog, which a backlog of 0 gets too. Past it, as the
// kernel's ucma does, a request is refused (REJ): a client that never fetches its
// events, or a host that floods requests, must not grow the service without bound.
const maxBacklog = 1024

func (c *conn) cmCreateChannel(body []byte, fd int) (any, int, error) {
	return c.addEventFD(body, fd, &sCMChannel{fd: fd})
}

func (c *conn) cmCreateID(body []byte) (any, int, error) {
	var r wire.CMCreateID
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	ch, err := get[*sCMChannel](c, r.Channel, "CM event channel")
	if err != nil {
		return nil, -1, err
	}
	s := &sCMID{ch: ch}
	// The QP type counts in the IB port space only, as the kernel's ucma_get_qp_type
	// has it: TCP's identifiers are RC, UDP's UD.
	t := qp.Type(r.QPType)
	switch cm.PortSpace(r.PortSpace) {
	case cm.PortSpaceTCP:
		t = qp.RC
	case cm.PortSpaceUDP:
		t = qp.UD
	}
	id, err := c.s.dev.CreateCMIDType(cm.PortSpace(r.PortSpace), t, func(e rnic.CMEvent) { c.cmEvent(e) })
	if err != nil {
		return nil, -1, err
	}
	id.Context = s
	s.id = id
	if s.h, err = c.add(s); err != nil {
		c.s.dev.DestroyCMID(id)
		return nil, -1, err
	}
	ch.refs++
	return &wire.Handle{Handle: s.h}, -1, nil
}

// cmEvent queues an event of one of the client's identifiers on its channel. A
// connection request's new identifier joins the client here, on its listener's
// channel.
func (c *conn) cmEvent(e rnic.CMEvent) {
	if c.closed {
		if e.Type == rnic.CMEventConnectRequest { // nobody will answer it
			c.s.dev.DestroyCMID(e.ID)
		}
		return
	}
	w := wire.CMEvent{Type: uint8(e.Type), Status: int32(e.Status)}
	var s, listener *sCMID
	if e.Type == rnic.CMEventConnectRequest {
		l := e.Listener.Context.(*sCMID)
		if l.queued >= l.backlog {
			c.s.dev.DestroyCMID(e.ID) // answers the request with a REJ
			return
		}
		s = &sCMID{id: e.ID, ch: l.ch}
		e.ID.Context = s
		var err error
		if s.h, err = c.add(s); err != nil {
			_ = c.s.dev.Reject(e.ID, nil)
			c.s.dev.DestroyCMID(e.ID)
			return
		}
		l.queued++
		listener = l
		s.ch.refs++
		w.Listener = l.h
	} else {
		s = e.ID.Context.(*sCMID)
	}
	w.ID = s.h
	w.Local, w.Remote = wire.FromAddrPort(e.ID.Local()), wire.FromAddrPort(e.ID.Remote())
	w.Param = toWireParam(&e.Param)
	w.QPN, w.QKey, w.FlowLabel = uint32(e.RemoteQPN), e.QKey, e.ID.FlowLabel()
	s.ch.events = append(s.ch.events, cmQueued{w, listener})
	signal(s.ch.fd)
}

func toWireParam(p *rnic.CMConnParam) wire.CMConnParam {
	w := wire.CMConnParam{ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount}
	w.PrivateDataLen = uint8(copy(w.PrivateData[:], p.PrivateData))
	return w
}

func fromWireParam(w *wire.CMConnParam) (rnic.CMConnParam, error) {
	if int(w.PrivateDataLen) > len(w.PrivateData) {
		return rnic.CMConnParam{}, fmt.Errorf("%w: %d bytes of private data", rnic.ErrInvalidArgument, w.PrivateDataLen)
	}
	return rnic.CMConnParam{PrivateData: w.PrivateData[:w.PrivateDataLen], ResponderResources: w.ResponderResources,
		InitiatorDepth: w.InitiatorDepth, RetryCount: w.RetryCount, RNRRetryCount: w.RNRRetryCount}, nil
}

func (c *conn) cmGetEvent(body []byte) (any, int, error) {
	var h wire.Handle
	if err := wire.DecodeBody(body, &h); err != nil {
		return nil, -1, err
	}
	ch, err := get[*sCMChannel](c, h.Handle, "CM event channel")
	if err != nil {
		return nil, -1, err
	}
	if len(ch.events) == 0 {
		return nil, -1, fmt.Errorf("%w: no CM event pending", rnic.ErrNotFound)
	}
	e := ch.events[0]
	ch.events = ch.events[1:]
	if e.listener != nil {
		e.listener.queued--
	}
	return &e.w, -1, nil
}

// cmID decodes a call's identifier.
func (c *conn) cmID(h uint32) (*sCMID, error) { return get[*sCMID](c, h, "CM identifier") }

// decodeCM decodes the request of a CM call into r and returns the identifier it names.
func (c *conn) decodeCM(body []byte, r wire.CMRequest) (*sCMID, error) {
	if err := wire.DecodeBody(body, r); err != nil {
		return nil, err
	}
	return c.cmID(r.Identifier())
}

func (c *conn) cmListen(body []byte) (any, int, error) {
	var r wire.CMListen
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	if err := c.s.dev.Listen(s.id, r.Addr.AddrPort()); err != nil {
		return nil, -1, err
	}
	s.backlog = int(r.Backlog)
	if s.backlog <= 0 || s.backlog > maxBacklog {
		s.backlog = maxBacklog
	}
	return nil, -1, nil
}

func (c *conn) cmBind(body []byte) (any, int, error) {
	var r wire.CMBind
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	got, err := c.s.dev.Bind(s.id, r.Addr.AddrPort())
	if err != nil {
		return nil, -1, err
	}
	w := wire.FromAddrPort(got)
	return &w, -1, nil
}

// cmMigrateID moves an identifier to another channel of the client with its queued
// events, writing the new channel's eventfd once per event moved. The old channel's
// tokens stay (the loop must never block on a read that a client's thread may race):
// a client that reads one and finds no event reads again, as for an event of an
// identifier destroyed while queued.
func (c *conn) cmMigrateID(body []byte) (any, int, error) {
	var r wire.CMMigrateID
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	to, err := get[*sCMChannel](c, r.Channel, "CM event channel")
	if err != nil || to == s.ch {
		return nil, -1, err
	}
	from := s.ch
	kept := from.events[:0]
	for _, e := range from.events {
		if e.w.ID != s.h {
			kept = append(kept, e)
			continue
		}
		to.events = append(to.events, e)
		signal(to.fd)
	}
	clear(from.events[len(kept):])
	from.events = kept
	from.refs--
	to.refs++
	s.ch = to
	return nil, -1, nil
}

func (c *conn) cmResolveAddr(body []byte) (any, int, error) {
	var r wire.CMResolveAddr
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	return nil, -1, c.s.dev.ResolveAddr(s.id, r.Src.AddrPort().Addr(), r.Dst.AddrPort(), time.Duration(r.TimeoutMS)*time.Millisecond)
}

// cmIDCall is the handler of the calls whose request is a Handle naming an
// identifier: OpCMResolveRoute, OpCMEstablish, OpCMDisconnect.
func cmIDCall(f func(*rnic.Device, *rnic.CMID) error) func(c *conn, body []byte) (any, int, error) {
	return func(c *conn, body []byte) (any, int, error) {
		var h wire.Handle
		if err := wire.DecodeBody(body, &h); err != nil {
			return nil, -1, err
		}
		s, err := c.cmID(h.Handle)
		if err != nil {
			return nil, -1, err
		}
		return nil, -1, f(c.s.dev, s.id)
	}
}

// cmConnecting is the handler of OpCMConnect and OpCMAccept.
func cmConnecting(accept bool) func(c *conn, body []byte) (any, int, error) {
	return func(c *conn, body []byte) (any, int, error) {
		var r wire.CMConnect
		s, err := c.decodeCM(body, &r)
		if err != nil {
			return nil, -1, err
		}
		var x *rnic.QP // none: the client moves QP r.QPN itself
		if r.QP != 0 {
			sq, err := get[*sQP](c, r.QP, "QP")
			if err != nil {
				return nil, -1, err
			}
			x = sq.x
		}
		p, err := fromWireParam(&r.Param)
		if err != nil {
			return nil, -1, err
		}
		p.QPN = roce.QPN(r.QPN)
		if accept {
			return nil, -1, c.s.dev.Accept(s.id, x, p)
		}
		return nil, -1, c.s.dev.Connect(s.id, x, p)
	}
}

func (c *conn) cmReject(body []byte) (any, int, error) {
	var r wire.CMReject
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	if int(r.PrivateDataLen) > len(r.PrivateData) {
		return nil, -1, fmt.Errorf("%w: %d bytes of private data", rnic.ErrInvalidArgument, r.PrivateDataLen)
	}
	return nil, -1, c.s.dev.Reject(s.id, r.PrivateData[:r.PrivateDataLen])
}

func (c *conn) cmInitQPAttr(body []byte) (any, int, error) {
	var r wire.CMInitQPAttr
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	a, mask, err := c.s.dev.InitQPAttr(s.id, qp.State(r.State))
	if err != nil {
		return nil, -1, err
	}
	return &wire.CMQPAttr{Mask: uint32(mask), Attr: wire.FromQPAttr(&a)}, -1, nil
}

func (c *conn) cmSetOption(body []byte) (any, int, error) {
	var r wire.CMSetOption
	s, err := c.decodeCM(body, &r)
	if err != nil {
		return nil, -1, err
	}
	switch {
	case r.Value > 0xFF:
		return nil, -1, fmt.Errorf("%w: option value %d", rnic.ErrInvalidArgument, r.Value)
	case r.Option == wire.CMOptionTOS:
		return nil, -1, c.s.dev.SetTOS(s.id, uint8(r.Value))
	case r.Option == wire.CMOptionReuseAddr:
		return nil, -1, c.s.dev.SetReuseAddr(s.id, r.Value != 0)
	case r.Option == wire.CMOptionACKTimeout:
		return nil, -1, c.s.dev.SetACKTimeout(s.id, uint8(r.Value))
	}
	return nil, -1, fmt.Errorf("%w: rdma_set_option %d", rnic.ErrNotSupported, r.Option)
}
