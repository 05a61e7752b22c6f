package roce

import "fmt"

// Opcode is a BTH opcode: the top three bits select the transport (000 RC, 001 UC,
// 010 RD, 011 UD, 100 CNP, 101 XRC, 110–111 manufacturer specific), the low five the operation.
type Opcode uint8

// Transport is the service an opcode belongs to.
type Transport uint8

// Transports of the opcode table.
const (
	TransportRC Transport = iota + 1
	TransportUC
	TransportUD
	TransportCNP
	// TransportVendor marks rocelab's manufacturer-specific opcodes (telemetry probes).
	TransportVendor
	// TransportXRC is the eXtended Reliable Connected service: RC's opcodes in group
	// 0b101, its requests carrying an XRCETH.
	TransportXRC
)

// String returns the transport's name as rxe spells it (RC, UC, UD, ...).
func (t Transport) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportUD:
		return "UD"
	case TransportCNP:
		return "CNP"
	case TransportVendor:
		return "VENDOR"
	case TransportXRC:
		return "XRC"
	}
	return "UNKNOWN"
}

// Headers is a set of extension headers, as carried by an opcode. They appear on the
// wire in the order of headerOrder (IBTA 9.2: DETH or XRCETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH), after the BTH. XRCETH is the last bit so that the values of
// the older constants stay as they were.
type Headers uint16

// Extension headers.
const (
	HdrDETH Headers = 1 << iota
	HdrRETH
	HdrAtomicETH
	HdrAETH
	HdrAtomicAckETH
	HdrImmDt
	HdrIETH
	HdrCNP // the CNP's 16 reserved bytes
	HdrXRCETH
)

// headerOrder lists the extension headers in wire order with their sizes.
var headerOrder = [...]struct {
	hdr  Headers
	size int
}{
	{HdrDETH, DETHSize},
	{HdrXRCETH, XRCETHSize}, // XRC requests: right after the BTH, before RETH/AtomicETH/ImmDt
	{HdrRETH, RETHSize},
	{HdrAtomicETH, AtomicETHSize},
	{HdrAETH, AETHSize},
	{HdrAtomicAckETH, AtomicAckETHSize},
	{HdrImmDt, ImmDtSize},
	{HdrIETH, IETHSize},
	{HdrCNP, CNPReservedSize},
}

// Size returns the number of bytes the headers occupy. Building and decoding ask for
// it several times per packet, so it is a table lookup.
func (h Headers) Size() int {
	if int(h) < len(headerSizes) {
		return int(headerSizes[h])
	}
	return h.sum()
}

// headerSizes holds the size of every set of the extension headers.
var headerSizes = func() (t [2 * HdrXRCETH]uint8) {
	for h := range t {
		t[h] = uint8(Headers(h).sum())
	}
	return t
}()

// sum adds the sizes of the headers in h.
func (h Headers) sum() int {
	n := 0
	for _, e := range headerOrder {
		if h&e.hdr != 0 {
			n += e.size
		}
	}
	return n
}

// Position is where a packet sits in a multi-packet message.
type Position uint8

// Positions. Acknowledgements and single-packet requests are Only.
const (
	PosFirst Position = iota + 1
	PosMiddle
	PosLast
	PosOnly
)

// Operation classifies what an opcode does.
type Operation uint8

// Operations.
const (
	OperationSend Operation = iota + 1
	OperationWrite
	OperationReadRequest
	OperationReadResponse
	OperationAck
	OperationAtomicAck
	OperationCompareSwap
	OperationFetchAdd
	OperationCNP
	OperationTelemetryRequest
	OperationTelemetryResponse
)

// OpcodeInfo describes one opcode of the table.
type OpcodeInfo struct {
	Name      string // e.g. "RC_RDMA_WRITE_FIRST", as rxe's IB_OPCODE_* without the prefix
	Transport Transport
	Operation Operation
	Position  Position
	Headers   Headers // extension headers after the BTH, in wire order
	Payload   bool    // whether the packet may carry payload
}

// Request reports whether the opcode is sent by a requester (as opposed to a responder's
// ACK or read response).
func (i *OpcodeInfo) Request() bool {
	switch i.Operation {
	case OperationReadResponse, OperationAck, OperationAtomicAck, OperationCNP, OperationTelemetryResponse:
		return false
	}
	return true
}

// Opcode values (IBTA table 38).
const (
	OpRCSendFirst          Opcode = 0x00
	OpRCSendMiddle         Opcode = 0x01
	OpRCSendLast           Opcode = 0x02
	OpRCSendLastImm        Opcode = 0x03
	OpRCSendOnly           Opcode = 0x04
	OpRCSendOnlyImm        Opcode = 0x05
	OpRCWriteFirst         Opcode = 0x06
	OpRCWriteMiddle        Opcode = 0x07
	OpRCWriteLast          Opcode = 0x08
	OpRCWriteLastImm       Opcode = 0x09
	OpRCWriteOnly          Opcode = 0x0A
	OpRCWriteOnlyImm       Opcode = 0x0B
	OpRCReadRequest        Opcode = 0x0C
	OpRCReadResponseFirst  Opcode = 0x0D
	OpRCReadResponseMiddle Opcode = 0x0E
	OpRCReadResponseLast   Opcode = 0x0F
	OpRCReadResponseOnly   Opcode = 0x10
	OpRCAck                Opcode = 0x11
	OpRCAtomicAck          Opcode = 0x12
	OpRCCompareSwap        Opcode = 0x13
	OpRCFetchAdd           Opcode = 0x14
	OpRCSendLastInv        Opcode = 0x16
	OpRCSendOnlyInv        Opcode = 0x17
	OpUCSendFirst          Opcode = 0x20
	OpUCSendMiddle         Opcode = 0x21
	OpUCSendLast           Opcode = 0x22
	OpUCSendLastImm        Opcode = 0x23
	OpUCSendOnly           Opcode = 0x24
	OpUCSendOnlyImm        Opcode = 0x25
	OpUCWriteFirst         Opcode = 0x26
	OpUCWriteMiddle        Opcode = 0x27
	OpUCWriteLast          Opcode = 0x28
	OpUCWriteLastImm       Opcode = 0x29
	OpUCWriteOnly          Opcode = 0x2A
	OpUCWriteOnlyImm       Opcode = 0x2B
	OpUDSendOnly           Opcode = 0x64
	OpUDSendOnlyImm        Opcode = 0x65
	OpCNP                  Opcode = 0x81
	// XRC opcodes are RC's plus 0xA0 (transport group 0b101); XRCBase+OpRC... names them.
	XRCBase             Opcode = 0xA0
	OpTelemetryRequest  Opcode = 0xC0
	OpTelemetryResponse Opcode = 0xC1
)

var opcodeTable [256]*OpcodeInfo

func init() {
	def := func(op Opcode, name string, t Transport, o Operation, p Position, h Headers, payload bool) {
		opcodeTable[op] = &OpcodeInfo{Name: name, Transport: t, Operation: o, Position: p, Headers: h, Payload: payload}
	}
	// RC and UC share SEND and WRITE opcodes in their low five bits.
	for _, tr := range []struct {
		t      Transport
		base   Opcode
		prefix string
	}{{TransportRC, 0x00, "RC_"}, {TransportUC, 0x20, "UC_"}} {
		b, p, t := tr.base, tr.prefix, tr.t
		def(b+0x00, p+"SEND_FIRST", t, OperationSend, PosFirst, 0, true)
		def(b+0x01, p+"SEND_MIDDLE", t, OperationSend, PosMiddle, 0, true)
		def(b+0x02, p+"SEND_LAST", t, OperationSend, PosLast, 0, true)
		def(b+0x03, p+"SEND_LAST_WITH_IMMEDIATE", t, OperationSend, PosLast, HdrImmDt, true)
		def(b+0x04, p+"SEND_ONLY", t, OperationSend, PosOnly, 0, true)
		def(b+0x05, p+"SEND_ONLY_WITH_IMMEDIATE", t, OperationSend, PosOnly, HdrImmDt, true)
		def(b+0x06, p+"RDMA_WRITE_FIRST", t, OperationWrite, PosFirst, HdrRETH, true)
		def(b+0x07, p+"RDMA_WRITE_MIDDLE", t, OperationWrite, PosMiddle, 0, true)
		def(b+0x08, p+"RDMA_WRITE_LAST", t, OperationWrite, PosLast, 0, true)
		def(b+0x09, p+"RDMA_WRITE_LAST_WITH_IMMEDIATE", t, OperationWrite, PosLast, HdrImmDt, true)
		def(b+0x0A, p+"RDMA_WRITE_ONLY", t, OperationWrite, PosOnly, HdrRETH, true)
		def(b+0x0B, p+"RDMA_WRITE_ONLY_WITH_IMMEDIATE", t, OperationWrite, PosOnly, HdrRETH|HdrImmDt, true)
	}
	def(OpRCReadRequest, "RC_RDMA_READ_REQUEST", TransportRC, OperationReadRequest, PosOnly, HdrRETH, false)
	def(OpRCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", TransportRC, OperationReadResponse, PosFirst, HdrAETH, true)
	def(OpRCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", TransportRC, OperationReadResponse, PosMiddle, 0, true)
	def(OpRCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", TransportRC, OperationReadResponse, PosLast, HdrAETH, true)
	def(OpRCReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", TransportRC, OperationReadResponse, PosOnly, HdrAETH, true)
	def(OpRCAck, "RC_ACKNOWLEDGE", TransportRC, OperationAck, PosOnly, HdrAETH, false)
	def(OpRCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", TransportRC, OperationAtomicAck, PosOnly, HdrAETH|HdrAtomicAckETH, false)
	def(OpRCCompareSwap, "RC_COMPARE_SWAP", TransportRC, OperationCompareSwap, PosOnly, HdrAtomicETH, false)
	def(OpRCFetchAdd, "RC_FETCH_ADD", TransportRC, OperationFetchAdd, PosOnly, HdrAtomicETH, false)
	def(OpRCSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", TransportRC, OperationSend, PosLast, HdrIETH, true)
	def(OpRCSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", TransportRC, OperationSend, PosOnly, HdrIETH, true)
	def(OpUDSendOnly, "UD_SEND_ONLY", TransportUD, OperationSend, PosOnly, HdrDETH, true)
	def(OpUDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", TransportUD, OperationSend, PosOnly, HdrDETH|HdrImmDt, true)
	def(OpCNP, "CNP", TransportCNP, OperationCNP, PosOnly, HdrCNP, false)
	// XRC is RC in transport group 0b101: every request carries an XRCETH naming the
	// target's XRC SRQ; responses carry none (IBTA Vol 1 annex A14, rdma-core's mlx5 WQEs).
	for op := OpRCSendFirst; op <= OpRCSendOnlyInv; op++ {
		rc := opcodeTable[op]
		if rc == nil {
			continue
		}
		h := rc.Headers
		if rc.Request() {
			h |= HdrXRCETH
		}
		def(XRCBase+op, "XRC_"+rc.Name[len("RC_"):], TransportXRC, rc.Operation, rc.Position, h, rc.Payload)
	}
	// rocelab's telemetry probe and response (docs/wire-format.md): the telemetry body is
	// the payload as far as this table is concerned; roce/telemetry parses it.
	def(OpTelemetryRequest, "ROCELAB_TELEMETRY_REQUEST", TransportVendor, OperationTelemetryRequest, PosOnly, 0, true)
	def(OpTelemetryResponse, "ROCELAB_TELEMETRY_RESPONSE", TransportVendor, OperationTelemetryResponse, PosOnly, 0, true)
}

// Info returns the opcode's table entry, or nil if the opcode is not in the table.
func (o Opcode) Info() *OpcodeInfo { return opcodeTable[o] }

// Known reports whether the opcode is in the table.
func (o Opcode) Known() bool { return opcodeTable[o] != nil }

// String returns the opcode's name, or "OPCODE_0xNN" for one outside the table.
func (o Opcode) String() string {
	if i := opcodeTable[o]; i != nil {
		return i.Name
	}
	return fmt.Sprintf("OPCODE_%#02x", uint8(o))
}
