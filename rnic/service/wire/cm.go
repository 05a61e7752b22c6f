package wire

import "net/netip"

// RDMA-CM calls (rnic's CM agent, rdma_cm's model). Their ops start at 0x40, clear of
// the verbs calls. Values are part of the protocol: never renumber.
const (
	OpCMCreateChannel  Op = 0x40 // carries the channel's eventfd
	OpCMDestroyChannel Op = 0x41
	OpCMCreateID       Op = 0x42
	OpCMDestroyID      Op = 0x43
	OpCMListen         Op = 0x44
	OpCMResolveAddr    Op = 0x45
	OpCMResolveRoute   Op = 0x46
	OpCMConnect        Op = 0x47
	OpCMAccept         Op = 0x48
	OpCMReject         Op = 0x49
	OpCMDisconnect     Op = 0x4A
	OpCMGetEvent       Op = 0x4B
	OpCMInitQPAttr     Op = 0x4C // CMInitQPAttr, answered by CMQPAttr
	OpCMEstablish      Op = 0x4D // a Handle naming the identifier
	OpCMSetOption      Op = 0x4E
	OpCMBind           Op = 0x4F // CMBind, answered by the CMAddr the identifier got
	OpCMMigrateID      Op = 0x50
	opCMMax            Op = 0x51
)

var cmOpNames = [...]string{"CM_CREATE_CHANNEL", "CM_DESTROY_CHANNEL", "CM_CREATE_ID", "CM_DESTROY_ID",
	"CM_LISTEN", "CM_RESOLVE_ADDR", "CM_RESOLVE_ROUTE", "CM_CONNECT", "CM_ACCEPT", "CM_REJECT",
	"CM_DISCONNECT", "CM_GET_EVENT", "CM_INIT_QP_ATTR", "CM_ESTABLISH", "CM_SET_OPTION", "CM_BIND", "CM_MIGRATE_ID"}

// CMAddr is an IP address and port: IPv4 as an IPv4-mapped IPv6 address; all zero
// (or ::ffff:0.0.0.0) is the unspecified address.
type CMAddr struct {
	Addr [16]byte
	Port uint16
	_    uint16
}

// FromAddrPort converts an address and port.
func FromAddrPort(a netip.AddrPort) CMAddr {
	var w CMAddr
	if a.Addr().IsValid() {
		w.Addr = a.Addr().As16()
	}
	w.Port = a.Port()
	return w
}

// AddrPort converts back; IPv4-mapped addresses become IPv4.
func (w *CMAddr) AddrPort() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(w.Addr).Unmap(), w.Port)
}

// CMCreateID creates a communication identifier whose events go to Channel. PortSpace
// is rdma_cm's: 0x0106 (TCP, RC connections), 0x0111 (UDP, UD QPs through SIDR) or
// 0x013F (IB, either); QPType an ibv_qp_type (2 RC, 4 UD), 0 for the port space's.
type CMCreateID struct {
	Channel   uint32
	PortSpace uint16
	QPType    uint8
	_         uint8
}

// CMBind is rdma_bind_addr of identifier ID to Addr (port 0: an ephemeral port).
type CMBind struct {
	ID   uint32
	Addr CMAddr
}

// CMMigrateID is rdma_migrate_id: identifier ID's events, the queued ones too, go to
// Channel from now on.
type CMMigrateID struct {
	ID, Channel uint32
}

// CMListen listens on identifier ID (rdma_listen), binding it to Addr first if
// OpCMBind did not.
type CMListen struct {
	ID      uint32
	Backlog uint32
	Addr    CMAddr
}

// CMResolveAddr is rdma_resolve_addr: Src may be unspecified.
type CMResolveAddr struct {
	ID        uint32
	TimeoutMS uint32
	Src, Dst  CMAddr
}

// CMConnParam is rdma_conn_param, private data included.
type CMConnParam struct {
	ResponderResources, InitiatorDepth, RetryCount, RNRRetryCount uint8
	PrivateDataLen                                                uint8
	_                                                             [3]byte
	PrivateData                                                   [196]byte
}

// CMConnect is rdma_connect (and, with the OpCMAccept op, rdma_accept) of identifier
// ID with QP QP, or, with QP 0, of the QP numbered QPN that the client moves through
// its states itself (rdma_init_qp_attr, rdma_establish).
type CMConnect struct {
	ID, QP, QPN uint32
	Param       CMConnParam
}

// CMInitQPAttr is rdma_init_qp_attr: the attributes that bring a QP of identifier
// ID's connection to State (an ibv_qp_state: INIT, RTR or RTS).
type CMInitQPAttr struct {
	ID, State uint32
}

// CMQPAttr answers OpCMInitQPAttr: the attributes and the mask (ibv_qp_attr_mask)
// of those to set.
type CMQPAttr struct {
	Mask uint32
	Attr QPAttr
}

// CMSetOption is rdma_set_option at level RDMA_OPTION_ID of the options the agent
// acts on: Option is RDMA_OPTION_ID_TOS (0), RDMA_OPTION_ID_REUSEADDR (1) or
// RDMA_OPTION_ID_ACK_TIMEOUT (3).
type CMSetOption struct {
	ID, Option, Value uint32
}

// CMRequest is the request of a CM call about an identifier.
type CMRequest interface {
	Identifier() uint32 // the identifier's handle
}

// Identifier implements CMRequest.
func (r *CMListen) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMResolveAddr) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMConnect) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMReject) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMInitQPAttr) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMSetOption) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMBind) Identifier() uint32 { return r.ID }

// Identifier implements CMRequest.
func (r *CMMigrateID) Identifier() uint32 { return r.ID }

// rdma_set_option's RDMA_OPTION_ID options that reach the service.
const (
	CMOptionTOS        = 0
	CMOptionReuseAddr  = 1
	CMOptionACKTimeout = 3
)

// CMReject is rdma_reject.
type CMReject struct {
	ID             uint32
	PrivateDataLen uint8
	_              [3]byte
	PrivateData    [148]byte
}

// CMEvent answers OpCMGetEvent (whose body is a Handle naming the channel): the
// oldest event of the channel. An empty channel answers CodeNotFound; the client
// then waits on the channel's eventfd, which the service increments per event.
// Type is rdma_cm_event_type; Status a negative errno or a REJ reason; ID the
// identifier the event is about (for CONNECT_REQUEST a new one), Listener the
// listening identifier of a CONNECT_REQUEST; Local and Remote the identifier's
// addresses; QPN the peer's QP (a REQ's, REP's or SIDR_REP's, as rdma_cm_event's
// qp_num); Param the peer's offer. For an identifier of the UDP port space,
// Established carries the peer's Q_Key and the path's flow label (the address
// handle's).
type CMEvent struct {
	Type          uint8
	_             [3]byte
	Status        int32
	ID, Listener  uint32
	Local, Remote CMAddr
	QPN           uint32
	Param         CMConnParam
	QKey          uint32
	FlowLabel     uint32
}
