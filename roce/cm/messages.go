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

// Offsets of the REP's fields from the start of the MAD.
const (
	repLocalQKey   = 32
	repLocalQPN    = 36 // 24 bits
	repLocalEECN   = 40 // 24 bits
	repStartingPSN = 44 // 24 bits
	repRespRes     = 48
	repInitDepth   = 49
	repAckDelayFFC = 50 // TgtAckDly (5 bits), FA (2), F (1)
	repRNRSRQ      = 51 // RNR retry count (3 bits), SRQ (1)
	repLocalCAGUID = 52
	repPrivateData = 60
	repSRQBit      = 0x10 // in repRNRSRQ
)

// MAD returns the message's MAD view.
func (r REP) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r REP) LocalCommID() uint32 { return localCommID(r) }

// RemoteCommID returns the REQ sender's communication ID.
func (r REP) RemoteCommID() uint32 { return remoteCommID(r) }

// LocalQKey returns the sender's Q_Key.
func (r REP) LocalQKey() uint32 { return binary.BigEndian.Uint32(r[repLocalQKey:]) }

// LocalQPN returns the sender's QP number.
func (r REP) LocalQPN() roce.QPN { return roce.QPN(uint24(r[repLocalQPN:])) }

// LocalEECN returns the sender's EE context number (RD only).
func (r REP) LocalEECN() uint32 { return uint24(r[repLocalEECN:]) }

// StartingPSN returns the PSN the sender's receive queue expects first.
func (r REP) StartingPSN() roce.PSN { return roce.PSN(uint24(r[repStartingPSN:])) }

// ResponderResources returns the RDMA READ and atomic requests the sender accepts at once.
func (r REP) ResponderResources() uint8 { return r[repRespRes] }

// InitiatorDepth returns the RDMA READ and atomic requests the sender issues at once.
func (r REP) InitiatorDepth() uint8 { return r[repInitDepth] }

// TargetACKDelay returns the target ACK delay code (5 bits).
func (r REP) TargetACKDelay() uint8 { return r[repAckDelayFFC] >> 3 }

// FailoverAccepted returns the failover code (2 bits).
func (r REP) FailoverAccepted() uint8 { return r[repAckDelayFFC] >> 1 & 3 }

// EndToEndFlowControl reports whether the sender uses end-to-end flow control.
func (r REP) EndToEndFlowControl() bool { return r[repAckDelayFFC]&1 != 0 }

// RNRRetryCount returns the RNR retry count (3 bits; 7 = infinite).
func (r REP) RNRRetryCount() uint8 { return r[repRNRSRQ] >> 5 }

// SRQ reports whether the sender's QP uses a shared receive queue.
func (r REP) SRQ() bool { return r[repRNRSRQ]&repSRQBit != 0 }

// LocalCAGUID returns the sender's channel adapter GUID.
func (r REP) LocalCAGUID() uint64 { return binary.BigEndian.Uint64(r[repLocalCAGUID:]) }

// PrivateData returns the consumer's private data.
func (r REP) PrivateData() []byte { return r[repPrivateData:MADSize] }

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
	clear(r[HeaderSize:repPrivateData])
	binary.BigEndian.PutUint32(r[cmLocalCommID:], f.LocalCommID)
	binary.BigEndian.PutUint32(r[cmRemoteCommID:], f.RemoteCommID)
	binary.BigEndian.PutUint32(r[repLocalQKey:], f.LocalQKey)
	setUint24(r[repLocalQPN:], uint32(f.LocalQPN))
	setUint24(r[repLocalEECN:], f.LocalEECN)
	setUint24(r[repStartingPSN:], uint32(f.StartingPSN))
	r[repRespRes], r[repInitDepth] = f.ResponderResources, f.InitiatorDepth
	r[repAckDelayFFC] = f.TargetACKDelay<<3 | f.FailoverAccepted&3<<1 | boolBit(f.EndToEndFlowControl, 1)
	r[repRNRSRQ] = f.RNRRetryCount<<5 | boolBit(f.SRQ, repSRQBit)
	binary.BigEndian.PutUint64(r[repLocalCAGUID:], f.LocalCAGUID)
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

// pairPrivateData is the offset of an RTU's or DREP's private data.
const pairPrivateData = 32

// MAD returns the message's MAD view.
func (p Pair) MAD() MAD { return MAD(p) }

// LocalCommID returns the sender's communication ID.
func (p Pair) LocalCommID() uint32 { return localCommID(p) }

// RemoteCommID returns the receiver's communication ID.
func (p Pair) RemoteCommID() uint32 { return remoteCommID(p) }

// PrivateData returns the consumer's private data.
func (p Pair) PrivateData() []byte { return p[pairPrivateData:MADSize] }

// Encode writes both communication IDs.
func (p Pair) Encode(local, remote uint32) {
	binary.BigEndian.PutUint32(p[cmLocalCommID:], local)
	binary.BigEndian.PutUint32(p[cmRemoteCommID:], remote)
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

// Offsets of the DREQ's fields after the communication IDs.
const (
	dreqRemoteQPN   = 32 // 24 bits
	dreqReserved    = 35
	dreqPrivateData = 36
)

// MAD returns the message's MAD view.
func (d DREQ) MAD() MAD { return MAD(d) }

// LocalCommID returns the sender's communication ID.
func (d DREQ) LocalCommID() uint32 { return localCommID(d) }

// RemoteCommID returns the receiver's communication ID.
func (d DREQ) RemoteCommID() uint32 { return remoteCommID(d) }

// RemoteQPN returns the receiver's QP number: the QP to disconnect.
func (d DREQ) RemoteQPN() roce.QPN { return roce.QPN(uint24(d[dreqRemoteQPN:])) }

// PrivateData returns the consumer's private data.
func (d DREQ) PrivateData() []byte { return d[dreqPrivateData:MADSize] }

// Encode writes the communication IDs and the remote QPN, the reserved byte as zero.
func (d DREQ) Encode(local, remote uint32, remoteQPN roce.QPN) {
	Pair(d).Encode(local, remote)
	setUint24(d[dreqRemoteQPN:], uint32(remoteQPN))
	d[dreqReserved] = 0
}

// Messages an MRA or REJ refers to (IBTA 12.6.6, 12.6.7).
const (
	MsgREQ   = 0 // a REQ
	MsgREP   = 1 // a REP
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

// Offsets of the MRA's fields after the communication IDs.
const (
	mraMessage        = 32 // MM (top 2 bits)
	mraServiceTimeout = 33 // service timeout (top 5 bits)
	mraPrivateData    = 34
)

// MAD returns the message's MAD view.
func (m MRA) MAD() MAD { return MAD(m) }

// LocalCommID returns the sender's communication ID.
func (m MRA) LocalCommID() uint32 { return localCommID(m) }

// RemoteCommID returns the receiver's communication ID.
func (m MRA) RemoteCommID() uint32 { return remoteCommID(m) }

// MessageMRAed returns which message the MRA acknowledges (MsgREQ, MsgREP, MsgOther).
func (m MRA) MessageMRAed() uint8 { return m[mraMessage] >> 6 }

// ServiceTimeout returns the time the sender needs to answer (4.096 µs × 2^n).
func (m MRA) ServiceTimeout() uint8 { return m[mraServiceTimeout] >> 3 }

// PrivateData returns the consumer's private data.
func (m MRA) PrivateData() []byte { return m[mraPrivateData:MADSize] }

// Encode writes the message's fields, reserved bits as zero.
func (m MRA) Encode(local, remote uint32, msg, serviceTimeout uint8) {
	Pair(m).Encode(local, remote)
	m[mraMessage], m[mraServiceTimeout] = msg<<6, serviceTimeout<<3
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

// Offsets of the REJ's fields after the communication IDs.
const (
	rejMessage     = 32 // MR (top 2 bits)
	rejARILen      = 33 // ARI length (top 7 bits)
	rejReason      = 34 // 16 bits
	rejARI         = 36
	rejPrivateData = 108
	rejARISize     = rejPrivateData - rejARI
)

// REJ reasons (IBTA table 112; the kernel's enum ib_cm_rej_reason).
const (
	RejNoQP                 uint16 = 1  // no QP available
	RejNoResources          uint16 = 3  // no resources to accept
	RejTimeout              uint16 = 4  // the peer did not answer in time
	RejUnsupported          uint16 = 5  // a request the receiver does not support
	RejInvalidCommID        uint16 = 6  // no connection with this communication ID
	RejInvalidCommInstance  uint16 = 7  // a stale instance of the communication ID
	RejInvalidServiceID     uint16 = 8  // no listener on the service ID
	RejInvalidTransportType uint16 = 9  // a transport the listener does not accept
	RejStaleConn            uint16 = 10 // the QP is still in use by a connection
	RejInvalidGID           uint16 = 12 // the primary path's GID is not the receiver's
	RejInvalidMTU           uint16 = 26 // a path MTU the receiver cannot use
	RejInsufficientRespRes  uint16 = 27 // too few responder resources
	RejConsumerDefined      uint16 = 28 // the application rejected (rdma_reject)
	RejInvalidRNRRetry      uint16 = 29 // an invalid RNR retry count
	RejDuplicateLocalCommID uint16 = 30 // the communication ID is already in use
	RejInvalidClassVersion  uint16 = 31 // a CM class version the receiver does not speak
)

// MAD returns the message's MAD view.
func (r REJ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r REJ) LocalCommID() uint32 { return localCommID(r) }

// RemoteCommID returns the rejected sender's communication ID.
func (r REJ) RemoteCommID() uint32 { return remoteCommID(r) }

// MessageRejected returns which message is rejected (MsgREQ, MsgREP, MsgOther).
func (r REJ) MessageRejected() uint8 { return r[rejMessage] >> 6 }

// RejectInfoLength returns the number of meaningful bytes of the ARI.
func (r REJ) RejectInfoLength() int { return int(r[rejARILen] >> 1) }

// Reason returns the reject reason (one of the Rej constants).
func (r REJ) Reason() uint16 { return binary.BigEndian.Uint16(r[rejReason:]) }

// ARI returns the meaningful bytes of the additional reject information (Parse has
// checked that RejectInfoLength fits).
func (r REJ) ARI() []byte { return r[rejARI : rejARI+r.RejectInfoLength()] }

// PrivateData returns the consumer's private data.
func (r REJ) PrivateData() []byte { return r[rejPrivateData:MADSize] }

// Encode writes the message's fields and ari (at most 72 bytes; more is cut), the
// rest of the ARI field and reserved bits as zero.
func (r REJ) Encode(local, remote uint32, msg uint8, reason uint16, ari []byte) {
	Pair(r).Encode(local, remote)
	clear(r[rejARI:rejPrivateData])
	n := copy(r[rejARI:rejPrivateData], ari)
	r[rejMessage], r[rejARILen] = msg<<6, byte(n)<<1
	binary.BigEndian.PutUint16(r[rejReason:], reason)
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

// Offsets of the SIDR_REQ's fields after the request ID.
const (
	sidrReqPKey        = 28 // 16 bits
	sidrReqReserved    = 30 // 16 bits
	sidrReqServiceID   = 32
	sidrReqPrivateData = 40
)

// MAD returns the message's MAD view.
func (s SIDRREQ) MAD() MAD { return MAD(s) }

// RequestID returns the ID the SIDR_REP answers with.
func (s SIDRREQ) RequestID() uint32 { return localCommID(s) }

// PKey returns the partition key of the UD QP asked for.
func (s SIDRREQ) PKey() roce.PKey { return roce.PKey(binary.BigEndian.Uint16(s[sidrReqPKey:])) }

// ServiceID returns the service whose QP is asked for.
func (s SIDRREQ) ServiceID() ServiceID {
	return ServiceID(binary.BigEndian.Uint64(s[sidrReqServiceID:]))
}

// PrivateData returns the consumer's private data (a CMA header first, from rdma_cm).
func (s SIDRREQ) PrivateData() []byte { return s[sidrReqPrivateData:MADSize] }

// Encode writes the message's fields, reserved bits as zero.
func (s SIDRREQ) Encode(requestID uint32, pkey roce.PKey, sid ServiceID) {
	binary.BigEndian.PutUint32(s[sidrRequestID:], requestID)
	binary.BigEndian.PutUint16(s[sidrReqPKey:], uint16(pkey))
	binary.BigEndian.PutUint16(s[sidrReqReserved:], 0)
	binary.BigEndian.PutUint64(s[sidrReqServiceID:], uint64(sid))
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
	SIDRValid           uint8 = 0 // QPN and Q_Key are valid
	SIDRServiceNotFound uint8 = 1 // no one serves the service ID
	SIDRRejected        uint8 = 2 // the service rejected the request
	SIDRNoQP            uint8 = 3 // no QP available
	SIDRRedirect        uint8 = 4 // ask again where ClassPortInfo says
	SIDRUnsupported     uint8 = 5 // a class version the receiver does not speak
)

// Offsets of the SIDR_REP's fields after the request ID.
const (
	sidrRepStatus      = 28
	sidrRepQPN         = 32 // 24 bits
	sidrRepServiceID   = 36
	sidrRepQKey        = 44
	sidrRepPrivateData = 120
)

// MAD returns the message's MAD view.
func (s SIDRREP) MAD() MAD { return MAD(s) }

// RequestID returns the ID of the SIDR_REQ answered.
func (s SIDRREP) RequestID() uint32 { return localCommID(s) }

// Status returns the outcome (one of the SIDR constants).
func (s SIDRREP) Status() uint8 { return s[sidrRepStatus] }

// QPN returns the QP that serves the service.
func (s SIDRREP) QPN() roce.QPN { return roce.QPN(uint24(s[sidrRepQPN:])) }

// ServiceID returns the service resolved.
func (s SIDRREP) ServiceID() ServiceID {
	return ServiceID(binary.BigEndian.Uint64(s[sidrRepServiceID:]))
}

// QKey returns the Q_Key to send to the QP with.
func (s SIDRREP) QKey() uint32 { return binary.BigEndian.Uint32(s[sidrRepQKey:]) }

// PrivateData returns the consumer's private data.
func (s SIDRREP) PrivateData() []byte { return s[sidrRepPrivateData:MADSize] }

// Encode writes the message's fields, the additional information and reserved bits
// as zero.
func (s SIDRREP) Encode(requestID uint32, status uint8, qpn roce.QPN, sid ServiceID, qkey uint32) {
	clear(s[HeaderSize:sidrRepPrivateData])
	binary.BigEndian.PutUint32(s[sidrRequestID:], requestID)
	s[sidrRepStatus] = status
	setUint24(s[sidrRepQPN:], uint32(qpn))
	binary.BigEndian.PutUint64(s[sidrRepServiceID:], uint64(sid))
	binary.BigEndian.PutUint32(s[sidrRepQKey:], qkey)
}
