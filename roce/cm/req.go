package cm

import (
	"encoding/binary"

	"github.com/rocelab/rocelab/roce"
)

// REQ is a view of a ConnectRequest MAD (IBTA 12.6.5), the whole 256-byte MAD. Offsets
// below count from the start of the MAD; the message starts after the 24-byte header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Communication ID                         | 24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Reserved                                       | 28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                ServiceID (64 bits)                            | 32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local CA GUID (64 bits)                        | 40
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Reserved                                       | 48
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Q_Key                                    | 52
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local QPN                      |  Resp. Res.   | 56
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local EECN                     |  Init. Depth  | 60
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote EECN                    |RCMTmo   |TT |F| 64
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Starting PSN                   |LCMTmo   |Rty  | 68
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            P_Key              |  MTU  |D| RNR |MaxCM|S| Ext | 72
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Primary path (44 bytes, see Path)              | 76
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Alternate path (44 bytes)                      | 120
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Private Data (92 bytes)                        | 164
//
// RCMTmo/LCMTmo = remote/local CM response timeout (5 bits, 4.096 µs × 2^n), TT =
// transport service type, F = end-to-end flow control, Rty = retry count, D = RDC
// exists, RNR = RNR retry count, MaxCM = max CM retries (4 bits), S = SRQ, Ext =
// extended transport type.
//
// As the kernel's CM uses them, each side's Starting PSN (in REQ and REP) is the PSN its
// own receive queue expects: the peer's send queue starts there (rping.pcap shows it).
type REQ []byte

// REQPrivateDataSize is the size of a REQ's private data.
const REQPrivateDataSize = 92

// Transport service types of REQ (IBTA 12.6.5).
const (
	TransportRC = 0 // reliable connected
	TransportUC = 1 // unreliable connected
	TransportRD = 2 // reliable datagram
	// TransportExtended says that ExtendedTransport names the service (IBTA annex
	// A14): ExtendedTransportXRC for XRC, as the kernel's cm_req_set_qp_type sets for
	// an XRC initiator.
	TransportExtended    = 3
	ExtendedTransportXRC = 1
)

// REQFields holds the values of a REQ, for Encode.
type REQFields struct {
	LocalCommID             uint32
	ServiceID               ServiceID
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                roce.QPN
	ResponderResources      uint8
	LocalEECN               uint32
	InitiatorDepth          uint8
	RemoteEECN              uint32
	RemoteCMResponseTimeout uint8 // 5 bits
	TransportType           uint8 // 2 bits
	EndToEndFlowControl     bool
	StartingPSN             roce.PSN
	LocalCMResponseTimeout  uint8 // 5 bits
	RetryCount              uint8 // 3 bits
	PKey                    roce.PKey
	PathMTU                 uint8 // IBTA MTU enum, 4 bits
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransport       uint8 // 3 bits
	Primary                 PathFields
	Alternate               PathFields
}

// Offsets of the REQ's fields from the start of the MAD.
const (
	reqServiceID         = 32
	reqLocalCAGUID       = 40
	reqLocalQKey         = 52
	reqLocalQPN          = 56 // 24 bits
	reqRespRes           = 59
	reqLocalEECN         = 60 // 24 bits
	reqInitDepth         = 63
	reqRemoteEECN        = 64 // 24 bits
	reqRemoteTmoTTF      = 67 // remote CM response timeout (5 bits), TT (2), F (1)
	reqStartingPSN       = 68 // 24 bits
	reqLocalTmoRetry     = 71 // local CM response timeout (5 bits), retry count (3)
	reqPKey              = 72 // 16 bits
	reqMTURDCRNR         = 74 // path MTU (4 bits), RDC exists (1), RNR retry count (3)
	reqMaxCMSRQExt       = 75 // max CM retries (4 bits), SRQ (1), extended transport (3)
	reqPrimary           = 76
	reqAlternate         = reqPrimary + pathSize
	reqPrivateData       = reqAlternate + pathSize
	reqRDCBit, reqSRQBit = 0x08, 0x08 // in reqMTURDCRNR and reqMaxCMSRQExt
)

// MAD returns the message's MAD view.
func (r REQ) MAD() MAD { return MAD(r) }

// LocalCommID returns the sender's communication ID.
func (r REQ) LocalCommID() uint32 { return localCommID(r) }

// ServiceID returns the service asked for.
func (r REQ) ServiceID() ServiceID { return ServiceID(binary.BigEndian.Uint64(r[reqServiceID:])) }

// LocalCAGUID returns the sender's channel adapter GUID.
func (r REQ) LocalCAGUID() uint64 { return binary.BigEndian.Uint64(r[reqLocalCAGUID:]) }

// LocalQKey returns the sender's Q_Key.
func (r REQ) LocalQKey() uint32 { return binary.BigEndian.Uint32(r[reqLocalQKey:]) }

// LocalQPN returns the sender's QP number.
func (r REQ) LocalQPN() roce.QPN { return roce.QPN(uint24(r[reqLocalQPN:])) }

// ResponderResources returns the RDMA READ and atomic requests the sender accepts at once.
func (r REQ) ResponderResources() uint8 { return r[reqRespRes] }

// LocalEECN returns the sender's EE context number (RD only).
func (r REQ) LocalEECN() uint32 { return uint24(r[reqLocalEECN:]) }

// InitiatorDepth returns the RDMA READ and atomic requests the sender issues at once.
func (r REQ) InitiatorDepth() uint8 { return r[reqInitDepth] }

// RemoteEECN returns the receiver's EE context number (RD only).
func (r REQ) RemoteEECN() uint32 { return uint24(r[reqRemoteEECN:]) }

// RemoteCMResponseTimeout returns how long the receiver's CM may take to answer.
func (r REQ) RemoteCMResponseTimeout() uint8 { return r[reqRemoteTmoTTF] >> 3 }

// TransportType returns the transport service (TransportRC, TransportUC, TransportRD).
func (r REQ) TransportType() uint8 { return r[reqRemoteTmoTTF] >> 1 & 3 }

// EndToEndFlowControl reports whether the sender uses end-to-end flow control.
func (r REQ) EndToEndFlowControl() bool { return r[reqRemoteTmoTTF]&1 != 0 }

// StartingPSN returns the PSN the sender's receive queue expects first.
func (r REQ) StartingPSN() roce.PSN { return roce.PSN(uint24(r[reqStartingPSN:])) }

// LocalCMResponseTimeout returns how long the sender's CM may take to answer.
func (r REQ) LocalCMResponseTimeout() uint8 { return r[reqLocalTmoRetry] >> 3 }

// RetryCount returns the transport retry count (3 bits).
func (r REQ) RetryCount() uint8 { return r[reqLocalTmoRetry] & 7 }

// PKey returns the partition key.
func (r REQ) PKey() roce.PKey { return roce.PKey(binary.BigEndian.Uint16(r[reqPKey:])) }

// PathMTU returns the path MTU as an IBTA MTU enum (roce.MTUFromEnum).
func (r REQ) PathMTU() uint8 { return r[reqMTURDCRNR] >> 4 }

// RDCExists reports whether an RD channel exists (RD only).
func (r REQ) RDCExists() bool { return r[reqMTURDCRNR]&reqRDCBit != 0 }

// RNRRetryCount returns the RNR retry count (3 bits; 7 = infinite).
func (r REQ) RNRRetryCount() uint8 { return r[reqMTURDCRNR] & 7 }

// MaxCMRetries returns how often the CM resends a message that is not answered.
func (r REQ) MaxCMRetries() uint8 { return r[reqMaxCMSRQExt] >> 4 }

// SRQ reports whether the sender's QP uses a shared receive queue.
func (r REQ) SRQ() bool { return r[reqMaxCMSRQExt]&reqSRQBit != 0 }

// ExtendedTransport returns the extended transport type (3 bits; XRC is 1).
func (r REQ) ExtendedTransport() uint8 { return r[reqMaxCMSRQExt] & 7 }

// Primary returns the view of the primary path.
func (r REQ) Primary() Path { return Path(r[reqPrimary:reqAlternate]) }

// Alternate returns the view of the alternate path (all zero when there is none).
func (r REQ) Alternate() Path { return Path(r[reqAlternate:reqPrivateData]) }

// PrivateData returns the consumer's private data (a CMA header first, from rdma_cm).
func (r REQ) PrivateData() []byte { return r[reqPrivateData:MADSize] }

// Fields returns the message's values.
func (r REQ) Fields() REQFields {
	return REQFields{
		LocalCommID: r.LocalCommID(), ServiceID: r.ServiceID(), LocalCAGUID: r.LocalCAGUID(),
		LocalQKey: r.LocalQKey(), LocalQPN: r.LocalQPN(), ResponderResources: r.ResponderResources(),
		LocalEECN: r.LocalEECN(), InitiatorDepth: r.InitiatorDepth(), RemoteEECN: r.RemoteEECN(),
		RemoteCMResponseTimeout: r.RemoteCMResponseTimeout(), TransportType: r.TransportType(),
		EndToEndFlowControl: r.EndToEndFlowControl(), StartingPSN: r.StartingPSN(),
		LocalCMResponseTimeout: r.LocalCMResponseTimeout(), RetryCount: r.RetryCount(),
		PKey: r.PKey(), PathMTU: r.PathMTU(), RDCExists: r.RDCExists(), RNRRetryCount: r.RNRRetryCount(),
		MaxCMRetries: r.MaxCMRetries(), SRQ: r.SRQ(), ExtendedTransport: r.ExtendedTransport(),
		Primary: r.Primary().Fields(), Alternate: r.Alternate().Fields(),
	}
}

// Encode writes every field of f after the MAD header, reserved bits as zero; the
// private data is left as it is (write it through PrivateData).
func (r REQ) Encode(f *REQFields) {
	clear(r[HeaderSize:reqPrivateData])
	binary.BigEndian.PutUint32(r[cmLocalCommID:], f.LocalCommID)
	binary.BigEndian.PutUint64(r[reqServiceID:], uint64(f.ServiceID))
	binary.BigEndian.PutUint64(r[reqLocalCAGUID:], f.LocalCAGUID)
	binary.BigEndian.PutUint32(r[reqLocalQKey:], f.LocalQKey)
	setUint24(r[reqLocalQPN:], uint32(f.LocalQPN))
	r[reqRespRes] = f.ResponderResources
	setUint24(r[reqLocalEECN:], f.LocalEECN)
	r[reqInitDepth] = f.InitiatorDepth
	setUint24(r[reqRemoteEECN:], f.RemoteEECN)
	r[reqRemoteTmoTTF] = f.RemoteCMResponseTimeout<<3 | f.TransportType&3<<1 | boolBit(f.EndToEndFlowControl, 1)
	setUint24(r[reqStartingPSN:], uint32(f.StartingPSN))
	r[reqLocalTmoRetry] = f.LocalCMResponseTimeout<<3 | f.RetryCount&7
	binary.BigEndian.PutUint16(r[reqPKey:], uint16(f.PKey))
	r[reqMTURDCRNR] = f.PathMTU<<4 | boolBit(f.RDCExists, reqRDCBit) | f.RNRRetryCount&7
	r[reqMaxCMSRQExt] = f.MaxCMRetries<<4 | boolBit(f.SRQ, reqSRQBit) | f.ExtendedTransport&7
	r.Primary().Encode(&f.Primary)
	r.Alternate().Encode(&f.Alternate)
}

// Path is a view of the 44-byte path description a REQ carries twice (primary and
// alternate). On RoCE the LIDs are the permissive LID 0xFFFF and the GIDs are the
// IP addresses (IPv4 mapped into IPv6).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Local Port LID         |        Remote Port LID        | 0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Local Port GID (128 bits)                      | 4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Remote Port GID (128 bits)                     | 20
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              Flow Label               |  Resv.    |PacketRate | 36
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Traffic Class |   Hop Limit   |  SL   |L|Resv.|ACKTmo   |Resv.| 40
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// L = subnet local; ACKTmo = local ACK timeout (5 bits, 4.096 µs × 2^n).
type Path []byte

// PathFields holds the values of a Path.
type PathFields struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        roce.GID
	RemoteGID       roce.GID
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits, IBTA rate enum
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits
}

// Offsets of a Path's fields from its start.
const (
	pathLocalLID       = 0  // 16 bits
	pathRemoteLID      = 2  // 16 bits
	pathLocalGID       = 4  // 128 bits
	pathRemoteGID      = 20 // 128 bits
	pathFlowLabelRate  = 36 // flow label (20 bits), reserved (6), packet rate (6)
	pathPacketRate     = 39 // the low 6 bits
	pathTrafficClass   = 40
	pathHopLimit       = 41
	pathSLLocal        = 42 // SL (4 bits), subnet local (1)
	pathACKTimeout     = 43 // local ACK timeout (top 5 bits)
	pathSize           = 44
	pathSubnetLocalBit = 0x08 // in pathSLLocal
	gidSize            = len(roce.GID{})
)

// LocalLID returns the local port's LID (0xFFFF, the permissive LID, on RoCE).
func (p Path) LocalLID() uint16 { return binary.BigEndian.Uint16(p[pathLocalLID:]) }

// RemoteLID returns the remote port's LID (0xFFFF on RoCE).
func (p Path) RemoteLID() uint16 { return binary.BigEndian.Uint16(p[pathRemoteLID:]) }

// LocalGID returns the local port's GID: on RoCE, its IP address.
func (p Path) LocalGID() roce.GID { return roce.GID(p[pathLocalGID : pathLocalGID+gidSize]) }

// RemoteGID returns the remote port's GID: on RoCE, its IP address.
func (p Path) RemoteGID() roce.GID { return roce.GID(p[pathRemoteGID : pathRemoteGID+gidSize]) }

// FlowLabel returns the IPv6 flow label of the path (20 bits).
func (p Path) FlowLabel() uint32 { return binary.BigEndian.Uint32(p[pathFlowLabelRate:]) >> 12 }

// PacketRate returns the path's rate as an IBTA rate enum (6 bits).
func (p Path) PacketRate() uint8 { return p[pathPacketRate] & 0x3F }

// TrafficClass returns the traffic class: on RoCE, the IP DSCP and ECN.
func (p Path) TrafficClass() uint8 { return p[pathTrafficClass] }

// HopLimit returns the IP hop limit (TTL) of the path.
func (p Path) HopLimit() uint8 { return p[pathHopLimit] }

// SL returns the service level (4 bits).
func (p Path) SL() uint8 { return p[pathSLLocal] >> 4 }

// SubnetLocal reports whether the path stays in the local subnet.
func (p Path) SubnetLocal() bool { return p[pathSLLocal]&pathSubnetLocalBit != 0 }

// LocalACKTimeout returns the local ACK timeout (4.096 µs × 2^n).
func (p Path) LocalACKTimeout() uint8 { return p[pathACKTimeout] >> 3 }

// Fields returns the path's values.
func (p Path) Fields() PathFields {
	return PathFields{
		LocalLID: p.LocalLID(), RemoteLID: p.RemoteLID(), LocalGID: p.LocalGID(), RemoteGID: p.RemoteGID(),
		FlowLabel: p.FlowLabel(), PacketRate: p.PacketRate(), TrafficClass: p.TrafficClass(),
		HopLimit: p.HopLimit(), SL: p.SL(), SubnetLocal: p.SubnetLocal(), LocalACKTimeout: p.LocalACKTimeout(),
	}
}

// Encode writes every field of f, reserved bits as zero.
func (p Path) Encode(f *PathFields) {
	binary.BigEndian.PutUint16(p[pathLocalLID:], f.LocalLID)
	binary.BigEndian.PutUint16(p[pathRemoteLID:], f.RemoteLID)
	copy(p[pathLocalGID:pathLocalGID+gidSize], f.LocalGID[:])
	copy(p[pathRemoteGID:pathRemoteGID+gidSize], f.RemoteGID[:])
	binary.BigEndian.PutUint32(p[pathFlowLabelRate:], f.FlowLabel&0xFFFFF<<12|uint32(f.PacketRate&0x3F))
	p[pathTrafficClass], p[pathHopLimit] = f.TrafficClass, f.HopLimit
	p[pathSLLocal] = f.SL<<4 | boolBit(f.SubnetLocal, pathSubnetLocalBit)
	p[pathACKTimeout] = f.LocalACKTimeout << 3
}
