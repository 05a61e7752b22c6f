// Package ibv holds what the soft-RNIC (package rnic) and the clients of its verbs
// service (rnic/verbs, rnic/service/wire) share: the attribute types, limits, CM event
// types and error classes of the verbs API, and how an app finds its host's service. It
// depends on no device code, so that an app links the client and not the device
// (importcheck holds rnic/verbs and rnic/service/wire to it).
package ibv

import (
	"errors"

	"github.com/rocelab/rocelab/roce"
)

// QPCap sizes a QP's queues (ibv_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE int
}

// SRQInitAttr sizes a shared receive queue (ibv_srq_init_attr).
type SRQInitAttr struct {
	MaxWR, MaxSGE int
}

// DeviceAttr is what QueryDevice reports (ibv_device_attr, abridged).
type DeviceAttr struct {
	FWVer                       string
	NodeGUID                    uint64
	MaxQP, MaxQPWR, MaxSGE      int
	MaxCQE                      int
	MaxQPRdAtom, MaxQPInitRdAtm int
	PhysPortCnt                 int
}

// PortAttr is what QueryPort reports (ibv_port_attr, abridged).
type PortAttr struct {
	State       string // "ACTIVE"
	MaxMTU      roce.MTU
	ActiveMTU   roce.MTU
	GIDTableLen int
	Rate        uint64 // bit/s
	LinkLayer   string // "Ethernet"
	MaxMsgSize  uint32
}

// AHAttr describes an address handle (ibv_ah_attr with its GRH, for RoCEv2).
type AHAttr struct {
	DGID         roce.GID
	SGIDIndex    int
	TrafficClass uint8
	HopLimit     uint8
	FlowLabel    uint32
}

// CMConnParam is rdma_conn_param: what a side offers when it connects or accepts, and
// what the peer offered when an event reports it.
type CMConnParam struct {
	PrivateData        []byte
	ResponderResources uint8 // incoming READs/atomics this side accepts (max_dest_rd_atomic)
	InitiatorDepth     uint8 // outstanding READs/atomics this side issues (max_rd_atomic)
	RetryCount         uint8 // 0..7
	RNRRetryCount      uint8 // 0..7, 7 = infinite
	// QPN is the QP of a Connect or Accept without one: the consumer moves it through
	// its states itself, with InitQPAttr (rdma_conn_param.qp_num).
	QPN roce.QPN
}

// CMEventType is what a CM event reports; the values are librdmacm's enum
// rdma_cm_event_type.
type CMEventType uint8

// CM events.
const (
	CMEventAddrResolved    CMEventType = 0
	CMEventAddrError       CMEventType = 1
	CMEventRouteResolved   CMEventType = 2
	CMEventConnectRequest  CMEventType = 4
	CMEventConnectResponse CMEventType = 5
	CMEventUnreachable     CMEventType = 7
	CMEventRejected        CMEventType = 8
	CMEventEstablished     CMEventType = 9
	CMEventDisconnected    CMEventType = 10
)

var cmEventNames = map[CMEventType]string{
	CMEventAddrResolved: "ADDR_RESOLVED", CMEventAddrError: "ADDR_ERROR", CMEventRouteResolved: "ROUTE_RESOLVED",
	CMEventConnectRequest: "CONNECT_REQUEST", CMEventConnectResponse: "CONNECT_RESPONSE", CMEventUnreachable: "UNREACHABLE", CMEventRejected: "REJECTED",
	CMEventEstablished: "ESTABLISHED", CMEventDisconnected: "DISCONNECTED",
}

// String returns the event's name as librdmacm spells it (RDMA_CM_EVENT_...).
func (t CMEventType) String() string { return "RDMA_CM_EVENT_" + cmEventNames[t] }

// Errors of the verbs calls, as rdma-core returns errno values for them. Each returned
// error wraps one of these with what exactly was wrong; test with errors.Is.
var (
	ErrInvalidArgument = errors.New("invalid argument")        // EINVAL
	ErrNoMemory        = errors.New("out of resources")        // ENOMEM
	ErrBusy            = errors.New("object in use")           // EBUSY
	ErrNotFound        = errors.New("no such object")          // ENOENT
	ErrUnresolved      = errors.New("neighbour not resolved")  // EHOSTUNREACH (rxe fails RTR so)
	ErrClosed          = errors.New("device closed")           // ENODEV
	ErrNotSupported    = errors.New("operation not supported") // EOPNOTSUPP
	// The CM agent's port allocation, as the kernel's rdma_cm (cma_check_port).
	ErrAddrInUse        = errors.New("address in use")        // EADDRINUSE
	ErrAddrNotAvailable = errors.New("address not available") // EADDRNOTAVAIL
)

// Device limits (ibv_device_attr), modest like rxe's.
const (
	MaxQP  = 1 << 16
	MaxWR  = 1 << 14
	MaxSGE = 32
	MaxCQE = 1 << 20
)

// The environment a verbs client reads to find its service. `rocelab exec` sets EnvLab
// and EnvHost for every process it starts in a host; EnvSocket overrides both.
const (
	EnvSocket = "ROCELAB_VERBS_SOCKET"
	EnvLab    = "ROCELAB_LAB"
	EnvHost   = "ROCELAB_HOST"
)

// Address is the abstract socket address of host's verbs service in lab: the string
// "@rocelab/<lab>/<host>/verbs" ('@' is Go's spelling of the abstract namespace's
// leading NUL byte). Abstract names are scoped to the network namespace, so the same
// address in two hosts' namespaces names two services.
func Address(lab, host string) string { return "@rocelab/" + lab + "/" + host + "/verbs" }
