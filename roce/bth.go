package roce

import "encoding/binary"

// BTH is a view of the 12-byte Base Transport Header (IBTA 9.2).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad|  TVer |           P_Key               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|   Resv6   |                 Destination QP                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |                      PSN                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S = solicited event, M = MigReq, Pad = pad count, F/B = FECN/BECN (RoCEv2 uses BECN
// in CNPs), A = AckReq.
type BTH []byte

// BTHSize is the size of the Base Transport Header.
const BTHSize = 12

const (
	bthSEBit     = 0x80
	bthMigReqBit = 0x40
	bthFECNBit   = 0x80
	bthBECNBit   = 0x40
	bthAckReqBit = 0x80
	// bthMaskedByte is the byte the ICRC treats as all ones (FECN, BECN, Resv6).
	bthMaskedByte = 4
)

// BTHFields holds the values of a BTH, for Encode.
type BTHFields struct {
	Opcode Opcode
	SE     bool
	MigReq bool
	PadCnt uint8 // 0..3
	TVer   uint8 // 0..15; 0 for IBTA 1.x
	PKey   PKey
	FECN   bool
	BECN   bool
	DestQP QPN
	AckReq bool
	PSN    PSN
}

func (b BTH) Opcode() Opcode     { return Opcode(b[0]) }
func (b BTH) SE() bool           { return b[1]&bthSEBit != 0 }
func (b BTH) MigReq() bool       { return b[1]&bthMigReqBit != 0 }
func (b BTH) PadCnt() uint8      { return b[1] >> 4 & 3 }
func (b BTH) TVer() uint8        { return b[1] & 0x0F }
func (b BTH) PKey() PKey         { return PKey(binary.BigEndian.Uint16(b[2:])) }
func (b BTH) FECN() bool         { return b[4]&bthFECNBit != 0 }
func (b BTH) BECN() bool         { return b[4]&bthBECNBit != 0 }
func (b BTH) DestQP() QPN        { return QPN(binary.BigEndian.Uint32(b[4:]) & QPNMask) }
func (b BTH) AckReq() bool       { return b[8]&bthAckReqBit != 0 }
func (b BTH) PSN() PSN           { return PSN(binary.BigEndian.Uint32(b[8:]) & PSNMask) }
func (b BTH) SetOpcode(o Opcode) { b[0] = byte(o) }
func (b BTH) SetPSN(p PSN)       { setUint24(b[9:], uint32(p)) }
func (b BTH) SetDestQP(q QPN)    { setUint24(b[5:], uint32(q)) }
func (b BTH) SetPKey(k PKey)     { binary.BigEndian.PutUint16(b[2:], uint16(k)) }
func (b BTH) SetPadCnt(n uint8)  { b[1] = b[1]&^0x30 | (n&3)<<4 }
func (b BTH) SetSE(v bool)       { setBit(&b[1], bthSEBit, v) }
func (b BTH) SetMigReq(v bool)   { setBit(&b[1], bthMigReqBit, v) }
func (b BTH) SetFECN(v bool)     { setBit(&b[4], bthFECNBit, v) }
func (b BTH) SetBECN(v bool)     { setBit(&b[4], bthBECNBit, v) }
func (b BTH) SetAckReq(v bool)   { setBit(&b[8], bthAckReqBit, v) }

// Fields returns the header's values.
func (b BTH) Fields() BTHFields {
	return BTHFields{
		Opcode: b.Opcode(), SE: b.SE(), MigReq: b.MigReq(), PadCnt: b.PadCnt(),
		TVer: b.TVer(), PKey: b.PKey(), FECN: b.FECN(), BECN: b.BECN(),
		DestQP: b.DestQP(), AckReq: b.AckReq(), PSN: b.PSN(),
	}
}

// Encode writes every field of f, reserved bits as zero.
func (b BTH) Encode(f *BTHFields) {
	b[0] = byte(f.Opcode)
	b[1] = f.PadCnt&3<<4 | f.TVer&0x0F
	setBit(&b[1], bthSEBit, f.SE)
	setBit(&b[1], bthMigReqBit, f.MigReq)
	binary.BigEndian.PutUint16(b[2:], uint16(f.PKey))
	binary.BigEndian.PutUint32(b[4:], uint32(f.DestQP)&QPNMask)
	setBit(&b[4], bthFECNBit, f.FECN)
	setBit(&b[4], bthBECNBit, f.BECN)
	binary.BigEndian.PutUint32(b[8:], uint32(f.PSN)&PSNMask)
	setBit(&b[8], bthAckReqBit, f.AckReq)
}

func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}

func setUint24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}

func uint24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}
