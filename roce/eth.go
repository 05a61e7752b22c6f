package roce

import "encoding/binary"

// Extension transport headers (IBTA 9.3). Each is a view over exactly its bytes.

// RETH is a view of the 16-byte RDMA Extended Transport Header, carried by RDMA WRITE
// First/Only and RDMA READ Request.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Virtual Address (64)                      |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            R_Key                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                          DMA Length                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type RETH []byte

// RETHSize is the size of a RETH.
const RETHSize = 16

func (h RETH) VA() uint64         { return binary.BigEndian.Uint64(h[0:]) }
func (h RETH) RKey() uint32       { return binary.BigEndian.Uint32(h[8:]) }
func (h RETH) DMALen() uint32     { return binary.BigEndian.Uint32(h[12:]) }
func (h RETH) SetVA(v uint64)     { binary.BigEndian.PutUint64(h[0:], v) }
func (h RETH) SetRKey(v uint32)   { binary.BigEndian.PutUint32(h[8:], v) }
func (h RETH) SetDMALen(v uint32) { binary.BigEndian.PutUint32(h[12:], v) }

// AETH is a view of the 4-byte ACK Extended Transport Header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|0|Typ|  Value  |                 MSN (24)                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The syndrome's type is ACK (00), RNR NAK (01) or NAK (11); its value is the credit
// count code, the RNR timer code or the NAK code.
type AETH []byte

// AETHSize is the size of an AETH.
const AETHSize = 4

func (h AETH) Syndrome() Syndrome     { return Syndrome(h[0]) }
func (h AETH) MSN() uint32            { return uint24(h[1:]) }
func (h AETH) SetSyndrome(s Syndrome) { h[0] = byte(s) }
func (h AETH) SetMSN(v uint32)        { setUint24(h[1:], v) }

// Syndrome is an AETH syndrome byte.
type Syndrome uint8

// AckType is the type encoded in bits 6:5 of a syndrome.
type AckType uint8

// Syndrome types (IBTA table 43). Type 10 is reserved.
const (
	AckTypeACK      AckType = 0
	AckTypeRNRNAK   AckType = 1
	AckTypeReserved AckType = 2
	AckTypeNAK      AckType = 3
)

// NAK codes carried in a NAK syndrome's value.
const (
	NAKPSNSequenceError     = 0
	NAKInvalidRequest       = 1
	NAKRemoteAccessError    = 2
	NAKRemoteOperational    = 3
	NAKInvalidRDRequest     = 4
	AETHCreditsUnlimited    = 0x1F
	aethSyndromeTypeShift   = 5
	aethSyndromeValueMask   = 0x1F
	aethSyndromeTypeMask    = 0x3
	aethSyndromeReservedBit = 0x80
)

// MakeSyndrome builds a syndrome from a type and a 5-bit value.
func MakeSyndrome(t AckType, value uint8) Syndrome {
	return Syndrome(uint8(t)&aethSyndromeTypeMask<<aethSyndromeTypeShift | value&aethSyndromeValueMask)
}

// Type returns the syndrome's type.
func (s Syndrome) Type() AckType { return AckType(s >> aethSyndromeTypeShift & aethSyndromeTypeMask) }

// Value returns the credit code, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & aethSyndromeValueMask }

// Valid reports whether the reserved top bit is clear and the type is not reserved.
func (s Syndrome) Valid() bool {
	return s&aethSyndromeReservedBit == 0 && s.Type() != AckTypeReserved
}

func (t AckType) String() string {
	switch t {
	case AckTypeACK:
		return "ACK"
	case AckTypeRNRNAK:
		return "RNR_NAK"
	case AckTypeNAK:
		return "NAK"
	}
	return "RESERVED"
}

// AtomicETH is a view of the 28-byte Atomic Extended Transport Header carried by
// CmpSwap and FetchAdd.
//
//	+-------------------------------+  0
//	|   Virtual Address (64)        |
//	+-------------------------------+  8
//	|   R_Key (32)                  |
//	+-------------------------------+ 12
//	|   Swap (or Add) Data (64)     |
//	+-------------------------------+ 20
//	|   Compare Data (64)           |
//	+-------------------------------+ 28
type AtomicETH []byte

// AtomicETHSize is the size of an AtomicETH.
const AtomicETHSize = 28

func (h AtomicETH) VA() uint64          { return binary.BigEndian.Uint64(h[0:]) }
func (h AtomicETH) RKey() uint32        { return binary.BigEndian.Uint32(h[8:]) }
func (h AtomicETH) SwapAdd() uint64     { return binary.BigEndian.Uint64(h[12:]) }
func (h AtomicETH) Compare() uint64     { return binary.BigEndian.Uint64(h[20:]) }
func (h AtomicETH) SetVA(v uint64)      { binary.BigEndian.PutUint64(h[0:], v) }
func (h AtomicETH) SetRKey(v uint32)    { binary.BigEndian.PutUint32(h[8:], v) }
func (h AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(h[12:], v) }
func (h AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(h[20:], v) }

// AtomicAckETH is a view of the 8-byte Atomic Acknowledge Extended Transport Header:
// the original remote data of the atomic operation.
type AtomicAckETH []byte

// AtomicAckETHSize is the size of an AtomicAckETH.
const AtomicAckETHSize = 8

func (h AtomicAckETH) Orig() uint64     { return binary.BigEndian.Uint64(h) }
func (h AtomicAckETH) SetOrig(v uint64) { binary.BigEndian.PutUint64(h, v) }

// ImmDt is a view of the 4-byte Immediate Data Extended Transport Header. The value is
// carried in network byte order, as ibv_wc.imm_data is.
type ImmDt []byte

// ImmDtSize is the size of an ImmDt header.
const ImmDtSize = 4

func (h ImmDt) Imm() uint32     { return binary.BigEndian.Uint32(h) }
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(h, v) }

// IETH is a view of the 4-byte Invalidate Extended Transport Header: the R_Key that a
// SEND with Invalidate invalidates at the responder.
type IETH []byte

// IETHSize is the size of an IETH.
const IETHSize = 4

func (h IETH) RKey() uint32     { return binary.BigEndian.Uint32(h) }
func (h IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h, v) }

// DETH is a view of the 8-byte Datagram Extended Transport Header carried by UD.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Q_Key                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Reserved   |               Source QP (24)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DETH []byte

// DETHSize is the size of a DETH.
const DETHSize = 8

func (h DETH) QKey() uint32     { return binary.BigEndian.Uint32(h) }
func (h DETH) SrcQP() QPN       { return QPN(uint24(h[5:])) }
func (h DETH) SetQKey(v uint32) { binary.BigEndian.PutUint32(h, v) }
func (h DETH) SetSrcQP(q QPN)   { h[4] = 0; setUint24(h[5:], uint32(q)) }

// CNPReserved is a view of the 16 reserved bytes that follow the BTH of a RoCEv2
// Congestion Notification Packet (IBTA Annex A17.9.2); a sender writes zeros.
type CNPReserved []byte

// CNPReservedSize is the size of the CNP's reserved block.
const CNPReservedSize = 16
