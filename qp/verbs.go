package qp

import "fmt"

// The numeric values in this file are those of rdma-core's <infiniband/verbs.h>, so the
// rnic's verbs service can pass them through unchanged.

// Type is a QP transport service type (enum ibv_qp_type).
type Type uint8

// QP types.
const (
	RC Type = 2 // IBV_QPT_RC: reliable connected
	UC Type = 3 // IBV_QPT_UC: unreliable connected
	UD Type = 4 // IBV_QPT_UD: unreliable datagram

	// XRCSend is an XRC initiator (IBV_QPT_XRC_SEND): an RC requester without a
	// receive queue whose every request names the target's XRC SRQ (SendWR.RemoteSRQN).
	XRCSend Type = 9
	// XRCRecv is an XRC target (IBV_QPT_XRC_RECV): an RC responder without a send or
	// receive queue of its own; each request's XRCETH selects the XRC SRQ (and so the
	// CQ) its message is received through (Config.XRCSRQ).
	XRCRecv Type = 10
)

// String returns the transport's name: RC, UC, UD, XRC_SEND or XRC_RECV.
func (t Type) String() string {
	switch t {
	case XRCSend:
		return "XRC_SEND"
	case XRCRecv:
		return "XRC_RECV"
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// reliable reports whether t is acknowledged: RC and both XRC halves, which run RC's
// protocol in the XRC opcode space.
func (t Type) reliable() bool { return t == RC || t == XRCSend || t == XRCRecv }

// isXRC reports whether t is one of the XRC halves.
func (t Type) isXRC() bool { return t == XRCSend || t == XRCRecv }

// State is a QP state (enum ibv_qp_state).
type State uint8

// QP states.
const (
	StateReset State = iota // IBV_QPS_RESET
	StateInit               // IBV_QPS_INIT
	StateRTR                // IBV_QPS_RTR: ready to receive
	StateRTS                // IBV_QPS_RTS: ready to send
	StateSQD                // IBV_QPS_SQD: send queue drained
	StateSQE                // IBV_QPS_SQE: send queue error (UC, UD)
	StateErr                // IBV_QPS_ERR
)

var stateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state's name as the verbs spell it (RESET, INIT, ...).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Access is a set of access flags (enum ibv_access_flags), for QPs and memory regions.
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
	AccessMWBind       Access = 1 << 4 // IBV_ACCESS_MW_BIND: memory windows may be bound to the MR

	// AccessLocalRead is the empty set: reading local memory to send it needs no flag.
	AccessLocalRead Access = 0
)

// WROpcode is a send work request opcode (enum ibv_wr_opcode).
type WROpcode uint8

// Send work request opcodes.
const (
	WRWrite        WROpcode = 0 // IBV_WR_RDMA_WRITE
	WRWriteWithImm WROpcode = 1 // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend         WROpcode = 2 // IBV_WR_SEND
	WRSendWithImm  WROpcode = 3 // IBV_WR_SEND_WITH_IMM
	WRRead         WROpcode = 4 // IBV_WR_RDMA_READ
	WRCompareSwap  WROpcode = 5 // IBV_WR_ATOMIC_CMP_AND_SWP
	WRFetchAdd     WROpcode = 6 // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv     WROpcode = 7 // IBV_WR_LOCAL_INV: invalidate a type 2 memory window
	WRBindMW       WROpcode = 8 // IBV_WR_BIND_MW: bind a memory window
	WRSendWithInv  WROpcode = 9 // IBV_WR_SEND_WITH_INV
)

var wrOpcodeNames = map[WROpcode]string{
	WRWrite: "RDMA_WRITE", WRWriteWithImm: "RDMA_WRITE_WITH_IMM", WRSend: "SEND",
	WRSendWithImm: "SEND_WITH_IMM", WRRead: "RDMA_READ", WRCompareSwap: "ATOMIC_CMP_AND_SWP",
	WRFetchAdd: "ATOMIC_FETCH_AND_ADD", WRSendWithInv: "SEND_WITH_INV", WRLocalInv: "LOCAL_INV",
	WRBindMW: "BIND_MW",
}

// String returns the opcode's name as the verbs spell it.
func (o WROpcode) String() string {
	if n, ok := wrOpcodeNames[o]; ok {
		return n
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

func (o WROpcode) isSend() bool {
	return o == WRSend || o == WRSendWithImm || o == WRSendWithInv
}
func (o WROpcode) isWrite() bool  { return o == WRWrite || o == WRWriteWithImm }
func (o WROpcode) isAtomic() bool { return o == WRCompareSwap || o == WRFetchAdd }

// isLocal reports a local operation: the requester executes it in order with the
// other WQEs, and it sends no packet (rxe's WR_LOCAL_OP_MASK).
func (o WROpcode) isLocal() bool { return o == WRLocalInv || o == WRBindMW }

// readOrAtomic reports whether the operation consumes a responder resource and is
// bounded by max_rd_atomic.
func (o WROpcode) readOrAtomic() bool { return o == WRRead || o.isAtomic() }

// SendFlags are the flags of a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE: wait for prior READs and atomics
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: generate a completion
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: set the BTH SE bit
)

// WCOpcode is a completion opcode (enum ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend             WCOpcode = 0   // IBV_WC_SEND
	WCWrite            WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRead             WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompareSwap      WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd         WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCBindMW           WCOpcode = 5   // IBV_WC_BIND_MW
	WCLocalInv         WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCRecv             WCOpcode = 128 // IBV_WC_RECV
	WCRecvWriteWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM
)

// wcOpcode maps a send opcode to the opcode of its completion.
func (o WROpcode) wcOpcode() WCOpcode {
	switch o {
	case WRWrite, WRWriteWithImm:
		return WCWrite
	case WRRead:
		return WCRead
	case WRCompareSwap:
		return WCCompareSwap
	case WRFetchAdd:
		return WCFetchAdd
	case WRBindMW:
		return WCBindMW
	case WRLocalInv:
		return WCLocalInv
	}
	return WCSend
}

// WCStatus is a completion status (enum ibv_wc_status).
type WCStatus uint8

// Completion statuses.
const (
	WCSuccess        WCStatus = 0  // IBV_WC_SUCCESS
	WCLocLenErr      WCStatus = 1  // IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr     WCStatus = 2  // IBV_WC_LOC_QP_OP_ERR
	WCLocProtErr     WCStatus = 4  // IBV_WC_LOC_PROT_ERR
	WCWRFlushErr     WCStatus = 5  // IBV_WC_WR_FLUSH_ERR
	WCMWBindErr      WCStatus = 6  // IBV_WC_MW_BIND_ERR
	WCBadRespErr     WCStatus = 7  // IBV_WC_BAD_RESP_ERR
	WCLocAccessErr   WCStatus = 8  // IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr   WCStatus = 9  // IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr   WCStatus = 10 // IBV_WC_REM_ACCESS_ERR
	WCRemOpErr       WCStatus = 11 // IBV_WC_REM_OP_ERR
	WCRetryExcErr    WCStatus = 12 // IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr WCStatus = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	WCRemInvRdReqErr WCStatus = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	WCGeneralErr     WCStatus = 21 // IBV_WC_GENERAL_ERR
)

var wcStatusNames = map[WCStatus]string{
	WCSuccess: "SUCCESS", WCLocLenErr: "LOC_LEN_ERR", WCLocQPOpErr: "LOC_QP_OP_ERR",
	WCLocProtErr: "LOC_PROT_ERR", WCWRFlushErr: "WR_FLUSH_ERR", WCMWBindErr: "MW_BIND_ERR", WCBadRespErr: "BAD_RESP_ERR",
	WCLocAccessErr: "LOC_ACCESS_ERR", WCRemInvReqErr: "REM_INV_REQ_ERR",
	WCRemAccessErr: "REM_ACCESS_ERR", WCRemOpErr: "REM_OP_ERR", WCRetryExcErr: "RETRY_EXC_ERR",
	WCRNRRetryExcErr: "RNR_RETRY_EXC_ERR", WCRemInvRdReqErr: "REM_INV_RD_REQ_ERR",
	WCGeneralErr: "GENERAL_ERR",
}

// String returns the status as ibv_wc_status_str spells it, without the prefix.
func (s WCStatus) String() string {
	if n, ok := wcStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WCFlags are completion flags (enum ibv_wc_flags).
type WCFlags uint32

// Completion flags.
const (
	WCFlagGRH     WCFlags = 1 << 0 // IBV_WC_GRH: the first 40 bytes of the buffer hold a GRH
	WCFlagWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM: Imm is valid
	WCFlagWithInv WCFlags = 1 << 3 // IBV_WC_WITH_INV: InvalidatedRKey is valid
)
