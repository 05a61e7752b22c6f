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

// Offsets of the RETH's fields.
const (
	rethVA     = 0  // Virtual Address (64 bits)
	rethRKey   = 8  // R_Key (32 bits)
	rethDMALen = 12 // DMA Length (32 bits)
)

// VA returns the virtual address of the remote buffer.
func (h RETH) VA() uint64 { return binary.BigEndian.Uint64(h[rethVA:]) }

// RKey returns the R_Key of the remote memory region.
func (h RETH) RKey() uint32 { return binary.BigEndian.Uint32(h[rethRKey:]) }

// DMALen returns the length in bytes of the whole RDMA operation.
func (h RETH) DMALen() uint32 { return binary.BigEndian.Uint32(h[rethDMALen:]) }

// SetVA sets the virtual address.
func (h RETH) SetVA(v uint64) { binary.BigEndian.PutUint64(h[rethVA:], v) }

// SetRKey sets the R_Key.
func (h RETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h[rethRKey:], v) }

// SetDMALen sets the DMA length.
func (h RETH) SetDMALen(v uint32) { binary.BigEndian.PutUint32(h[rethDMALen:], v) }

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

// Offsets of the AETH's fields.
const (
	aethSyndrome = 0 // Syndrome (8 bits)
	aethMSN      = 1 // MSN (24 bits)
)

// Syndrome returns the syndrome: ACK, RNR NAK or NAK and its value.
func (h AETH) Syndrome() Syndrome { return Syndrome(h[aethSyndrome]) }

// MSN returns the message sequence number: the last message completed.
func (h AETH) MSN() uint32 { return uint24(h[aethMSN:]) }

// SetSyndrome sets the syndrome.
func (h AETH) SetSyndrome(s Syndrome) { h[aethSyndrome] = byte(s) }

// SetMSN sets the message sequence number (24 bits).
func (h AETH) SetMSN(v uint32) { setUint24(h[aethMSN:], v) }

// Syndrome is an AETH syndrome byte.
type Syndrome uint8

// AckType is the type encoded in bits 6:5 of a syndrome.
type AckType uint8

// Syndrome types (IBTA table 43). Type 10 is reserved.
const (
	AckTypeACK      AckType = 0 // ACK; the value is the credit count code
	AckTypeRNRNAK   AckType = 1 // receiver not ready; the value is the RNR timer code
	AckTypeReserved AckType = 2 // reserved: a syndrome of this type is invalid
	AckTypeNAK      AckType = 3 // NAK; the value is one of the NAK codes
)

// NAK codes carried in a NAK syndrome's value (IBTA table 44), and the credit code of
// an ACK that advertises no end-to-end credits.
const (
	NAKPSNSequenceError     = 0    // a PSN out of sequence
	NAKInvalidRequest       = 1    // an opcode or length the responder cannot accept
	NAKRemoteAccessError    = 2    // an R_Key, address or access right that fails
	NAKRemoteOperational    = 3    // the responder could not complete the request
	NAKInvalidRDRequest     = 4    // an invalid RD request
	AETHCreditsUnlimited    = 0x1F // credit code: no end-to-end flow control
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

// String returns the type's name: ACK, RNR_NAK, NAK or RESERVED.
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

// Offsets of the AtomicETH's fields.
const (
	atomicVA      = 0  // Virtual Address (64 bits)
	atomicRKey    = 8  // R_Key (32 bits)
	atomicSwapAdd = 12 // Swap (CmpSwap) or Add (FetchAdd) Data (64 bits)
	atomicCompare = 20 // Compare Data (64 bits)
)

// VA returns the virtual address of the remote 8-byte operand.
func (h AtomicETH) VA() uint64 { return binary.BigEndian.Uint64(h[atomicVA:]) }

// RKey returns the R_Key of the remote memory region.
func (h AtomicETH) RKey() uint32 { return binary.BigEndian.Uint32(h[atomicRKey:]) }

// SwapAdd returns the value CmpSwap stores or FetchAdd adds.
func (h AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(h[atomicSwapAdd:]) }

// Compare returns the value CmpSwap compares the operand with.
func (h AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(h[atomicCompare:]) }

// SetVA sets the virtual address.
func (h AtomicETH) SetVA(v uint64) { binary.BigEndian.PutUint64(h[atomicVA:], v) }

// SetRKey sets the R_Key.
func (h AtomicETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h[atomicRKey:], v) }

// SetSwapAdd sets the swap or add data.
func (h AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(h[atomicSwapAdd:], v) }

// SetCompare sets the compare data.
func (h AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(h[atomicCompare:], v) }

// AtomicAckETH is a view of the 8-byte Atomic Acknowledge Extended Transport Header:
// the original remote data of the atomic operation.
type AtomicAckETH []byte

// AtomicAckETHSize is the size of an AtomicAckETH.
const AtomicAckETHSize = 8

// Orig returns the remote operand as it was before the atomic operation.
func (h AtomicAckETH) Orig() uint64 { return binary.BigEndian.Uint64(h) }

// SetOrig sets the original remote data.
func (h AtomicAckETH) SetOrig(v uint64) { binary.BigEndian.PutUint64(h, v) }

// ImmDt is a view of the 4-byte Immediate Data Extended Transport Header. The value is
// carried in network byte order, as ibv_wc.imm_data is.
type ImmDt []byte

// ImmDtSize is the size of an ImmDt header.
const ImmDtSize = 4

// Imm returns the immediate data.
func (h ImmDt) Imm() uint32 { return binary.BigEndian.Uint32(h) }

// SetImm sets the immediate data.
func (h ImmDt) SetImm(v uint32) { binary.BigEndian.PutUint32(h, v) }

// IETH is a view of the 4-byte Invalidate Extended Transport Header: the R_Key that a
// SEND with Invalidate invalidates at the responder.
type IETH []byte

// IETHSize is the size of an IETH.
const IETHSize = 4

// RKey returns the R_Key to invalidate.
func (h IETH) RKey() uint32 { return binary.BigEndian.Uint32(h) }

// SetRKey sets the R_Key to invalidate.
func (h IETH) SetRKey(v uint32) { binary.BigEndian.PutUint32(h, v) }

// XRCETH is a view of the 4-byte XRC Extended Transport Header that every XRC request
// carries right after the BTH: the number of the XRC SRQ at the target whose receive
// WQEs (and completion queue) the message uses.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Reserved    |                  XRC SRQ number               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type XRCETH []byte

// XRCETHSize is the size of an XRCETH.
const XRCETHSize = 4

const xrcethSRQN = 1 // the 24-bit SRQ number follows one reserved byte

// SRQN returns the target XRC SRQ's number.
func (h XRCETH) SRQN() uint32 {
	return uint32(h[xrcethSRQN])<<16 | uint32(h[xrcethSRQN+1])<<8 | uint32(h[xrcethSRQN+2])
}

// SetSRQN sets the target XRC SRQ's number (its low 24 bits) and clears the reserved byte.
func (h XRCETH) SetSRQN(v uint32) {
	h[0] = 0
	h[xrcethSRQN], h[xrcethSRQN+1], h[xrcethSRQN+2] = byte(v>>16), byte(v>>8), byte(v)
}

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

// Offsets of the DETH's fields.
const (
	dethQKey     = 0 // Q_Key (32 bits)
	dethReserved = 4 // reserved byte
	dethSrcQP    = 5 // Source QP (24 bits)
)

// QKey returns the queue key the destination QP checks.
func (h DETH) QKey() uint32 { return binary.BigEndian.Uint32(h[dethQKey:]) }

// SrcQP returns the sender's QP number.
func (h DETH) SrcQP() QPN { return QPN(uint24(h[dethSrcQP:])) }

// SetQKey sets the queue key.
func (h DETH) SetQKey(v uint32) { binary.BigEndian.PutUint32(h[dethQKey:], v) }

// SetSrcQP sets the source QP number and clears the reserved byte before it.
func (h DETH) SetSrcQP(q QPN) { h[dethReserved] = 0; setUint24(h[dethSrcQP:], uint32(q)) }

// CNPReserved is a view of the 16 reserved bytes that follow the BTH of a RoCEv2
// Congestion Notification Packet (IBTA Annex A17.9.2); a sender writes zeros.
type CNPReserved []byte

// CNPReservedSize is the size of the CNP's reserved block.
const CNPReservedSize = 16
