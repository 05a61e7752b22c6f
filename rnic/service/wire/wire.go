// Package wire is the verbs service's protocol: the control messages a client and the
// lab's verbs service exchange over the SOCK_SEQPACKET socket, and the layout of the
// work-queue and completion-queue rings they share in memory. Both sides (package
// rnic/service and package rnic/verbs) use it; docs/verbs-service.md documents the
// same formats for other implementations.
//
// Every control message is one datagram: a fixed 8-byte header, then one fixed-size
// little-endian struct (encoding/binary), then nothing. File descriptors travel as
// SCM_RIGHTS ancillary data of the same datagram. A response carries the request's op;
// a non-zero Status is an error class (Code) and the payload is then the error's text.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
)

// Version is the protocol version this package speaks. A client sends the range it
// speaks in Hello; the server answers with the one it picked or fails the Hello.
const Version = 1

// MaxMessage bounds a control datagram, error texts included.
const MaxMessage = 4096

// MaxFDs bounds the descriptors one message carries.
const MaxFDs = 2

// Op names a control call.
type Op uint16

// Control calls. Values are part of the protocol: never renumber.
const (
	OpHello             Op = 1
	OpQueryDevice       Op = 2
	OpQueryPort         Op = 3
	OpQueryGID          Op = 4
	OpAllocPD           Op = 5
	OpDeallocPD         Op = 6
	OpRegMR             Op = 7
	OpDeregMR           Op = 8
	OpCreateCompChannel Op = 9
	OpDestroyCompChan   Op = 10
	OpCreateCQ          Op = 11
	OpDestroyCQ         Op = 12
	OpCreateSRQ         Op = 13
	OpModifySRQ         Op = 14
	OpDestroySRQ        Op = 15
	OpCreateAH          Op = 16
	OpDestroyAH         Op = 17
	OpCreateQP          Op = 18
	OpModifyQP          Op = 19
	OpQueryQP           Op = 20
	OpDestroyQP         Op = 21
	OpAsyncFD           Op = 22 // carries the eventfd the service increments per asynchronous event
	OpGetAsyncEvent     Op = 23 // answered by AsyncEvent, or CodeNotFound when none is pending
	OpResizeCQ          Op = 24 // answered by RingResp with the new ring's memfd
	OpResizeSRQ         Op = 25 // answered by RingResp with the new ring's memfd
	OpReregMR           Op = 26
	OpAttachMcast       Op = 27 // Mcast
	OpDetachMcast       Op = 28 // Mcast
	OpAllocMW           Op = 29 // answered by MWResp
	OpDeallocMW         Op = 30
	OpOpenXRCD          Op = 31 // OpenXRCD; answered by Handle
	OpCloseXRCD         Op = 32 // Handle
	OpCreateXRCSRQ      Op = 33 // answered by XRCSRQResp with the SRQ ring's memfd
	OpOpenQP            Op = 34 // OpenQP; answered by QPResp, without rings
	opMax               Op = 35
)

var opNames = [...]string{"", "HELLO", "QUERY_DEVICE", "QUERY_PORT", "QUERY_GID", "ALLOC_PD", "DEALLOC_PD",
	"REG_MR", "DEREG_MR", "CREATE_COMP_CHANNEL", "DESTROY_COMP_CHANNEL", "CREATE_CQ", "DESTROY_CQ",
	"CREATE_SRQ", "MODIFY_SRQ", "DESTROY_SRQ", "CREATE_AH", "DESTROY_AH", "CREATE_QP", "MODIFY_QP",
	"QUERY_QP", "DESTROY_QP", "ASYNC_FD", "GET_ASYNC_EVENT", "RESIZE_CQ", "RESIZE_SRQ", "REREG_MR",
	"ATTACH_MCAST", "DETACH_MCAST",
	"ALLOC_MW", "DEALLOC_MW", "OPEN_XRCD", "CLOSE_XRCD", "CREATE_XRC_SRQ", "OPEN_QP"}

// String returns the operation's name, for logs and errors.
func (o Op) String() string {
	if o > 0 && o < opMax {
		return opNames[o]
	}
	if o >= OpCMCreateChannel && o < opCMMax {
		return cmOpNames[o-OpCMCreateChannel]
	}
	return fmt.Sprintf("op(%d)", uint16(o))
}

// Header starts every datagram. A request's third field is a sequence number (for
// traces; calls are strictly one at a time per connection), a response's is its Code.
//
//	 0               2               4                               8
//	+---------------+---------------+-------------------------------+
//	| Version (u16) | Op (u16)      | Seq (request) / Status (resp) |
//	+---------------+---------------+-------------------------------+
type Header struct {
	Version uint16
	Op      Op
	Word    uint32 // request: sequence number; response: Code (0 = success)
}

// HeaderSize is the size of Header on the wire.
const HeaderSize = 8

// Code is an error class on the wire. Each maps to one sentinel error, so that the
// client's errors satisfy errors.Is against the same sentinels as the rnic's.
type Code uint32

// Error classes. Values are part of the protocol.
const (
	CodeOK              Code = 0
	CodeInvalidArgument Code = 1  // ibv.ErrInvalidArgument (EINVAL)
	CodeNoMemory        Code = 2  // ibv.ErrNoMemory (ENOMEM)
	CodeBusy            Code = 3  // ibv.ErrBusy (EBUSY)
	CodeNotFound        Code = 4  // ibv.ErrNotFound (ENOENT)
	CodeUnresolved      Code = 5  // ibv.ErrUnresolved (EHOSTUNREACH)
	CodeClosed          Code = 6  // ibv.ErrClosed (ENODEV)
	CodeNotSupported    Code = 7  // ibv.ErrNotSupported (EOPNOTSUPP)
	CodePermission      Code = 8  // ErrPermission (EPERM): SO_PEERCRED refused
	CodeProtocol        Code = 9  // ErrProtocol: malformed message or version mismatch
	CodeTooManyFiles    Code = 10 // ErrTooManyFiles (EMFILE): a descriptor budget is spent
	CodeAddrInUse       Code = 11 // ibv.ErrAddrInUse (EADDRINUSE)
	CodeAddrNotAvail    Code = 12 // ibv.ErrAddrNotAvailable (EADDRNOTAVAIL)
)

// Errors of the service that the rnic has no sentinel for.
var (
	ErrPermission = errors.New("permission denied")
	ErrProtocol   = errors.New("verbs protocol error")
	// ErrTooManyFiles: the lab process's descriptors the client, its host or the lab
	// may hold are spent (EMFILE, as the kernel's open answers at RLIMIT_NOFILE).
	ErrTooManyFiles = errors.New("too many open files")
)

var codeErrors = [...]error{nil, ibv.ErrInvalidArgument, ibv.ErrNoMemory, ibv.ErrBusy, ibv.ErrNotFound,
	ibv.ErrUnresolved, ibv.ErrClosed, ibv.ErrNotSupported, ErrPermission, ErrProtocol, ErrTooManyFiles,
	ibv.ErrAddrInUse, ibv.ErrAddrNotAvailable}

// CodeOf classifies err by the sentinel it wraps; unknown errors are invalid arguments,
// as the rnic reports every bad verbs input.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	for c := CodeInvalidArgument; int(c) < len(codeErrors); c++ {
		if errors.Is(err, codeErrors[c]) {
			return c
		}
	}
	return CodeInvalidArgument
}

// RemoteError is an error the service returned: its class and its text.
type RemoteError struct {
	Code Code
	Op   Op
	Msg  string
}

// Error names the operation and the service's message.
func (e *RemoteError) Error() string { return fmt.Sprintf("verbs %v: %s", e.Op, e.Msg) }

// Unwrap returns the class's sentinel, so errors.Is(err, ibv.ErrBusy) works.
func (e *RemoteError) Unwrap() error {
	if int(e.Code) < len(codeErrors) && e.Code != CodeOK {
		return codeErrors[e.Code]
	}
	return ErrProtocol
}

// AppendRequest appends a request datagram: header and body (a fixed-size struct or nil).
func AppendRequest(b []byte, op Op, seq uint32, body any) []byte {
	b = appendHeader(b, Header{Version: Version, Op: op, Word: seq})
	if body != nil {
		var err error
		if b, err = binary.Append(b, binary.LittleEndian, body); err != nil {
			panic("wire: " + err.Error()) // a programming error: bodies are fixed-size structs
		}
	}
	return b
}

// AppendResponse appends a success response with body (or nil).
func AppendResponse(b []byte, op Op, body any) []byte {
	return AppendRequest(b[:0], op, uint32(CodeOK), body)
}

// AppendError appends an error response for err.
func AppendError(b []byte, op Op, err error) []byte {
	b = appendHeader(b[:0], Header{Version: Version, Op: op, Word: uint32(CodeOf(err))})
	msg := err.Error()
	if len(msg) > MaxMessage-HeaderSize {
		msg = msg[:MaxMessage-HeaderSize]
	}
	return append(b, msg...)
}

func appendHeader(b []byte, h Header) []byte {
	b = binary.LittleEndian.AppendUint16(b, h.Version)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Op))
	return binary.LittleEndian.AppendUint32(b, h.Word)
}

// ParseHeader splits a datagram into its header and body.
func ParseHeader(msg []byte) (Header, []byte, error) {
	if len(msg) < HeaderSize {
		return Header{}, nil, fmt.Errorf("%w: %d-byte message is shorter than its header", ErrProtocol, len(msg))
	}
	h := Header{Version: binary.LittleEndian.Uint16(msg), Op: Op(binary.LittleEndian.Uint16(msg[2:])),
		Word: binary.LittleEndian.Uint32(msg[4:])}
	if h.Version != Version {
		return h, nil, fmt.Errorf("%w: version %d, this side speaks %d", ErrProtocol, h.Version, Version)
	}
	return h, msg[HeaderSize:], nil
}

// DecodeBody decodes body into v, a pointer to a fixed-size struct, which must use
// every byte.
func DecodeBody(body []byte, v any) error {
	if n := binary.Size(v); n != len(body) {
		return fmt.Errorf("%w: body of %d bytes, want %d", ErrProtocol, len(body), n)
	}
	if _, err := binary.Decode(body, binary.LittleEndian, v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: short body", ErrProtocol)
		}
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// ParseResponse checks a response to op and decodes its body into v (nil: none).
func ParseResponse(msg []byte, op Op, v any) error {
	h, body, err := ParseHeader(msg)
	if err != nil {
		return err
	}
	if h.Op != op {
		return fmt.Errorf("%w: response to %v, want %v", ErrProtocol, h.Op, op)
	}
	if c := Code(h.Word); c != CodeOK {
		return &RemoteError{Code: c, Op: op, Msg: string(body)}
	}
	if v == nil {
		if len(body) != 0 {
			return fmt.Errorf("%w: %v response has a %d-byte body", ErrProtocol, op, len(body))
		}
		return nil
	}
	return DecodeBody(body, v)
}

// Message bodies. Every one is a fixed-size struct of fixed-size fields, encoded
// little-endian in field order without padding; docs/verbs-service.md tables them.

// Hello opens a connection. The response carries two descriptors: the connection's
// doorbell eventfd and its doorbell page (a sealed memfd of PageSize bytes).
type Hello struct{ MinVersion, MaxVersion uint16 }

// HelloResp answers Hello.
type HelloResp struct {
	Version  uint16
	_        uint16
	PageSize uint32
	PID      uint32 // the lab process, for diagnostics
	_        uint32
}

// Handle names an object of the connection (PD, MR, CQ, ...); 0 means none.
type Handle struct{ Handle uint32 }

// AsyncEvent answers OpGetAsyncEvent: the oldest asynchronous event of the
// connection's objects. Type is an ibv_event_type; Handle names the CQ (CQ_ERR), the
// SRQ (SRQ_LIMIT_REACHED) or the QP (the others) it is about.
type AsyncEvent struct {
	Type, Handle uint32
}

// DeviceAttr answers QueryDevice.
type DeviceAttr struct {
	NodeGUID                                          uint64
	MaxQP, MaxQPWR, MaxSGE, MaxCQE                    uint32
	MaxQPRdAtom, MaxQPInitRdAtom, PhysPortCnt, MaxSRQ uint32
	FWVer                                             [32]byte
	// The multicast limits (rxe's): groups, QPs per group, attachments in all.
	MaxMcastGrp, MaxMcastQPAttach, MaxTotalMcastQPAttach uint32
	_                                                    uint32
}

// Mcast attaches QP Handle to (OpAttachMcast) or detaches it from (OpDetachMcast)
// the multicast group GID.
type Mcast struct {
	Handle uint32
	GID    [16]byte
}

// QueryPort asks for port Port's attributes.
type QueryPort struct {
	Port uint8
	_    [3]byte
}

// PortAttr answers QueryPort.
type PortAttr struct {
	MaxMTU, ActiveMTU uint16
	GIDTableLen       uint32
	MaxMsgSize        uint32
	_                 uint32
	Rate              uint64
	State             [16]byte
	LinkLayer         [16]byte
}

// QueryGID asks for GID Index.
type QueryGID struct{ Index uint32 }

// GID answers QueryGID.
type GID struct{ GID [16]byte }

// RegMR registers Length bytes at Offset of the memfd carried along, which the client
// addresses from Addr on. The memfd must be sealed against shrinking (F_SEAL_SHRINK),
// so that the lab process can never fault on pages a client truncated away.
type RegMR struct {
	PD     uint32
	Access uint32
	Length uint64
	Offset uint64
	Addr   uint64
}

// MRResp answers RegMR.
type MRResp struct{ Handle, LKey, RKey uint32 }

// AllocMW allocates a memory window of Type (ibv_mw_type: 1 or 2) in PD. The client
// binds it by posting a BIND_MW send WQE naming its rkey.
type AllocMW struct{ PD, Type uint32 }

// MWResp answers AllocMW: the window's handle and initial rkey.
type MWResp struct{ Handle, RKey uint32 }

// CreateCQ creates a CQ of at least CQE entries bound to completion channel Channel
// (0: none). The response carries the CQ ring's memfd.
type CreateCQ struct{ CQE, Channel uint32 }

// RingResp answers the calls that create a ring: the object's handle, the ring's
// capacity (a power of two), entry size and the memfd's size.
type RingResp struct {
	Handle    uint32
	Cap       uint32
	EntrySize uint32
	_         uint32
	Size      uint64
}

// CreateSRQ creates an SRQ; the response (RingResp) carries its receive ring.
type CreateSRQ struct{ PD, MaxWR, MaxSGE uint32 }

// Resize resizes the CQ (OpResizeCQ) or SRQ (OpResizeSRQ) Handle to hold at least
// Entries. The response's ring replaces the old one: the service copies the entries
// not yet consumed to the same indices (modulo the new capacity), so the ring's
// producer and consumer indices, and a CQ's event count, carry on.
type Resize struct{ Handle, Entries uint32 }

// ReregMR changes MR Handle's PD (ChangePD: to PD) and access flags (ChangeAccess:
// to Access), keeping its keys (ibv_rereg_mr's CHANGE_PD and CHANGE_ACCESS, as rxe).
type ReregMR struct {
	Handle, PD, Access        uint32
	ChangePD, ChangeAccess, _ uint16
	_                         uint16
}

// ModifySRQ arms the SRQ's limit.
type ModifySRQ struct{ Handle, Limit uint32 }

// CreateAH creates an address handle towards DGID.
type CreateAH struct {
	PD           uint32
	SGIDIndex    uint32
	DGID         [16]byte
	TrafficClass uint8
	HopLimit     uint8
	_            uint16
	FlowLabel    uint32
}

// OpenXRCD opens an XRC domain (ibv_open_xrcd). HasFile 0 opens a private domain (fd
// -1); otherwise the domain of the file Dev/Ino (the client's fstat of its fd), which
// OFlags (O_CREAT, O_EXCL of <fcntl.h>) may create.
type OpenXRCD struct {
	Dev, Ino        uint64
	OFlags, HasFile uint32
}

// CreateXRCSRQ creates an XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC) in PD and XRC
// domain XRCD whose receive completions go to CQ.
type CreateXRCSRQ struct {
	PD, MaxWR, MaxSGE, XRCD, CQ, _ uint32
}

// XRCSRQResp answers CreateXRCSRQ: the SRQ's ring (as RingResp) and its number
// (ibv_get_srq_num).
type XRCSRQResp struct {
	Ring RingResp
	SRQN uint32
	_    uint32
}

// OpenQP opens the XRC_RECV QP numbered QPN of XRC domain XRCD (ibv_open_qp).
type OpenQP struct{ XRCD, QPN uint32 }

// CreateQP creates a QP. The response carries one memfd holding the send ring at
// SQOffset and the receive ring at RQOffset (no receive ring with an SRQ). An
// XRC_SEND QP has no receive CQ or ring; an XRC_RECV QP names its XRC domain in PD
// (as the kernel's uverbs does), has no CQs, and its send ring, of one entry, only
// carries the QP's state.
type CreateQP struct {
	PD, SendCQ, RecvCQ, SRQ                      uint32
	Type                                         uint8
	SigAll                                       uint8
	_                                            uint16
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE uint32
}

// QPResp answers CreateQP with the actual capacities.
type QPResp struct {
	Handle, QPN                                  uint32
	MaxSendWR, MaxRecvWR, MaxSendSGE, MaxRecvSGE uint32
	SendEntry, RecvEntry                         uint32
	SQOffset, RQOffset, Size                     uint64
}

// ModifyQP is ibv_modify_qp.
type ModifyQP struct {
	Handle uint32
	Mask   uint32
	Attr   QPAttr
}

// QPAttr is qp.Attr on the wire.
type QPAttr struct {
	State, CurState, EnSQDAsyncNotify, Port       uint8
	AccessFlags                                   uint32
	PKeyIndex                                     uint16
	PathMTU                                       uint16
	QKey                                          uint32
	DGID, SGID                                    [16]byte
	DstMAC, SrcMAC                                [6]byte
	TrafficClass, HopLimit                        uint8
	Timeout, RetryCnt, RNRRetry, MaxRdAtomic      uint8
	MinRNRTimer, MaxDestRdAtomic, PathMigState, _ uint8
	FlowLabel                                     uint32
	RQPSN, SQPSN, DestQPN                         uint32
}

// FromQPAttr converts a qp.Attr.
func FromQPAttr(a *qp.Attr) QPAttr {
	b2u := func(b bool) uint8 {
		if b {
			return 1
		}
		return 0
	}
	return QPAttr{State: uint8(a.State), CurState: uint8(a.CurState), EnSQDAsyncNotify: b2u(a.EnSQDAsyncNotify),
		Port: a.Port, AccessFlags: uint32(a.AccessFlags), PKeyIndex: a.PKeyIndex, PathMTU: uint16(a.PathMTU),
		QKey: a.QKey, DGID: a.AV.DGID, SGID: a.AV.SGID, DstMAC: a.AV.DstMAC, SrcMAC: a.AV.SrcMAC,
		TrafficClass: a.AV.TrafficClass, HopLimit: a.AV.HopLimit, Timeout: a.Timeout, RetryCnt: a.RetryCnt,
		RNRRetry: a.RNRRetry, MaxRdAtomic: a.MaxRdAtomic, MinRNRTimer: a.MinRNRTimer,
		MaxDestRdAtomic: a.MaxDestRdAtomic, PathMigState: uint8(a.PathMigState), FlowLabel: a.AV.FlowLabel,
		RQPSN: uint32(a.RQPSN), SQPSN: uint32(a.SQPSN), DestQPN: uint32(a.DestQPN)}
}

// QP converts back to a qp.Attr.
func (w *QPAttr) QP() qp.Attr {
	var a qp.Attr
	a.State, a.CurState, a.EnSQDAsyncNotify, a.Port = qp.State(w.State), qp.State(w.CurState), w.EnSQDAsyncNotify != 0, w.Port
	a.AccessFlags, a.PKeyIndex, a.PathMTU, a.QKey = qp.Access(w.AccessFlags), w.PKeyIndex, roceMTU(w.PathMTU), w.QKey
	a.AV.DGID, a.AV.SGID, a.AV.DstMAC, a.AV.SrcMAC = w.DGID, w.SGID, w.DstMAC, w.SrcMAC
	a.AV.TrafficClass, a.AV.HopLimit, a.AV.FlowLabel = w.TrafficClass, w.HopLimit, w.FlowLabel
	a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = w.Timeout, w.RetryCnt, w.RNRRetry, w.MaxRdAtomic
	a.MinRNRTimer, a.MaxDestRdAtomic, a.PathMigState = w.MinRNRTimer, w.MaxDestRdAtomic, qp.MigState(w.PathMigState)
	a.RQPSN, a.SQPSN, a.DestQPN = rocePSN(w.RQPSN), rocePSN(w.SQPSN), roceQPN(w.DestQPN)
	return a
}

// Fixed-size string fields: NUL-padded.
func PutString(dst []byte, s string) { copy(dst, s) }

// GetString returns a NUL-padded field as a string.
func GetString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
