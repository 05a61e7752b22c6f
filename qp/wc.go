package qp

// WC is a work completion (struct ibv_wc).
type WC struct {
	WRID      uint64
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32
	// Imm is the immediate data as carried on the wire (WCFlagWithImm), or the
	// invalidated rkey (WCFlagWithInv): ibv_wc's imm_data/invalidated_rkey union.
	Imm       uint32
	QPNum     uint32
	SrcQP     uint32 // UD: the sender's QPN
	Flags     WCFlags
	PKeyIndex uint16
	// SL of a UD receive over RoCEv2 is the received frame's L3 header type, as a
	// ConnectX CQE reports it in ibv_wc.sl (SLIPv4, SLIPv6); rxe leaves it 0, which UCX's
	// ud_verbs takes for IPv6 and so misreads every IPv4 GRH (docs/libibverbs.md).
	SL uint8
}

// RoCEv2 L3 header types in WC.SL (the ConnectX CQE's roce_packet_type).
const (
	SLIPv6 = 1
	SLIPv4 = 2
)

// CompletionQueue receives a QP's completions (its send CQ or receive CQ), in the order
// the QP produces them. The rnic implements it over its CQ rings; a full CQ is the
// rnic's to report (IBV_EVENT_CQ_ERR).
type CompletionQueue interface {
	Push(wc WC)
}
