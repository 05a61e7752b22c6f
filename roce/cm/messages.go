package cm

import (
	"encoding/binary"

	"github.com/rocelab/rocelab/roce"
)

// REP is a view of a ConnectReply MAD (IBTA 12.6.8).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Communication ID                        | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Q_Key                                    | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local QPN                      |   Reserved    | 36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local EE Context Number        |   Reserved    | 40
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Starting PSN                   |   Reserved    | 44
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Resp. Res.   |  Init. Depth  |TgtAckDly|FA |F| RNR |S| Resv. | 48
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local CA GUID (64 bits)                        | 52
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (196 bytes)                       | 60
//
// TgtAckDly = target ACK delay (5 bits), FA = failover accepted, F = end-to-end flow
// control, RNR = RNR retry count, S = SRQ.
type REP []byte

// REPPrivateDataSize is the size of a REP's private data.
const REPPrivateDataSize = 196

// REPFields holds the values of a REP, for Encode.
type REPFields struct {
	LocalCommID         uint32
	RemoteCommID        uint32
	LocalQKey           uint32
	LocalQPN            roce.QPN
	LocalEECN           uint32
	StartingPSN         roce.PSN
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
}

func (r REP) MAD() MAD                  { return MAD(r) }
func (r REP) LocalCommID() uint32       { return localCommID(r) }
func (r REP) RemoteCommID() uint32      { return remoteCommID(r) }
func (r REP) LocalQKey() uint32         { return binary.BigEndian.Uint32(r[32:]) }
func (r REP) LocalQPN() roce.QPN        { return roce.QPN(uint24(r[36:])) }
func (r REP) LocalEECN() uint32         { return uint24(r[40:]) }
func (r REP) StartingPSN() roce.PSN     { return roce.PSN(uint24(r[44:])) }
func (r REP) ResponderResources() uint8 { return r[48] }
func (r REP) InitiatorDepth() uint8     { return r[49] }
func (r REP) TargetACKDelay() uint8     { return r[50] >> 3 }
func (r REP) FailoverAccepted() uint8   { return r[50] >> 1 & 3 }
func (r REP) EndToEndFlowControl() bool { return r[50]&1 != 0 }
func (r REP) RNRRetryCount() uint8      { return r[51] >> 5 }
func (r REP) SRQ() bool                 { return r[51]&0x10 != 0 }
func (r REP) LocalCAGUID() uint64       { return binary.BigEndian.Uint64(r[52:]) }
func (r REP) PrivateData() []byte       { return r[60:MADSize] }

// Fields returns the message's values.
func (r REP) Fields() REPFields {
	return REPFields{
		LocalCommID: r.LocalCommID(), RemoteCommID: r.RemoteCommID(), LocalQKey: r.LocalQKey(),
		LocalQPN: r.LocalQPN(), LocalEECN: r.LocalEECN(), StartingPSN: r.StartingPSN(),
		ResponderResources: r.ResponderResources(), InitiatorDepth: r.InitiatorDepth(),
		TargetACKDelay: r.TargetACKDelay(), FailoverAccepted: r.FailoverAccepted(),
		EndToEndFlowControl: r.EndToEndFlowControl(), RNRRetryCount: r.RNRRetryCount(),
		SRQ: r.SRQ(), LocalCAGUID: r.LocalCAGUID(),
	}
}

// Encode writes every field of f after the MAD header, reserved bits as zero; the
// private data is left as it is.
func (r REP) Encode(f *REPFields) {
	clear(r[24:60])
	binary.BigEndian.PutUint32(r[24:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[28:], f.RemoteCommID)
	binary.BigEndian.PutUint32(r[32:], f.LocalQKey)
	setUint24(r[36:], uint32(f.LocalQPN))
	setUint24(r[40:], f.LocalEECN)
	setUint24(r[44:], uint32(f.StartingPSN))
	r[48], r[49] = f.ResponderResources, f.InitiatorDepth
	r[50] = f.TargetACKDelay<<3 | f.FailoverAccepted&3<<1 | boolBit(f.EndToEndFlowControl, 1)
	r[51] = f.RNRRetryCount<<5 | boolBit(f.SRQ, 0x10)
	binary.BigEndian.PutUint64(r[52:], f.LocalCAGUID)
}

// Pair is a view of the messages that carry nothing but the two communication IDs and
// private data: RTU (IBTA 12.6.9) and DREP (12.6.11).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Communication ID                        | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (224 bytes)                       | 32
type Pair []byte

func (p Pair) MAD() MAD             { return MAD(p) }
func (p Pair) LocalCommID() uint32  { return localCommID(p) }
func (p Pair) RemoteCommID() uint32 { return remoteCommID(p) }
func (p Pair) PrivateData() []byte  { return p[32:MADSize] }

// Encode writes both communication IDs.
func (p Pair) Encode(local, remote uint32) {
	binary.BigEndian.PutUint32(p[24:], local)
	binary.BigEndian.PutUint32(p[28:], remote)
}

// DREQ is a view of a DisconnectRequest MAD (IBTA 12.6.10).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Communication ID                        | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote QPN/EECN                |   Reserved    | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (220 bytes)                       | 36
type DREQ []byte

func (d DREQ) MAD() MAD             { return MAD(d) }
func (d DREQ) LocalCommID() uint32  { return localCommID(d) }
func (d DREQ) RemoteCommID() uint32 { return remoteCommID(d) }
func (d DREQ) RemoteQPN() roce.QPN  { return roce.QPN(uint24(d[32:])) }
func (d DREQ) PrivateData() []byte  { return d[36:MADSize] }

// Encode writes the communication IDs and the remote QPN, the reserved byte as zero.
func (d DREQ) Encode(local, remote uint32, remoteQPN roce.QPN) {
	Pair(d).Encode(local, remote)
	setUint24(d[32:], uint32(remoteQPN))
	d[35] = 0
}

// Messages an MRA or REJ refers to (IBTA 12.6.6, 12.6.7).
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2 // REJ: another message; MRA: a LAP
)

// MRA is a view of a MessageReceiptAcknowledgement MAD (IBTA 12.6.6): "I got your
// message, give me longer to answer".
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Communication ID                        | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|MM | Reserved  |SvcTmo   |Res. |  Private Data (222 bytes) ... | 32
//
// MM = message MRAed (MsgREQ, MsgREP, MsgOther); SvcTmo = service timeout (5 bits).
type MRA []byte

func (m MRA) MAD() MAD              { return MAD(m) }
func (m MRA) LocalCommID() uint32   { return localCommID(m) }
func (m MRA) RemoteCommID() uint32  { return remoteCommID(m) }
func (m MRA) MessageMRAed() uint8   { return m[32] >> 6 }
func (m MRA) ServiceTimeout() uint8 { return m[33] >> 3 }
func (m MRA) PrivateData() []byte   { return m[34:MADSize] }

// Encode writes the message's fields, reserved bits as zero.
func (m MRA) Encode(local, remote uint32, msg, serviceTimeout uint8) {
	Pair(m).Encode(local, remote)
	m[32], m[33] = msg<<6, serviceTimeout<<3
}

// REJ is a view of a ConnectReject MAD (IBTA 12.6.7).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Communication ID                        | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|MR | Reserved  |  ARILen     |R|            Reason             | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Additional Reject Information (72 bytes)              | 36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (148 bytes)                       | 108
//
// MR = message rejected (MsgREQ, MsgREP, MsgOther); ARILen = the length of the ARI
// that is meaningful (7 bits, at most 72).
type REJ []byte

const rejARISize = 72

// REJ reasons (IBTA table 112; the kernel's enum ib_cm_rej_reason).
const (
	RejNoQP                 uint16 = 1
	RejNoResources          uint16 = 3
	RejTimeout              uint16 = 4
	RejUnsupported          uint16 = 5
	RejInvalidCommID        uint16 = 6
	RejInvalidCommInstance  uint16 = 7
	RejInvalidServiceID     uint16 = 8
	RejInvalidTransportType uint16 = 9
	RejStaleConn            uint16 = 10
	RejInvalidGID           uint16 = 12
	RejInvalidMTU           uint16 = 26
	RejInsufficientRespRes  uint16 = 27
	RejConsumerDefined      uint16 = 28
	RejInvalidRNRRetry      uint16 = 29
	RejDuplicateLocalCommID uint16 = 30
	RejInvalidClassVersion  uint16 = 31
)

func (r REJ) MAD() MAD               { return MAD(r) }
func (r REJ) LocalCommID() uint32    { return localCommID(r) }
func (r REJ) RemoteCommID() uint32   { return remoteCommID(r) }
func (r REJ) MessageRejected() uint8 { return r[32] >> 6 }
func (r REJ) RejectInfoLength() int  { return int(r[33] >> 1) }
func (r REJ) Reason() uint16         { return binary.BigEndian.Uint16(r[34:]) }
func (r REJ) ARI() []byte            { return r[36 : 36+r.RejectInfoLength()] }
func (r REJ) PrivateData() []byte    { return r[108:MADSize] }

// Encode writes the message's fields and ari (at most 72 bytes; more is cut), the
// rest of the ARI field and reserved bits as zero.
func (r REJ) Encode(local, remote uint32, msg uint8, reason uint16, ari []byte) {
	Pair(r).Encode(local, remote)
	clear(r[36:108])
	n := copy(r[36:108], ari)
	r[32], r[33] = msg<<6, byte(n)<<1
	binary.BigEndian.PutUint16(r[34:], reason)
}

// SIDRREQ is a view of a ServiceIDResolutionRequest MAD (IBTA 12.11.8): how a UD
// consumer (rdma_cm's UDP port space, udaddy) asks for the QPN behind a service ID.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Request ID                                     | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            P_Key              |           Reserved            | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                ServiceID (64 bits)                            | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (216 bytes)                       | 40
type SIDRREQ []byte

// SIDRREQPrivateDataSize is the size of a SIDR_REQ's private data.
const SIDRREQPrivateDataSize = 216

func (s SIDRREQ) MAD() MAD             { return MAD(s) }
func (s SIDRREQ) RequestID() uint32    { return localCommID(s) }
func (s SIDRREQ) PKey() roce.PKey      { return roce.PKey(binary.BigEndian.Uint16(s[28:])) }
func (s SIDRREQ) ServiceID() ServiceID { return ServiceID(binary.BigEndian.Uint64(s[32:])) }
func (s SIDRREQ) PrivateData() []byte  { return s[40:MADSize] }

// Encode writes the message's fields, reserved bits as zero.
func (s SIDRREQ) Encode(requestID uint32, pkey roce.PKey, sid ServiceID) {
	binary.BigEndian.PutUint32(s[24:], requestID)
	binary.BigEndian.PutUint16(s[28:], uint16(pkey))
	binary.BigEndian.PutUint16(s[30:], 0)
	binary.BigEndian.PutUint64(s[32:], uint64(sid))
}

// SIDRREP is a view of a ServiceIDResolutionResponse MAD (IBTA 12.11.9).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Request ID                                     | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Status     |  AddInfoLen   |           Reserved            | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                QPN                            |   Reserved    | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                ServiceID (64 bits)                            | 36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Q_Key                                          | 44
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         ClassPortInfo (72 bytes, for a redirect)              | 48
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (136 bytes)                       | 120
type SIDRREP []byte

// SIDRREPPrivateDataSize is the size of a SIDR_REP's private data.
const SIDRREPPrivateDataSize = 136

// SIDR_REP status values (IBTA 12.11.9).
const (
	SIDRValid           uint8 = 0
	SIDRServiceNotFound uint8 = 1
	SIDRRejected        uint8 = 2
	SIDRNoQP            uint8 = 3
	SIDRRedirect        uint8 = 4
	SIDRUnsupported     uint8 = 5
)

func (s SIDRREP) MAD() MAD             { return MAD(s) }
func (s SIDRREP) RequestID() uint32    { return localCommID(s) }
func (s SIDRREP) Status() uint8        { return s[28] }
func (s SIDRREP) QPN() roce.QPN        { return roce.QPN(uint24(s[32:])) }
func (s SIDRREP) ServiceID() ServiceID { return ServiceID(binary.BigEndian.Uint64(s[36:])) }
func (s SIDRREP) QKey() uint32         { return binary.BigEndian.Uint32(s[44:]) }
func (s SIDRREP) PrivateData() []byte  { return s[120:MADSize] }

// Encode writes the message's fields, the additional information and reserved bits
// as zero.
func (s SIDRREP) Encode(requestID uint32, status uint8, qpn roce.QPN, sid ServiceID, qkey uint32) {
	clear(s[24:120])
	binary.BigEndian.PutUint32(s[24:], requestID)
	s[28] = status
	setUint24(s[32:], uint32(qpn))
	binary.BigEndian.PutUint64(s[36:], uint64(sid))
	binary.BigEndian.PutUint32(s[44:], qkey)
}
