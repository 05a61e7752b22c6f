package rnic

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/rocelab/rocelab/rnic/ibv"

	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/cm"
)

// The CM agent: RDMA-CM's model (communication identifiers, address and route
// resolution, listen/connect/accept/reject/disconnect, events) on top of the IB
// connection manager's protocol (IBTA chapter 12) as the Linux kernel speaks it over
// RoCEv2, so that a rocelab device and the kernel's rxe connect to each other:
//
//	active                                  passive
//	ResolveAddr (ARP)  -> AddrResolved
//	ResolveRoute       -> RouteResolved     Listen
//	Connect      ---------- REQ ---------->  ConnectRequest (a new CMID)
//	                                         Accept: QP to RTR, RTS
//	QP to RTR, RTS <------- REP -----------
//	Established  ---------- RTU ---------->  Established
//	Disconnect   ---------- DREQ --------->  Disconnected
//	Disconnected <--------- DREP ----------  Disconnect
//
// In the UDP port space (UD QPs, udaddy) a connection is one exchange, service ID
// resolution (IBTA 12.11): Connect sends a SIDR_REQ, Accept answers with a SIDR_REP
// naming its UD QP and the Q_Key, and the active side reports Established with them;
// the passive side reports nothing more, as the kernel's rdma_cm.
//
// The agent drives the QPs itself, with the values the kernel's CM and librdmacm
// negotiate (cm_init_qp_*_attr): each side's Starting PSN is its receive PSN, the
// peer's is its send PSN; responder resources and initiator depth are exchanged
// crosswise; the path MTU is the smaller of the two ports'; the local ACK timeout is
// cm_ack_timeout of rxe's ACK delay and RoCE's packet lifetime. REQ, REP and DREQ are
// retransmitted until answered, up to MaxCMRetries times, after the timeout the
// kernel computes (twice the packet lifetime plus the peer's CM response timeout).

// CMEventType is what a CM event reports: ibv.CMEventType.
type CMEventType = ibv.CMEventType

// CM events (ibv.CMEventType).
const (
	CMEventAddrResolved    = ibv.CMEventAddrResolved
	CMEventAddrError       = ibv.CMEventAddrError
	CMEventRouteResolved   = ibv.CMEventRouteResolved
	CMEventConnectRequest  = ibv.CMEventConnectRequest
	CMEventConnectResponse = ibv.CMEventConnectResponse
	CMEventUnreachable     = ibv.CMEventUnreachable
	CMEventRejected        = ibv.CMEventRejected
	CMEventEstablished     = ibv.CMEventEstablished
	CMEventDisconnected    = ibv.CMEventDisconnected
)

// CMConnParam is rdma_conn_param: ibv.CMConnParam.
type CMConnParam = ibv.CMConnParam

// CMEvent is one rdma_cm_event.
type CMEvent struct {
	Type CMEventType
	// ID is the identifier the event is about: for ConnectRequest, the new identifier
	// of the incoming connection.
	ID *CMID
	// Listener is the listening identifier a ConnectRequest arrived on.
	Listener *CMID
	// Status is 0, a negative errno (-ETIMEDOUT for an unanswered REQ or ARP) or, for
	// Rejected, the REJ's reason (IB_CM_REJ_*).
	Status int
	// Param is the peer's offer (ConnectRequest, Established on the active side,
	// Rejected: its private data).
	Param CMConnParam
	// RemoteQPN is the peer's QP: the REQ's (ConnectRequest), the REP's
	// (ConnectResponse, Established on the active side) or the SIDR_REP's.
	RemoteQPN roce.QPN
	// QKey is the Q_Key of the peer's UD QP (Established of a UDP identifier).
	QKey uint32
}

// MaxCMRetries is how often the agent resends an unanswered REQ, REP or DREQ.
const MaxCMRetries = 15

const (
	// cmResponseTimeout is the CM response timeout the kernel announces (2^20 × 4.096 µs).
	cmResponseTimeout = 20
	// roceLifetime is the packet lifetime the kernel's rdma_cm assumes on RoCE
	// (CMA_IBOE_PACKET_LIFETIME).
	roceLifetime = 18
	// ackDelay is the CA ACK delay rxe reports, the REP's target ACK delay.
	ackDelay = 15
	// addrRetry is how often address resolution looks for the neighbour's MAC.
	addrRetry   = time.Millisecond
	errTimedOut = -110 // -ETIMEDOUT
	errInvalid  = -22  // -EINVAL
	// Ephemeral ports without SetLocalPortRange: Linux's default ip_local_port_range.
	portLow, portHigh = 32768, 60999
)

type cmState uint8

const (
	cmIdle cmState = iota
	cmAddrQuery
	cmAddrResolved
	cmRouteResolved
	cmListening
	cmReqSent
	cmReqRcvd
	cmRepSent
	cmRepRcvd // the consumer moves its QP and calls Establish
	cmEstablished
	cmDreqSent
	cmDreqRcvd
	cmTimeWait
	cmSIDRReqSent
	cmSIDRReqRcvd
	cmDestroyed
)

// CMID is a communication identifier (rdma_cm_id).
type CMID struct {
	dev      *Device
	handler  func(CMEvent)
	ps       cm.PortSpace
	ud       bool // a UD QP's identifier (SIDR), else RC
	xrc      bool // passive side of an XRC REQ: accepted with an XRC_RECV QP
	state    cmState
	local    netip.AddrPort
	remote   netip.AddrPort
	dstMAC   [6]byte
	qp       *QP
	deadline clock.Time // address resolution gives up here
	timer    *clock.Timer
	retries  int
	sent     [cm.MADSize]byte // the message to resend when the timer fires
	tid      uint64
	bound    bool // holds its local port in its port space (Bind, Listen, ResolveAddr)
	reuse    bool // RDMA_OPTION_ID_REUSEADDR

	localComm, remoteComm uint32
	remoteQPN             roce.QPN
	remoteGUID            uint64
	rqPSN, sqPSN          roce.PSN
	param                 CMConnParam // negotiated, this side's view
	mtu                   roce.MTU
	flowLabel             uint32
	tos                   uint8 // the path's traffic class (SetTOS, or the REQ's)
	ackTimeout            uint8 // SetACKTimeout's local ACK timeout; 0: localACKTimeout()

	// Context is the application's context (rdma_cm_id.context).
	Context any
}

// Local returns the identifier's local address and port.
func (id *CMID) Local() netip.AddrPort { return id.local }

// Remote returns the peer's address and port.
func (id *CMID) Remote() netip.AddrPort { return id.remote }

// QP returns the QP the identifier connects.
func (id *CMID) QP() *QP { return id.qp }

// FlowLabel returns the flow label of the identifier's path (zero before Connect or
// a connection request): rdma_cm's hash of the two ports.
func (id *CMID) FlowLabel() uint32 { return id.flowLabel }

// qpType is the QP type of the identifier: UD for the UDP port space, RC for TCP,
// either for IB (CreateCMIDType).
func (id *CMID) qpType() qp.Type {
	if id.ud {
		return qp.UD
	}
	return qp.RC
}

// psPort is a port of a port space: the kernel's rdma_cm keeps one port table per
// port space (cma_ps_find), so TCP's port 7471 and UDP's are different ports.
type psPort struct {
	ps   cm.PortSpace
	port uint16
}

// cmAgent is the device's connection manager.
type cmAgent struct {
	d         *Device
	ids       map[uint32]*CMID   // by local communication ID
	owners    map[psPort][]*CMID // the identifiers bound to each port (the kernel's bind_list)
	portRange func() (lo, hi uint16)
	nextTID   uint64
	pending   []CMEvent
	deliver   *clock.Timer
}

func (a *cmAgent) init(d *Device) {
	a.d = d
	a.ids = make(map[uint32]*CMID)
	a.owners = make(map[psPort][]*CMID)
	a.nextTID = uint64(d.loop.Rand().Uint32())
	a.deliver = d.loop.NewTimer(a.flush)
}

// post queues an event; events reach their handlers from a timer of their own, never
// from inside the verbs call or packet that caused them.
func (a *cmAgent) post(e CMEvent) {
	a.pending = append(a.pending, e)
	if !a.deliver.Pending() {
		a.deliver.Reset(a.d.loop.Now())
	}
}

func (a *cmAgent) flush() {
	for len(a.pending) > 0 {
		e := a.pending[0]
		a.pending = a.pending[1:]
		h := e.ID.handler
		if e.Type == CMEventConnectRequest {
			h = e.Listener.handler
		}
		if e.ID.state != cmDestroyed && (e.Listener == nil || e.Listener.state != cmDestroyed) {
			h(e)
		}
	}
}

// CreateCMID creates a communication identifier of port space ps (TCP: RC
// connections; UDP: UD QPs through SIDR; IB: RC connections) whose events go to
// handler, on the device's loop (rdma_create_id).
func (d *Device) CreateCMID(ps cm.PortSpace, handler func(CMEvent)) (*CMID, error) {
	t := qp.RC
	if ps == cm.PortSpaceUDP {
		t = qp.UD
	}
	return d.CreateCMIDType(ps, t, handler)
}

// CreateCMIDType is CreateCMID with the QP type (rdma_create_ep's ai_qp_type): the IB
// port space takes RC (connections) and UD (SIDR) identifiers, TCP only RC and UDP
// only UD, as the kernel's rdma_cm.
func (d *Device) CreateCMIDType(ps cm.PortSpace, t qp.Type, handler func(CMEvent)) (*CMID, error) {
	switch {
	case handler == nil:
		return nil, errorf(ErrInvalidArgument, "CM identifier needs an event handler")
	case ps == cm.PortSpaceIPoIB:
		return nil, errorf(ErrNotSupported, "port space RDMA_PS_IPOIB: the CM agent serves RDMA_PS_TCP, RDMA_PS_UDP and RDMA_PS_IB")
	case ps != cm.PortSpaceTCP && ps != cm.PortSpaceUDP && ps != cm.PortSpaceIB: // the kernel's ucma_get_qp_type
		return nil, errorf(ErrInvalidArgument, "port space %#x", uint16(ps))
	case t != qp.RC && t != qp.UD, ps == cm.PortSpaceTCP && t != qp.RC, ps == cm.PortSpaceUDP && t != qp.UD:
		return nil, errorf(ErrInvalidArgument, "QP type %v in port space %#x", t, uint16(ps))
	}
	id := &CMID{dev: d, handler: handler, ps: ps, ud: t == qp.UD}
	id.timer = d.loop.NewTimer(id.onTimer)
	return id, nil
}

// SetLocalPortRange sets where ephemeral ports come from: f is asked at each
// allocation, as the kernel reads its netns's ip_local_port_range (the verbs service
// reads the host's); nil is Linux's default, 32768-60999.
func (d *Device) SetLocalPortRange(f func() (lo, hi uint16)) { d.cm.portRange = f }

// DestroyCMID releases an identifier (rdma_destroy_id). A connected one sends a DREQ
// first, as the kernel does; its QP is the caller's to destroy.
func (d *Device) DestroyCMID(id *CMID) error {
	if id.dev != d || id.state == cmDestroyed {
		return errorf(ErrInvalidArgument, "CM identifier is not on %s", d.cfg.Name)
	}
	switch id.state {
	case cmEstablished:
		id.sendDREQ()
	case cmReqRcvd, cmRepRcvd:
		id.reject(cm.RejConsumerDefined, nil)
	case cmSIDRReqRcvd:
		id.sendSIDRREP(cm.SIDRRejected, 0, nil)
	case cmDreqRcvd: // the peer waits for our DREP (the kernel's cm_destroy_id)
		id.sendPair(cm.AttrDREP)
	}
	id.timer.Stop()
	d.cm.release(id)
	id.state = cmDestroyed
	return nil
}

func (a *cmAgent) release(id *CMID) {
	if id.localComm != 0 {
		delete(a.ids, id.localComm)
	}
	if !id.bound {
		return
	}
	id.bound = false
	k := psPort{id.ps, id.local.Port()}
	o := a.owners[k]
	for i, x := range o {
		if x == id {
			o = append(o[:i], o[i+1:]...)
			break
		}
	}
	if len(o) == 0 {
		delete(a.owners, k)
	} else {
		a.owners[k] = o
	}
}

// localPortRange is the ephemeral range, Linux's default if the range is unset or
// unreadable (lo 0) or makes no sense.
func (a *cmAgent) localPortRange() (lo, hi uint16) {
	if a.portRange != nil {
		if lo, hi = a.portRange(); lo != 0 && lo <= hi {
			return lo, hi
		}
	}
	return portLow, portHigh
}

// conflict is the kernel's cma_check_port: whether id, about to own a port, may share
// it with its owners. Identifiers that both set REUSEADDR share (unless listening:
// Listen checks again with reuse off); a wildcard address conflicts with every owner
// (EADDRNOTAVAIL), the same address with its owner (EADDRINUSE).
func (a *cmAgent) conflict(id *CMID, owners []*CMID, reuse bool) error {
	for _, o := range owners {
		switch {
		case o == id, reuse && o.reuse:
		case id.local.Addr().IsUnspecified() || o.local.Addr().IsUnspecified():
			return errorf(ErrAddrNotAvailable, "port %d is bound to %v", o.local.Port(), o.local.Addr())
		case id.local.Addr() == o.local.Addr():
			return errorf(ErrAddrInUse, "%v is in use", o.local)
		}
	}
	return nil
}

// bind gives id addr and port in its port space, or a free ephemeral port for 0 (the
// kernel's cma_get_port: cma_use_port, cma_alloc_any_port from a random start).
func (a *cmAgent) bind(id *CMID, addr netip.Addr, port uint16) error {
	id.local = netip.AddrPortFrom(addr, port)
	if port != 0 {
		k := psPort{id.ps, port}
		if err := a.conflict(id, a.owners[k], id.reuse); err != nil {
			return err
		}
		a.owners[k] = append(a.owners[k], id)
		id.bound = true
		return nil
	}
	lo, hi := a.localPortRange()
	n := int(hi-lo) + 1
	p := int(lo) + a.d.loop.Rand().IntN(n)
	for range n {
		if k := (psPort{id.ps, uint16(p)}); len(a.owners[k]) == 0 {
			a.owners[k] = []*CMID{id}
			id.local = netip.AddrPortFrom(addr, uint16(p))
			id.bound = true
			return nil
		}
		if p++; p > int(hi) {
			p = int(lo)
		}
	}
	return errorf(ErrAddrNotAvailable, "no free port in %d-%d", lo, hi)
}

// Bind gives id a local address and port (rdma_bind_addr): addr is an address of the
// device or the unspecified address; port 0 is an ephemeral port. The result is what
// id got. Errors as the kernel's: EINVAL for an identifier already bound or in use,
// EADDRNOTAVAIL for an address not the device's, EADDRINUSE/EADDRNOTAVAIL for a port
// taken in the port space.
func (d *Device) Bind(id *CMID, addr netip.AddrPort) (netip.AddrPort, error) {
	switch {
	case id.dev != d || id.state != cmIdle || id.bound:
		return netip.AddrPort{}, errorf(ErrInvalidArgument, "bind: identifier is not new on %s", d.cfg.Name)
	case !addr.Addr().IsUnspecified() && !d.ownsAddr(addr.Addr()):
		return netip.AddrPort{}, errorf(ErrAddrNotAvailable, "bind to %v: not an address of %s", addr.Addr(), d.cfg.Name)
	}
	if err := d.cm.bind(id, addr.Addr().Unmap(), addr.Port()); err != nil {
		return netip.AddrPort{}, err
	}
	return id.local, nil
}

// SetReuseAddr is rdma_set_option RDMA_OPTION_ID_REUSEADDR: identifiers that both set
// it may bind the same address and port, until one listens. As the kernel's
// rdma_set_reuseaddr: any identifier but a listener may set it, only an unbound one
// clear it.
func (d *Device) SetReuseAddr(id *CMID, reuse bool) error {
	if id.dev != d || !(reuse && id.state != cmListening || id.state == cmIdle && !id.bound) {
		return errorf(ErrInvalidArgument, "set REUSEADDR: identifier is not new on %s", d.cfg.Name)
	}
	id.reuse = reuse
	return nil
}

// Listen listens for connection requests to id's port (rdma_listen): an unbound id is
// first bound to the unspecified address and an ephemeral port, as the kernel's
// rdma_listen does; addr is the address to bind it to then (Bind's rules). A port
// shared through REUSEADDR is checked again: a listener owns its address alone.
func (d *Device) Listen(id *CMID, addr netip.AddrPort) error {
	if id.dev != d || id.state != cmIdle {
		return errorf(ErrInvalidArgument, "listen: identifier is not new on %s", d.cfg.Name)
	}
	if !id.bound {
		if _, err := d.Bind(id, addr); err != nil {
			return err
		}
	} else if err := d.cm.conflict(id, d.cm.owners[psPort{id.ps, id.local.Port()}], false); err != nil {
		return err
	}
	id.reuse = false
	id.state = cmListening
	return nil
}

// listener is the identifier listening in port space ps on port for a request to dst:
// one bound to dst itself, else a wildcard one (the kernel's cma_find_listener).
func (a *cmAgent) listener(ps cm.PortSpace, port uint16, dst netip.Addr) *CMID {
	var wild *CMID
	for _, o := range a.owners[psPort{ps, port}] {
		switch {
		case o.state != cmListening:
		case o.local.Addr() == dst:
			return o
		case o.local.Addr().IsUnspecified():
			wild = o
		}
	}
	return wild
}

// ResolveAddr finds the source address and the neighbour's MAC for dst, asking the
// network (ARP, neighbour discovery) if needed (rdma_resolve_addr). src may be
// invalid: the device's address of dst's family. The outcome is an AddrResolved or,
// after timeout, an AddrError event.
func (d *Device) ResolveAddr(id *CMID, src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	if id.dev != d || id.state != cmIdle {
		return errorf(ErrInvalidArgument, "resolve address: identifier is not new on %s", d.cfg.Name)
	}
	if id.bound && !id.local.Addr().IsUnspecified() { // Bind chose the source
		src = id.local.Addr()
	}
	if !src.IsValid() || src.IsUnspecified() {
		g, err := d.gidFor(roce.GIDFromAddr(dst.Addr()))
		if err != nil {
			return err
		}
		src = g.Addr()
	} else if !d.ownsAddr(src) {
		return errorf(ErrInvalidArgument, "resolve address from %v: not an address of %s", src, d.cfg.Name)
	}
	if id.bound { // keeps its port; the source address is now known
		id.local = netip.AddrPortFrom(src.Unmap(), id.local.Port())
	} else if err := d.cm.bind(id, src.Unmap(), 0); err != nil {
		return err
	}
	id.remote = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	id.state = cmAddrQuery
	id.deadline = d.loop.Now().Add(timeout)
	id.resolveAddr()
	return nil
}

func (id *CMID) resolveAddr() {
	d := id.dev
	mac, err := d.resolve(id.local.Addr(), id.remote.Addr())
	switch {
	case err == nil:
		id.dstMAC = mac
		id.state = cmAddrResolved
		d.cm.post(CMEvent{Type: CMEventAddrResolved, ID: id})
	case d.loop.Now() >= id.deadline:
		id.state = cmIdle
		d.cm.post(CMEvent{Type: CMEventAddrError, ID: id, Status: errTimedOut})
	default:
		id.timer.Reset(d.loop.Now().Add(addrRetry))
	}
}

// ResolveRoute completes the path (rdma_resolve_route): on an Ethernet lab the route
// is the neighbour ResolveAddr found. The outcome is a RouteResolved event.
func (d *Device) ResolveRoute(id *CMID) error {
	if id.dev != d || id.state != cmAddrResolved {
		return errorf(ErrInvalidArgument, "resolve route: address not resolved")
	}
	id.state = cmRouteResolved
	d.cm.post(CMEvent{Type: CMEventRouteResolved, ID: id})
	return nil
}

// Connect sends a connection request for x, a QP of the device of the identifier's
// port space's type, to the resolved peer (rdma_connect). The outcome is Established,
// Rejected or Unreachable.
func (d *Device) Connect(id *CMID, x *QP, p CMConnParam) error {
	maxPrivate := cm.REQPrivateDataSize - cm.CMAHeaderSize
	if id.ud {
		maxPrivate = cm.SIDRREQPrivateDataSize - cm.CMAHeaderSize
	}
	switch {
	case id.dev != d || id.state != cmRouteResolved:
		return errorf(ErrInvalidArgument, "connect: route not resolved")
	case !id.validQP(x, p, true):
		return errorf(ErrInvalidArgument, "connect: needs a %v or XRC_SEND QP of %s", id.qpType(), d.cfg.Name)
	case len(p.PrivateData) > maxPrivate:
		return errorf(ErrInvalidArgument, "connect: %d bytes of private data, at most %d", len(p.PrivateData), maxPrivate)
	}
	id.flowLabel = (uint32(id.local.Port())*31 + uint32(id.remote.Port())) & 0xFFFFF
	if id.ud {
		id.qp = x
		id.newRequest()
		m := id.message(cm.AttrSIDRREQ)
		cm.SIDRREQ(m).Encode(id.localComm, roce.DefaultPKey, cm.IPServiceID(id.ps, id.remote.Port()))
		if err := id.putCMAHeader(cm.SIDRREQ(m).PrivateData(), p.PrivateData); err != nil {
			return err
		}
		id.state = cmSIDRReqSent
		id.send(true)
		return nil
	}
	if err := id.initQP(x); err != nil {
		return err
	}
	id.qp = x
	id.newRequest()
	id.rqPSN = roce.PSN(d.loop.Rand().Uint32() & roce.PSNMask)
	id.mtu = roce.MTUForLinkMTU(d.cfg.Link.MTU())
	id.param = p
	id.param.PrivateData = nil
	m := id.message(cm.AttrREQ)
	r := cm.REQ(m)
	mtuEnum := uint8(id.mtu.Enum())
	var transport, extended uint8 = cm.TransportRC, 0
	if x != nil && x.q.Type() == qp.XRCSend {
		transport, extended = cm.TransportExtended, cm.ExtendedTransportXRC
	}
	r.Encode(&cm.REQFields{
		LocalCommID: id.localComm, ServiceID: cm.IPServiceID(id.ps, id.remote.Port()),
		LocalCAGUID: d.QueryDevice().NodeGUID, LocalQPN: id.localQPN(p),
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: cmResponseTimeout, TransportType: transport, ExtendedTransport: extended,
		StartingPSN: id.rqPSN, LocalCMResponseTimeout: cmResponseTimeout, RetryCount: p.RetryCount & 7,
		PKey: roce.DefaultPKey, PathMTU: mtuEnum, RNRRetryCount: p.RNRRetryCount & 7, MaxCMRetries: MaxCMRetries,
		Primary: cm.PathFields{
			LocalLID: 0xFFFF, RemoteLID: 0xFFFF, LocalGID: roce.GIDFromAddr(id.local.Addr()),
			RemoteGID: roce.GIDFromAddr(id.remote.Addr()), FlowLabel: id.flowLabel, TrafficClass: id.tos,
			HopLimit: roce.DefaultTTL, LocalACKTimeout: localACKTimeout(),
		},
	})
	if err := id.putCMAHeader(r.PrivateData(), p.PrivateData); err != nil {
		return err
	}
	id.state = cmReqSent
	id.send(true)
	return nil
}

// validQP reports whether x is a QP of id's device of the type id wants, or, for a QP
// the consumer moves itself, nil with p naming it. An RC identifier's initiator may
// also be an XRC_SEND QP (the kernel's rdma_cm: XRC_INI connects actively, and the
// passive side of its XRC REQ wants an XRC_RECV QP).
func (id *CMID) validQP(x *QP, p CMConnParam, initiator bool) bool {
	if x == nil {
		return p.QPN != 0
	}
	t := x.q.Type()
	return x.dev == id.dev && (t == id.wantType() || initiator && !id.ud && t == qp.XRCSend)
}

// wantType is the QP type id connects: UD, RC, or XRC_RECV for the passive side of an
// XRC REQ.
func (id *CMID) wantType() qp.Type {
	if id.xrc {
		return qp.XRCRecv
	}
	return id.qpType()
}

// localQPN is the QPN a REQ or REP announces: the agent's QP's or the consumer's.
func (id *CMID) localQPN(p CMConnParam) roce.QPN {
	if id.qp != nil {
		return id.qp.QPN()
	}
	return p.QPN
}

// newRequest gives id, about to send a REQ or SIDR_REQ, its communication ID (a
// SIDR_REQ's request ID) and transaction ID.
func (id *CMID) newRequest() {
	a := &id.dev.cm
	id.localComm = a.newCommID()
	a.ids[id.localComm] = id
	id.tid = a.nextTID
	a.nextTID++
}

// putCMAHeader fills pd, a REQ's or SIDR_REQ's private data, with rdma_cm's header
// and then the consumer's private data.
func (id *CMID) putCMAHeader(pd, consumer []byte) error {
	clear(pd)
	if err := cm.CMAHeader(pd).Encode(id.local.Addr(), id.local.Port(), id.remote.Addr()); err != nil {
		return errorf(ErrInvalidArgument, "connect: %v", err)
	}
	copy(pd[cm.CMAHeaderSize:], consumer)
	return nil
}

// Accept answers a ConnectRequest with x, a QP of the device of the identifier's
// port space's type (rdma_accept). An RC QP goes to RTR and RTS and a REP leaves; the
// outcome is Established (the RTU). For a UD QP a SIDR_REP leaves with its QPN and
// the Q_Key, and that is all (the QP is the consumer's to bring to RTS).
func (d *Device) Accept(id *CMID, x *QP, p CMConnParam) error {
	maxPrivate := cm.REPPrivateDataSize
	if id.ud {
		maxPrivate = cm.SIDRREPPrivateDataSize
	}
	switch {
	case id.dev != d || id.state != cmReqRcvd && id.state != cmSIDRReqRcvd:
		return errorf(ErrInvalidArgument, "accept: no connection request pending")
	case !id.validQP(x, p, false):
		return errorf(ErrInvalidArgument, "accept: needs the %v QP of %s the request asks for", id.wantType(), d.cfg.Name)
	case len(p.PrivateData) > maxPrivate:
		return errorf(ErrInvalidArgument, "accept: %d bytes of private data, at most %d", len(p.PrivateData), maxPrivate)
	}
	if id.ud {
		id.qp = x
		id.sendSIDRREP(cm.SIDRValid, id.localQPN(p), p.PrivateData)
		return nil
	}
	if err := id.initQP(x); err != nil {
		return err
	}
	id.qp = x
	// The REQ offered: its initiator depth is what we must accept, its responder
	// resources what we may issue.
	id.param.ResponderResources = min(p.ResponderResources, id.param.ResponderResources)
	id.param.InitiatorDepth = min(p.InitiatorDepth, id.param.InitiatorDepth)
	if err := id.connectQP(); err != nil {
		id.reject(cm.RejNoResources, nil)
		return err
	}
	m := id.message(cm.AttrREP)
	cm.REP(m).Encode(&cm.REPFields{
		LocalCommID: id.localComm, RemoteCommID: id.remoteComm, LocalQPN: id.localQPN(p), StartingPSN: id.rqPSN,
		ResponderResources: id.param.ResponderResources, InitiatorDepth: id.param.InitiatorDepth,
		TargetACKDelay: ackDelay, RNRRetryCount: p.RNRRetryCount & 7, LocalCAGUID: d.QueryDevice().NodeGUID,
	})
	clear(cm.REP(m).PrivateData())
	copy(cm.REP(m).PrivateData(), p.PrivateData)
	id.state = cmRepSent
	id.send(true)
	return nil
}

// Reject refuses a ConnectRequest with a REJ of reason "consumer defined" carrying
// privateData (rdma_reject).
func (d *Device) Reject(id *CMID, privateData []byte) error {
	if id.dev != d || id.state != cmReqRcvd && id.state != cmSIDRReqRcvd {
		return errorf(ErrInvalidArgument, "reject: no connection request pending")
	}
	if id.state == cmSIDRReqRcvd {
		if len(privateData) > cm.SIDRREPPrivateDataSize {
			return errorf(ErrInvalidArgument, "reject: %d bytes of private data, at most %d", len(privateData), cm.SIDRREPPrivateDataSize)
		}
		id.sendSIDRREP(cm.SIDRRejected, 0, privateData)
		return nil
	}
	if len(privateData) > 148 {
		return errorf(ErrInvalidArgument, "reject: %d bytes of private data, at most 148", len(privateData))
	}
	id.reject(cm.RejConsumerDefined, privateData)
	delete(d.cm.ids, id.localComm)
	id.state = cmIdle
	return nil
}

// Disconnect tears a connection down (rdma_disconnect): the QP goes to the error
// state, flushing its work, and a DREQ leaves (or the DREP answering the peer's
// DREQ). The active side of the teardown gets Disconnected when the DREP arrives.
func (d *Device) Disconnect(id *CMID) error {
	if id.dev != d {
		return errorf(ErrInvalidArgument, "disconnect: identifier is not on %s", d.cfg.Name)
	}
	switch id.state {
	case cmEstablished, cmRepSent:
		id.errorQP()
		id.sendDREQ()
	case cmDreqRcvd:
		id.errorQP()
		id.sendPair(cm.AttrDREP)
		id.state = cmTimeWait
	default:
		return errorf(ErrInvalidArgument, "disconnect: not connected")
	}
	return nil
}

func (id *CMID) sendDREQ() {
	m := id.message(cm.AttrDREQ)
	cm.DREQ(m).Encode(id.localComm, id.remoteComm, id.remoteQPN)
	clear(cm.DREQ(m).PrivateData())
	id.state = cmDreqSent
	id.send(true)
}

// sendPair sends an RTU or DREP, which need no answer.
func (id *CMID) sendPair(attr cm.AttributeID) {
	m := id.message(attr)
	cm.Pair(m).Encode(id.localComm, id.remoteComm)
	clear(cm.Pair(m).PrivateData())
	id.send(false)
}

func (id *CMID) reject(reason uint16, privateData []byte) {
	id.timer.Stop()
	m := id.message(cm.AttrREJ)
	cm.REJ(m).Encode(id.localComm, id.remoteComm, cm.MsgREQ, reason, nil)
	clear(cm.REJ(m).PrivateData())
	copy(cm.REJ(m).PrivateData(), privateData)
	id.send(false)
}

// sendSIDRREP answers a SIDR_REQ with status (for SIDRValid: the UD QP qpn and
// rdma_cm's UDP Q_Key) and private data. The request is then done: a retransmitted
// SIDR_REQ is a new request, as with the kernel's CM.
func (id *CMID) sendSIDRREP(status uint8, qpn roce.QPN, privateData []byte) {
	m := id.message(cm.AttrSIDRREP)
	var qkey uint32
	if status == cm.SIDRValid {
		qkey = cm.UDPQKey
	}
	r := cm.SIDRREP(m)
	r.Encode(id.remoteComm, status, qpn, cm.IPServiceID(id.ps, id.local.Port()), qkey)
	clear(r.PrivateData())
	copy(r.PrivateData(), privateData)
	id.send(false)
	if id.localComm != 0 {
		delete(id.dev.cm.ids, id.localComm)
	}
	id.state = cmIdle
}

// message starts the next message of id in id.sent: the MAD header.
func (id *CMID) message(attr cm.AttributeID) cm.MAD {
	m := cm.MAD(id.sent[:])
	h := cm.CMHeader(attr, id.tid)
	m.Encode(&h)
	return m
}

// send transmits id.sent; one that expects an answer is retried until answered.
func (id *CMID) send(answered bool) {
	id.dev.sendMAD(id.sent[:], id.local.Addr(), id.remote.Addr(), id.dstMAC)
	if answered {
		id.retries = 0
		id.timer.Reset(id.dev.loop.Now().Add(id.answerTimeout()))
	}
}

// answerTimeout is how long id waits for the answer to what it sent.
func (id *CMID) answerTimeout() time.Duration {
	if id.state == cmSIDRReqSent {
		return sidrTimeout()
	}
	return cmTimeout()
}

// cmTimeout is how long the kernel's CM waits for an answer: twice the packet
// lifetime plus the peer's CM response time (cm_convert_to_ms).
func cmTimeout() time.Duration {
	return 2*cmTimeUnits(roceLifetime) + cmTimeUnits(cmResponseTimeout)
}

// sidrTimeout is how long the kernel's rdma_cm waits for a SIDR_REP: the CM response
// time alone (cma_resolve_ib_udp's timeout_ms).
func sidrTimeout() time.Duration { return cmTimeUnits(cmResponseTimeout) }

// cmTimeUnits converts an IB timeout exponent (4.096 µs × 2^t) to the kernel's
// rounded milliseconds.
func cmTimeUnits(t int) time.Duration { return time.Duration(1<<max(t-8, 0)) * time.Millisecond }

// localACKTimeout is cm_ack_timeout(rxe's ACK delay, RoCE's packet lifetime).
func localACKTimeout() uint8 {
	t := uint8(roceLifetime + 1)
	if t >= ackDelay {
		if ackDelay >= t-1 {
			t++
		}
	} else {
		t = ackDelay
		if roceLifetime+1 >= ackDelay-1 {
			t++
		}
	}
	return min(t, 31)
}

func (id *CMID) onTimer() {
	switch id.state {
	case cmAddrQuery:
		id.resolveAddr()
		return
	case cmReqSent, cmRepSent, cmDreqSent, cmSIDRReqSent:
	default:
		return
	}
	if id.retries < MaxCMRetries {
		id.retries++
		id.dev.stats.CMRetries++
		id.dev.sendMAD(id.sent[:], id.local.Addr(), id.remote.Addr(), id.dstMAC)
		id.timer.Reset(id.dev.loop.Now().Add(id.answerTimeout()))
		return
	}
	switch id.state {
	case cmSIDRReqSent: // no REJ in SIDR: the request just ends
		id.state = cmIdle
		id.dev.cm.post(CMEvent{Type: CMEventUnreachable, ID: id, Status: errTimedOut})
	case cmReqSent, cmRepSent:
		id.reject(cm.RejTimeout, nil)
		id.errorQP()
		id.state = cmIdle
		id.dev.cm.post(CMEvent{Type: CMEventUnreachable, ID: id, Status: errTimedOut})
	case cmDreqSent:
		id.state = cmTimeWait
		id.dev.cm.post(CMEvent{Type: CMEventDisconnected, ID: id})
	}
}

func (a *cmAgent) newCommID() uint32 {
	for {
		c := a.d.loop.Rand().Uint32()
		if _, used := a.ids[c]; c != 0 && !used {
			return c
		}
	}
}

// initQP moves a new QP to INIT as librdmacm's rdma_create_qp does; one already in
// INIT is left as it is.
func (id *CMID) initQP(x *QP) error {
	if x == nil {
		return nil // the consumer's, moved with InitQPAttr
	}
	switch x.State() {
	case qp.StateInit:
		return nil
	case qp.StateReset:
		a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic}
		return id.dev.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	}
	return errorf(ErrInvalidArgument, "CM: QP %v is %v, not RESET or INIT", x.QPN(), x.State())
}

// connectQP moves id's QP, if the agent holds it, to RTR and RTS with the
// negotiated values.
func (id *CMID) connectQP() error {
	if id.qp == nil {
		return nil // the consumer's, moved with InitQPAttr
	}
	for _, s := range []qp.State{qp.StateRTR, qp.StateRTS} {
		a, mask := id.connectedAttr(s)
		mask = xrcMask(id.qp.q.Type(), s, mask)
		if err := id.dev.ModifyQP(id.qp, &a, mask); err != nil {
			return err
		}
	}
	return nil
}

// connectedAttr is what brings an RC QP of the connection to RTR or RTS
// (cm_init_qp_rtr_attr, cm_init_qp_rts_attr).
func (id *CMID) connectedAttr(s qp.State) (qp.Attr, qp.AttrMask) {
	if s == qp.StateRTR {
		return qp.Attr{State: qp.StateRTR, PathMTU: id.mtu, DestQPN: id.remoteQPN, RQPSN: id.rqPSN,
				MaxDestRdAtomic: id.param.ResponderResources, MinRNRTimer: 12,
				AV: qp.AddressVector{DGID: roce.GIDFromAddr(id.remote.Addr()), SGID: roce.GIDFromAddr(id.local.Addr()),
					DstMAC: id.dstMAC, FlowLabel: id.flowLabel, HopLimit: roce.DefaultTTL, TrafficClass: id.tos}},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
	}
	timeout := localACKTimeout()
	if id.ackTimeout != 0 {
		timeout = id.ackTimeout
	}
	return qp.Attr{State: qp.StateRTS, Timeout: timeout, RetryCnt: id.param.RetryCount & 7,
			RNRRetry: id.param.RNRRetryCount & 7, SQPSN: id.sqPSN, MaxRdAtomic: id.param.InitiatorDepth},
		qp.AttrState | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrSQPSN | qp.AttrMaxQPRdAtomic
}

// xrcMask narrows an RC QP's RTR or RTS mask to what an XRC half takes, as the kernel's
// cm_init_qp_rtr_attr and cm_init_qp_rts_attr do: an initiator (XRC_SEND) has no
// responder attributes, a target (XRC_RECV) no requester ones but the timeout.
func xrcMask(t qp.Type, s qp.State, mask qp.AttrMask) qp.AttrMask {
	switch {
	case t == qp.XRCSend && s == qp.StateRTR:
		return mask &^ (qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer)
	case t == qp.XRCRecv && s == qp.StateRTS:
		return mask &^ (qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic)
	}
	return mask
}

// InitQPAttr returns the attributes, and which of them to set, that bring a QP of
// id's connection to state (rdma_init_qp_attr), for a consumer that moves its QP
// itself: INIT as initQP; for RC, RTR and RTS with the values the CM negotiated,
// known on the passive side from the connection request and on the active side from
// the REP; for UD, RTR and RTS need nothing but the state and a send PSN of 0.
func (d *Device) InitQPAttr(id *CMID, s qp.State) (qp.Attr, qp.AttrMask, error) {
	if id.dev != d {
		return qp.Attr{}, 0, errorf(ErrInvalidArgument, "init QP attributes: identifier is not on %s", d.cfg.Name)
	}
	switch {
	case s == qp.StateInit && id.ud:
		return qp.Attr{State: s, Port: 1, QKey: cm.UDPQKey}, qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrQKey, nil
	case s == qp.StateInit:
		return qp.Attr{State: s, Port: 1, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags, nil
	case s == qp.StateRTR && id.ud:
		return qp.Attr{State: s}, qp.AttrState, nil
	case s == qp.StateRTS && id.ud:
		return qp.Attr{State: s}, qp.AttrState | qp.AttrSQPSN, nil
	case s != qp.StateRTR && s != qp.StateRTS:
		return qp.Attr{}, 0, errorf(ErrInvalidArgument, "init QP attributes for %v: only INIT, RTR and RTS", s)
	}
	switch id.state {
	case cmReqRcvd, cmRepSent, cmRepRcvd, cmEstablished:
		a, mask := id.connectedAttr(s)
		if id.xrc {
			mask = xrcMask(qp.XRCRecv, s, mask)
		}
		return a, mask, nil
	}
	return qp.Attr{}, 0, errorf(ErrInvalidArgument, "init QP attributes for %v: no connection negotiated", s)
}

// Establish completes a connection whose QP the consumer moves itself
// (rdma_establish): after ConnectResponse and the QP in RTS, the RTU leaves.
func (d *Device) Establish(id *CMID) error {
	if id.dev != d || id.state != cmRepRcvd {
		return errorf(ErrInvalidArgument, "establish: no connection response pending")
	}
	id.sendPair(cm.AttrRTU)
	id.state = cmEstablished
	return nil
}

// SetTOS sets the type of service of id's path (rdma_set_option RDMA_OPTION_ID_TOS):
// the REQ's traffic class and the QPs' (the passive side takes the REQ's).
func (d *Device) SetTOS(id *CMID, tos uint8) error {
	if id.dev != d {
		return errorf(ErrInvalidArgument, "set TOS: identifier is not on %s", d.cfg.Name)
	}
	id.tos = tos
	return nil
}

// SetACKTimeout sets the local ACK timeout (4.096 µs × 2^t) the QP of id's RC
// connection gets at RTS instead of the CM's (rdma_set_option
// RDMA_OPTION_ID_ACK_TIMEOUT).
func (d *Device) SetACKTimeout(id *CMID, t uint8) error {
	switch {
	case id.dev != d:
		return errorf(ErrInvalidArgument, "set ACK timeout: identifier is not on %s", d.cfg.Name)
	case id.ud:
		return errorf(ErrInvalidArgument, "set ACK timeout: not an RC identifier")
	case t > 31:
		return errorf(ErrInvalidArgument, "set ACK timeout: %d, at most 31", t)
	}
	id.ackTimeout = t
	return nil
}

// errorQP moves id's QP to the error state, flushing its work (librdmacm does it
// before it disconnects).
func (id *CMID) errorQP() {
	if id.qp == nil {
		return
	}
	a := qp.Attr{State: qp.StateErr}
	_ = id.dev.ModifyQP(id.qp, &a, qp.AttrState) // a QP the app destroyed or already in ERR
}

// receive dispatches a CM MAD from src (through srcMAC) to dst.
func (a *cmAgent) receive(m cm.MAD, src, dst netip.Addr, srcMAC [6]byte, _ roce.QPN) {
	switch m.AttributeID() {
	case cm.AttrREQ:
		a.receiveREQ(cm.REQ(m), src.Unmap(), dst.Unmap(), srcMAC)
		return
	case cm.AttrSIDRREQ:
		a.receiveSIDRREQ(cm.SIDRREQ(m), src.Unmap(), dst.Unmap(), srcMAC)
		return
	case cm.AttrSIDRREP:
		a.receiveSIDRREP(cm.SIDRREP(m))
		return
	case cm.AttrREP, cm.AttrRTU, cm.AttrDREQ, cm.AttrDREP, cm.AttrREJ, cm.AttrMRA:
	default:
		a.d.stats.CMUnhandled++
		return
	}
	// Every other message names our communication ID as its remote one.
	id := a.ids[binary.BigEndian.Uint32(m[28:])]
	if m.AttributeID() == cm.AttrREJ && id == nil {
		// A REJ of our REQ carries no remote ID of ours if it was sent before the peer
		// knew it (a timeout REJ): match by transaction ID.
		for _, c := range a.ids {
			if c.tid == m.TransactionID() && c.state == cmReqSent {
				id = c
			}
		}
	}
	if id == nil && m.AttributeID() == cm.AttrDREQ {
		// A DREQ for an identifier gone (destroyed, or its DREP lost): the kernel's
		// cm_issue_drep answers it all the same, so that the peer stops waiting.
		q := cm.DREQ(m)
		drep := &CMID{dev: a.d, local: netip.AddrPortFrom(dst.Unmap(), 0), remote: netip.AddrPortFrom(src.Unmap(), 0),
			dstMAC: srcMAC, tid: m.TransactionID(), localComm: q.RemoteCommID(), remoteComm: q.LocalCommID()}
		drep.sendPair(cm.AttrDREP)
		return
	}
	if id == nil {
		a.d.stats.CMUnhandled++
		return
	}
	switch m.AttributeID() {
	case cm.AttrREP:
		id.receiveREP(cm.REP(m))
	case cm.AttrRTU:
		if id.state == cmRepSent {
			id.timer.Stop()
			id.state = cmEstablished
			a.post(CMEvent{Type: CMEventEstablished, ID: id})
		}
	case cm.AttrDREQ:
		switch id.state {
		case cmEstablished, cmRepSent:
			id.timer.Stop()
			id.state = cmDreqRcvd
			a.post(CMEvent{Type: CMEventDisconnected, ID: id})
		case cmDreqSent:
			// Both sides disconnect at once. As the kernel's cm_dreq_handler, the
			// peer's DREQ cancels ours and ends the teardown: a kernel peer in
			// DREQ_SENT moves to TIMEWAIT on our DREP and never answers our DREQ.
			id.timer.Stop()
			id.sendPair(cm.AttrDREP)
			id.state = cmTimeWait
			a.post(CMEvent{Type: CMEventDisconnected, ID: id})
		case cmTimeWait: // a DREQ again: our DREP was lost
			id.sendPair(cm.AttrDREP)
		}
	case cm.AttrDREP:
		if id.state == cmDreqSent {
			id.timer.Stop()
			id.state = cmTimeWait
			a.post(CMEvent{Type: CMEventDisconnected, ID: id})
		}
	case cm.AttrREJ:
		if id.state == cmReqSent || id.state == cmRepSent {
			id.timer.Stop()
			id.errorQP()
			id.state = cmIdle
			r := cm.REJ(m)
			a.post(CMEvent{Type: CMEventRejected, ID: id, Status: int(r.Reason()),
				Param: CMConnParam{PrivateData: append([]byte(nil), r.PrivateData()...)}})
		}
	case cm.AttrMRA:
		// The peer needs longer: wait its service timeout before resending.
		if id.state == cmReqSent || id.state == cmRepSent {
			t := int(cm.MRA(m).ServiceTimeout())
			id.timer.Reset(a.d.loop.Now().Add(cmTimeout() + time.Duration(1<<max(t-8, 0))*time.Millisecond))
		}
	}
}

func (a *cmAgent) receiveREQ(r cm.REQ, src, dst netip.Addr, srcMAC [6]byte) {
	for _, id := range a.ids {
		if id.remoteComm == r.LocalCommID() && id.remoteGUID == r.LocalCAGUID() && id.state != cmReqSent {
			// A retransmitted REQ: our REP was lost, or the consumer has not answered.
			if id.state == cmRepSent {
				id.dev.sendMAD(id.sent[:], id.local.Addr(), id.remote.Addr(), id.dstMAC)
			}
			return
		}
	}
	sid := r.ServiceID()
	child := &CMID{dev: a.d, ps: sid.PortSpace(), remote: netip.AddrPortFrom(src, 0), local: netip.AddrPortFrom(dst, r.ServiceID().Port()),
		dstMAC: srcMAC, tid: r.MAD().TransactionID(), remoteComm: r.LocalCommID(), remoteGUID: r.LocalCAGUID(),
		remoteQPN: r.LocalQPN(), sqPSN: r.StartingPSN(), flowLabel: r.Primary().FlowLabel(), tos: r.Primary().TrafficClass(),
		rqPSN: roce.PSN(a.d.loop.Rand().Uint32() & roce.PSNMask), state: cmReqRcvd}
	child.timer = a.d.loop.NewTimer(child.onTimer)
	child.localComm = a.newCommID()
	l := a.listener(sid.PortSpace(), sid.Port(), dst)
	hdr, err := cm.ParseCMAHeader(r.PrivateData())
	switch {
	case l == nil || l.ud || err != nil:
		child.reject(cm.RejInvalidServiceID, nil)
		return
	case r.TransportType() == cm.TransportExtended && r.ExtendedTransport() == cm.ExtendedTransportXRC:
		child.xrc = true // the kernel's cm_req_get_qp_type: an XRC target answers
	case r.TransportType() != cm.TransportRC:
		child.reject(cm.RejInvalidTransportType, nil)
		return
	}
	child.remote = netip.AddrPortFrom(hdr.SrcAddr(), hdr.SrcPort())
	mtu, err := roce.MTUFromEnum(int(r.PathMTU()))
	if err != nil {
		child.reject(cm.RejInvalidMTU, nil)
		return
	}
	child.mtu = min(mtu, roce.MTUForLinkMTU(a.d.cfg.Link.MTU()))
	child.handler = l.handler
	// This side's view: the peer's initiator depth is our responder resources.
	child.param = CMConnParam{ResponderResources: r.InitiatorDepth(), InitiatorDepth: r.ResponderResources(),
		RetryCount: r.RetryCount(), RNRRetryCount: r.RNRRetryCount()}
	a.ids[child.localComm] = child
	offer := child.param
	offer.PrivateData = append([]byte(nil), r.PrivateData()[cm.CMAHeaderSize:]...)
	a.post(CMEvent{Type: CMEventConnectRequest, ID: child, Listener: l, Param: offer, RemoteQPN: child.remoteQPN})
}

func (id *CMID) receiveREP(r cm.REP) {
	switch id.state {
	case cmEstablished:
		id.sendPair(cm.AttrRTU) // our RTU was lost: the peer resent its REP
		return
	case cmReqSent:
	default:
		return
	}
	id.timer.Stop()
	id.remoteComm = r.LocalCommID()
	id.remoteQPN = r.LocalQPN()
	id.remoteGUID = r.LocalCAGUID()
	id.sqPSN = r.StartingPSN()
	id.param.ResponderResources = min(id.param.ResponderResources, r.InitiatorDepth())
	id.param.InitiatorDepth = min(id.param.InitiatorDepth, r.ResponderResources())
	id.param.RNRRetryCount = r.RNRRetryCount()
	if err := id.connectQP(); err != nil {
		id.reject(cm.RejNoResources, nil)
		id.state = cmIdle
		id.dev.cm.post(CMEvent{Type: CMEventRejected, ID: id, Status: int(cm.RejNoResources)})
		return
	}
	// The REP's private data (all 196 bytes, as the kernel reports them) and offer.
	e := CMEvent{Type: CMEventEstablished, ID: id, RemoteQPN: id.remoteQPN, Param: CMConnParam{
		PrivateData:        append([]byte(nil), r.PrivateData()...),
		ResponderResources: r.ResponderResources(), InitiatorDepth: r.InitiatorDepth(), RNRRetryCount: r.RNRRetryCount()}}
	if id.qp == nil { // the consumer moves its QP, then Establish sends the RTU
		id.state = cmRepRcvd
		e.Type = CMEventConnectResponse
		id.dev.cm.post(e)
		return
	}
	id.sendPair(cm.AttrRTU)
	id.state = cmEstablished
	id.dev.cm.post(e)
}

// receiveSIDRREQ takes a UD consumer's service ID resolution request: a listener of
// the UDP port space gets a ConnectRequest for a new identifier, which Accept or
// Reject answers with a SIDR_REP. A request for a service nobody listens on is
// answered "unsupported" and one without rdma_cm's header "rejected", as the
// kernel's CM and rdma_cm do; a retransmitted request still pending is dropped.
func (a *cmAgent) receiveSIDRREQ(r cm.SIDRREQ, src, dst netip.Addr, srcMAC [6]byte) {
	for _, id := range a.ids {
		if id.state == cmSIDRReqRcvd && id.remoteComm == r.RequestID() && id.remote.Addr() == src {
			return
		}
	}
	sid := r.ServiceID()
	child := &CMID{dev: a.d, ps: sid.PortSpace(), ud: true, remote: netip.AddrPortFrom(src, 0),
		local: netip.AddrPortFrom(dst, sid.Port()), dstMAC: srcMAC, tid: r.MAD().TransactionID(),
		remoteComm: r.RequestID(), state: cmSIDRReqRcvd}
	child.timer = a.d.loop.NewTimer(child.onTimer)
	l := a.listener(sid.PortSpace(), sid.Port(), dst)
	if l == nil || !l.ud {
		child.sendSIDRREP(cm.SIDRUnsupported, 0, nil)
		return
	}
	hdr, err := cm.ParseCMAHeader(r.PrivateData())
	if err != nil {
		child.sendSIDRREP(cm.SIDRRejected, 0, nil)
		return
	}
	child.remote = netip.AddrPortFrom(hdr.SrcAddr(), hdr.SrcPort())
	child.flowLabel = (uint32(child.remote.Port())*31 + uint32(child.local.Port())) & 0xFFFFF
	child.handler = l.handler
	child.localComm = a.newCommID()
	a.ids[child.localComm] = child
	a.post(CMEvent{Type: CMEventConnectRequest, ID: child, Listener: l,
		Param: CMConnParam{PrivateData: append([]byte(nil), r.PrivateData()[cm.CMAHeaderSize:]...)}})
}

// receiveSIDRREP ends a SIDR_REQ of ours: Established with the peer's QPN, Q_Key and
// private data, or Unreachable with the status the peer answered.
func (a *cmAgent) receiveSIDRREP(r cm.SIDRREP) {
	id := a.ids[r.RequestID()]
	if id == nil || id.state != cmSIDRReqSent {
		a.d.stats.CMUnhandled++
		return
	}
	id.timer.Stop()
	id.state = cmIdle
	e := CMEvent{Type: CMEventEstablished, ID: id, RemoteQPN: r.QPN(), QKey: r.QKey(),
		Param: CMConnParam{PrivateData: append([]byte(nil), r.PrivateData()...)}}
	switch {
	case r.Status() != cm.SIDRValid:
		e = CMEvent{Type: CMEventUnreachable, ID: id, Status: int(r.Status()),
			Param: CMConnParam{PrivateData: e.Param.PrivateData}}
	case r.QKey() != cm.UDPQKey: // the kernel's cma_set_qkey refuses another Q_Key
		e = CMEvent{Type: CMEventAddrError, ID: id, Status: errInvalid}
	}
	a.post(e)
}
