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
	TransportRC = 0
	TransportUC = 1
	TransportRD = 2
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

func (r REQ) MAD() MAD                       { return MAD(r) }
func (r REQ) LocalCommID() uint32            { return localCommID(r) }
func (r REQ) ServiceID() ServiceID           { return ServiceID(binary.BigEndian.Uint64(r[32:])) }
func (r REQ) LocalCAGUID() uint64            { return binary.BigEndian.Uint64(r[40:]) }
func (r REQ) LocalQKey() uint32              { return binary.BigEndian.Uint32(r[52:]) }
func (r REQ) LocalQPN() roce.QPN             { return roce.QPN(uint24(r[56:])) }
func (r REQ) ResponderResources() uint8      { return r[59] }
func (r REQ) LocalEECN() uint32              { return uint24(r[60:]) }
func (r REQ) InitiatorDepth() uint8          { return r[63] }
func (r REQ) RemoteEECN() uint32             { return uint24(r[64:]) }
func (r REQ) RemoteCMResponseTimeout() uint8 { return r[67] >> 3 }
func (r REQ) TransportType() uint8           { return r[67] >> 1 & 3 }
func (r REQ) EndToEndFlowControl() bool      { return r[67]&1 != 0 }
func (r REQ) StartingPSN() roce.PSN          { return roce.PSN(uint24(r[68:])) }
func (r REQ) LocalCMResponseTimeout() uint8  { return r[71] >> 3 }
func (r REQ) RetryCount() uint8              { return r[71] & 7 }
func (r REQ) PKey() roce.PKey                { return roce.PKey(binary.BigEndian.Uint16(r[72:])) }
func (r REQ) PathMTU() uint8                 { return r[74] >> 4 }
func (r REQ) RDCExists() bool                { return r[74]&0x08 != 0 }
func (r REQ) RNRRetryCount() uint8           { return r[74] & 7 }
func (r REQ) MaxCMRetries() uint8            { return r[75] >> 4 }
func (r REQ) SRQ() bool                      { return r[75]&0x08 != 0 }
func (r REQ) ExtendedTransport() uint8       { return r[75] & 7 }
func (r REQ) Primary() Path                  { return Path(r[76:120]) }
func (r REQ) Alternate() Path                { return Path(r[120:164]) }
func (r REQ) PrivateData() []byte            { return r[164:MADSize] }

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
	clear(r[24:164])
	binary.BigEndian.PutUint32(r[24:], f.LocalCommID)
	binary.BigEndian.PutUint64(r[32:], uint64(f.ServiceID))
	binary.BigEndian.PutUint64(r[40:], f.LocalCAGUID)
	binary.BigEndian.PutUint32(r[52:], f.LocalQKey)
	setUint24(r[56:], uint32(f.LocalQPN))
	r[59] = f.ResponderResources
	setUint24(r[60:], f.LocalEECN)
	r[63] = f.InitiatorDepth
	setUint24(r[64:], f.RemoteEECN)
	r[67] = f.RemoteCMResponseTimeout<<3 | f.TransportType&3<<1 | boolBit(f.EndToEndFlowControl, 1)
	setUint24(r[68:], uint32(f.StartingPSN))
	r[71] = f.LocalCMResponseTimeout<<3 | f.RetryCount&7
	binary.BigEndian.PutUint16(r[72:], uint16(f.PKey))
	r[74] = f.PathMTU<<4 | boolBit(f.RDCExists, 0x08) | f.RNRRetryCount&7
	r[75] = f.MaxCMRetries<<4 | boolBit(f.SRQ, 0x08) | f.ExtendedTransport&7
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

func (p Path) LocalLID() uint16       { return binary.BigEndian.Uint16(p[0:]) }
func (p Path) RemoteLID() uint16      { return binary.BigEndian.Uint16(p[2:]) }
func (p Path) LocalGID() roce.GID     { return roce.GID(p[4:20]) }
func (p Path) RemoteGID() roce.GID    { return roce.GID(p[20:36]) }
func (p Path) FlowLabel() uint32      { return binary.BigEndian.Uint32(p[36:]) >> 12 }
func (p Path) PacketRate() uint8      { return p[39] & 0x3F }
func (p Path) TrafficClass() uint8    { return p[40] }
func (p Path) HopLimit() uint8        { return p[41] }
func (p Path) SL() uint8              { return p[42] >> 4 }
func (p Path) SubnetLocal() bool      { return p[42]&0x08 != 0 }
func (p Path) LocalACKTimeout() uint8 { return p[43] >> 3 }

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
	binary.BigEndian.PutUint16(p[0:], f.LocalLID)
	binary.BigEndian.PutUint16(p[2:], f.RemoteLID)
	copy(p[4:20], f.LocalGID[:])
	copy(p[20:36], f.RemoteGID[:])
	binary.BigEndian.PutUint32(p[36:], f.FlowLabel&0xFFFFF<<12|uint32(f.PacketRate&0x3F))
	p[40], p[41] = f.TrafficClass, f.HopLimit
	p[42] = f.SL<<4 | boolBit(f.SubnetLocal, 0x08)
	p[43] = f.LocalACKTimeout << 3
}
