package verbs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"

	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce/cm"
)

// CMChannel is an RDMA-CM event channel (rdma_event_channel): the events of its
// identifiers, which the service announces on an eventfd (FD) the way it announces
// completions on a completion channel.
type CMChannel struct {
	c   *Context
	h   uint32
	fd  int
	f   *os.File
	mu  sync.Mutex
	ids map[uint32]*CMID
}

// CMID is a communication identifier (rdma_cm_id) in the TCP port space: it
// connects one RC QP.
type CMID struct {
	ch *CMChannel
	h  uint32
	// Context is the application's context.
	Context any
}

// CMEvent is one rdma_cm_event.
type CMEvent struct {
	Type ibv.CMEventType
	// Status: 0, a negative errno, or a REJ's reason.
	Status int
	// ID is the identifier the event is about; for ConnectRequest a new one.
	ID *CMID
	// Listener is the listening identifier of a ConnectRequest.
	Listener      *CMID
	Local, Remote netip.AddrPort
	// Param is the peer's offer: its private data, resources and retry counts.
	Param ibv.CMConnParam
}

// CreateCMChannel creates an event channel (rdma_create_event_channel).
func (c *Context) CreateCMChannel() (*CMChannel, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("verbs: eventfd: %w", err)
	}
	var r wire.Handle
	if err := c.callNoFD(wire.OpCMCreateChannel, nil, &r, fd); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &CMChannel{c: c, h: r.Handle, fd: fd, f: os.NewFile(uintptr(fd), "verbs-cm-channel"), ids: map[uint32]*CMID{}}, nil
}

// FD is the eventfd that becomes readable when events are pending (the channel's fd,
// for poll and epoll).
func (ch *CMChannel) FD() int { return ch.fd }

// Destroy destroys the channel (rdma_destroy_event_channel); ErrBusy while
// identifiers use it.
func (ch *CMChannel) Destroy() error {
	if err := ch.c.callNoFD(wire.OpCMDestroyChannel, &wire.Handle{Handle: ch.h}, nil); err != nil {
		return err
	}
	return ch.f.Close()
}

// CreateID creates an identifier whose events go to ch (rdma_create_id, RDMA_PS_TCP).
func (ch *CMChannel) CreateID() (*CMID, error) {
	var r wire.Handle
	if err := ch.c.callNoFD(wire.OpCMCreateID, &wire.CMCreateID{Channel: ch.h, PortSpace: uint16(cm.PortSpaceTCP)}, &r); err != nil {
		return nil, err
	}
	return ch.register(r.Handle), nil
}

func (ch *CMChannel) register(h uint32) *CMID {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	id := &CMID{ch: ch, h: h}
	ch.ids[h] = id
	return id
}

func (ch *CMChannel) lookup(h uint32) *CMID {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.ids[h]
}

// GetEvent returns the channel's next event, waiting for one until ctx ends
// (rdma_get_cm_event).
func (ch *CMChannel) GetEvent(ctx context.Context) (CMEvent, error) {
	var b [8]byte
	for {
		var w wire.CMEvent
		err := ch.c.callNoFD(wire.OpCMGetEvent, &wire.Handle{Handle: ch.h}, &w)
		if err == nil {
			return ch.event(&w), nil
		}
		if !errors.Is(err, ibv.ErrNotFound) {
			return CMEvent{}, err
		}
		if err := ctx.Err(); err != nil {
			return CMEvent{}, err
		}
		dl, _ := ctx.Deadline()
		ch.f.SetReadDeadline(dl)
		stop := context.AfterFunc(ctx, func() { ch.f.SetReadDeadline(time.Unix(1, 0)) })
		_, err = ch.f.Read(b[:])
		stop()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return CMEvent{}, fmt.Errorf("verbs: CM event channel: %w", err)
		}
	}
}

func (ch *CMChannel) event(w *wire.CMEvent) CMEvent {
	e := CMEvent{Type: ibv.CMEventType(w.Type), Status: int(w.Status), Local: w.Local.AddrPort(), Remote: w.Remote.AddrPort()}
	e.Param = ibv.CMConnParam{ResponderResources: w.Param.ResponderResources, InitiatorDepth: w.Param.InitiatorDepth,
		RetryCount: w.Param.RetryCount, RNRRetryCount: w.Param.RNRRetryCount}
	if n := min(int(w.Param.PrivateDataLen), len(w.Param.PrivateData)); n > 0 {
		e.Param.PrivateData = append([]byte(nil), w.Param.PrivateData[:n]...)
	}
	if e.Type == ibv.CMEventConnectRequest {
		e.ID = ch.register(w.ID)
		e.Listener = ch.lookup(w.Listener)
	} else {
		e.ID = ch.lookup(w.ID)
	}
	return e
}

func (id *CMID) call(op wire.Op, req any) error { return id.ch.c.callNoFD(op, req, nil) }

// Listen binds the identifier to addr and listens (rdma_bind_addr + rdma_listen).
func (id *CMID) Listen(addr netip.AddrPort, backlog int) error {
	return id.call(wire.OpCMListen, &wire.CMListen{ID: id.h, Backlog: uint32(max(backlog, 0)), Addr: wire.FromAddrPort(addr)})
}

// ResolveAddr resolves dst's neighbour from src (invalid: the device's address of
// dst's family) within timeout (rdma_resolve_addr); the outcome is an event.
func (id *CMID) ResolveAddr(src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	return id.call(wire.OpCMResolveAddr, &wire.CMResolveAddr{ID: id.h, TimeoutMS: uint32(timeout / time.Millisecond),
		Src: wire.FromAddrPort(netip.AddrPortFrom(src, 0)), Dst: wire.FromAddrPort(dst)})
}

// ResolveRoute resolves the route (rdma_resolve_route); the outcome is an event.
func (id *CMID) ResolveRoute() error {
	return id.call(wire.OpCMResolveRoute, &wire.Handle{Handle: id.h})
}

func connParam(p *ibv.CMConnParam) (wire.CMConnParam, error) {
	w := wire.CMConnParam{ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount}
	if len(p.PrivateData) > len(w.PrivateData) {
		return w, fmt.Errorf("%w: %d bytes of private data", ibv.ErrInvalidArgument, len(p.PrivateData))
	}
	w.PrivateDataLen = uint8(copy(w.PrivateData[:], p.PrivateData))
	return w, nil
}

// Connect connects x, an RC QP of the same context, to the resolved peer
// (rdma_connect); the agent brings the QP to RTS.
func (id *CMID) Connect(x *QP, p ibv.CMConnParam) error {
	return id.connecting(wire.OpCMConnect, x, p)
}

// Accept accepts a ConnectRequest with x (rdma_accept).
func (id *CMID) Accept(x *QP, p ibv.CMConnParam) error { return id.connecting(wire.OpCMAccept, x, p) }

func (id *CMID) connecting(op wire.Op, x *QP, p ibv.CMConnParam) error {
	if x == nil || x.c != id.ch.c {
		return fmt.Errorf("%w: %v: the QP belongs to another context", ibv.ErrInvalidArgument, op)
	}
	w, err := connParam(&p)
	if err != nil {
		return err
	}
	return id.call(op, &wire.CMConnect{ID: id.h, QP: x.h, Param: w})
}

// Reject refuses a ConnectRequest (rdma_reject).
func (id *CMID) Reject(privateData []byte) error {
	r := wire.CMReject{ID: id.h}
	if len(privateData) > len(r.PrivateData) {
		return fmt.Errorf("%w: %d bytes of private data", ibv.ErrInvalidArgument, len(privateData))
	}
	r.PrivateDataLen = uint8(copy(r.PrivateData[:], privateData))
	return id.call(wire.OpCMReject, &r)
}

// Disconnect tears the connection down (rdma_disconnect).
func (id *CMID) Disconnect() error { return id.call(wire.OpCMDisconnect, &wire.Handle{Handle: id.h}) }

// Destroy destroys the identifier (rdma_destroy_id).
func (id *CMID) Destroy() error {
	if err := id.call(wire.OpCMDestroyID, &wire.Handle{Handle: id.h}); err != nil {
		return err
	}
	id.ch.mu.Lock()
	delete(id.ch.ids, id.h)
	id.ch.mu.Unlock()
	return nil
}

// CreateQP creates an RC QP for the identifier and moves it to INIT, as
// rdma_create_qp does, so that receives can be posted before the connection exists.
func (id *CMID) CreateQP(pd *PD, attr QPInitAttr) (*QP, error) {
	c := id.ch.c
	attr.Type = qp.RC
	x, err := c.CreateQP(pd, attr)
	if err != nil {
		return nil, err
	}
	a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic}
	if err := c.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		c.DestroyQP(x)
		return nil, err
	}
	return x, nil
}
