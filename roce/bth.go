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

// Offsets of the BTH's fields from the start of the header. The 24-bit Destination
// QP and PSN share a 32-bit word with the flags before them: readers load the word and
// mask, writers store the three bytes after the flag byte.
const (
	bthOpcode     = 0 // OpCode
	bthFlags      = 1 // SE, MigReq, PadCnt, TVer
	bthPKey       = 2 // P_Key (16 bits)
	bthFECNDestQP = 4 // FECN, BECN, Resv6; then the Destination QP (24 bits)
	bthAckReqPSN  = 8 // AckReq, Resv7; then the PSN (24 bits)
)

// Bits and fields inside the flag bytes.
const (
	bthSEBit      = 0x80          // in bthFlags
	bthMigReqBit  = 0x40          // in bthFlags
	bthPadShift   = 4             // PadCnt's shift in bthFlags
	bthPadMask    = 3             // PadCnt's width in bthFlags (after the shift)
	bthTVerMask   = 0x0F          // in bthFlags
	bthFECNBit    = 0x80          // in bthFECNDestQP
	bthBECNBit    = 0x40          // in bthFECNDestQP
	bthAckReqBit  = 0x80          // in bthAckReqPSN
	bthMaskedByte = bthFECNDestQP // the byte the ICRC treats as all ones (FECN, BECN, Resv6)
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

// Opcode returns the OpCode: the transport service and operation.
func (b BTH) Opcode() Opcode { return Opcode(b[bthOpcode]) }

// SE returns the Solicited Event bit.
func (b BTH) SE() bool { return b[bthFlags]&bthSEBit != 0 }

// MigReq returns the MigReq bit (path migration state).
func (b BTH) MigReq() bool { return b[bthFlags]&bthMigReqBit != 0 }

// PadCnt returns the pad count: the bytes (0–3) that round the payload up to 4.
func (b BTH) PadCnt() uint8 { return b[bthFlags] >> bthPadShift & bthPadMask }

// TVer returns the transport header version (0 for IBTA 1.x).
func (b BTH) TVer() uint8 { return b[bthFlags] & bthTVerMask }

// PKey returns the partition key.
func (b BTH) PKey() PKey { return PKey(binary.BigEndian.Uint16(b[bthPKey:])) }

// FECN returns the forward explicit congestion notification bit.
func (b BTH) FECN() bool { return b[bthFECNDestQP]&bthFECNBit != 0 }

// BECN returns the backward explicit congestion notification bit (set in RoCEv2 CNPs).
func (b BTH) BECN() bool { return b[bthFECNDestQP]&bthBECNBit != 0 }

// DestQP returns the destination queue pair number.
func (b BTH) DestQP() QPN { return QPN(binary.BigEndian.Uint32(b[bthFECNDestQP:]) & QPNMask) }

// AckReq returns the AckReq bit: the requester asks the responder for an ACK.
func (b BTH) AckReq() bool { return b[bthAckReqPSN]&bthAckReqBit != 0 }

// PSN returns the packet sequence number.
func (b BTH) PSN() PSN { return PSN(binary.BigEndian.Uint32(b[bthAckReqPSN:]) & PSNMask) }

// SetOpcode sets the OpCode.
func (b BTH) SetOpcode(o Opcode) { b[bthOpcode] = byte(o) }

// SetPSN sets the packet sequence number, keeping AckReq.
func (b BTH) SetPSN(p PSN) { setUint24(b[bthAckReqPSN+1:], uint32(p)) }

// SetDestQP sets the destination queue pair number, keeping FECN and BECN.
func (b BTH) SetDestQP(q QPN) { setUint24(b[bthFECNDestQP+1:], uint32(q)) }

// SetPKey sets the partition key.
func (b BTH) SetPKey(k PKey) { binary.BigEndian.PutUint16(b[bthPKey:], uint16(k)) }

// SetPadCnt sets the pad count (0–3).
func (b BTH) SetPadCnt(n uint8) {
	b[bthFlags] = b[bthFlags]&^(bthPadMask<<bthPadShift) | (n&bthPadMask)<<bthPadShift
}

// SetSE sets or clears the Solicited Event bit.
func (b BTH) SetSE(v bool) { setBit(&b[bthFlags], bthSEBit, v) }

// SetMigReq sets or clears the MigReq bit.
func (b BTH) SetMigReq(v bool) { setBit(&b[bthFlags], bthMigReqBit, v) }

// SetFECN sets or clears the FECN bit.
func (b BTH) SetFECN(v bool) { setBit(&b[bthFECNDestQP], bthFECNBit, v) }

// SetBECN sets or clears the BECN bit.
func (b BTH) SetBECN(v bool) { setBit(&b[bthFECNDestQP], bthBECNBit, v) }

// SetAckReq sets or clears the AckReq bit.
func (b BTH) SetAckReq(v bool) { setBit(&b[bthAckReqPSN], bthAckReqBit, v) }

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
	b[bthOpcode] = byte(f.Opcode)
	b[bthFlags] = f.PadCnt&bthPadMask<<bthPadShift | f.TVer&bthTVerMask
	setBit(&b[bthFlags], bthSEBit, f.SE)
	setBit(&b[bthFlags], bthMigReqBit, f.MigReq)
	binary.BigEndian.PutUint16(b[bthPKey:], uint16(f.PKey))
	binary.BigEndian.PutUint32(b[bthFECNDestQP:], uint32(f.DestQP)&QPNMask)
	setBit(&b[bthFECNDestQP], bthFECNBit, f.FECN)
	setBit(&b[bthFECNDestQP], bthBECNBit, f.BECN)
	binary.BigEndian.PutUint32(b[bthAckReqPSN:], uint32(f.PSN)&PSNMask)
	setBit(&b[bthAckReqPSN], bthAckReqBit, f.AckReq)
}

// setBit sets mask's bits in *b when v holds, and clears them otherwise.
func setBit(b *byte, mask byte, v bool) {
	if v {
		*b |= mask
	} else {
		*b &^= mask
	}
}

// setUint24 stores v's low 24 bits big-endian in b[0:3].
func setUint24(b []byte, v uint32) {
	_ = b[2]
	b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v)
}

// uint24 loads a big-endian 24-bit value from b[0:3].
func uint24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}
