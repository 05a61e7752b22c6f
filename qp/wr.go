package qp

import (
	"errors"
	"fmt"
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at Addr of the region
// named by LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr, one at a time). The QP keeps the
// SGL slice until the request completes; the caller must not modify it meanwhile.
type SendWR struct {
	WRID   uint64
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	Imm    uint32 // immediate data as carried on the wire (WITH_IMM opcodes)

	InvalidateRKey uint32 // SEND_WITH_INV: the rkey the responder invalidates; LOCAL_INV: the rkey to invalidate

	Bind MWBind // BIND_MW

	RemoteAddr uint64 // RDMA and atomic operations
	RKey       uint32

	CompareAdd uint64 // atomics: the compare value (CMP_AND_SWP) or the addend (FETCH_AND_ADD)
	Swap       uint64 // CMP_AND_SWP: the swap value

	// UD only: the address handle, the destination QPN and Q_Key. A Q_Key with the
	// high bit set means "use the QP's own Q_Key" (IBTA 10.2.5).
	AH         *AddressVector
	RemoteQPN  uint32
	RemoteQKey uint32

	// XRC_SEND only: the number of the XRC SRQ at the target that receives the message
	// (ibv_send_wr.qp_type.xrc.remote_srqn), carried in every request's XRCETH.
	RemoteSRQN uint32
}

// MWBind is what a BIND_MW work request binds (ibv_send_wr.bind_mw): the window now
// named by MWRKey gets the key NewRKey (same index, a new low byte) and grants Access
// to [Addr, Addr+Length) of the MR named by MRLKey. Length 0 unbinds it.
type MWBind struct {
	MWRKey  uint32
	NewRKey uint32
	MRLKey  uint32
	Addr    uint64
	Length  uint64
	Access  Access
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

// Errors of PostSend and PostRecv, as ibv_post_send/ibv_post_recv return errno values
// for them. Each is wrapped with the detail.
var (
	ErrQueueFull    = errors.New("work queue full")              // ENOMEM
	ErrInvalidWR    = errors.New("invalid work request")         // EINVAL
	ErrInvalidState = errors.New("QP state forbids the request") // EINVAL
)

// maxMessage is the largest message length (IBTA: 2^31 bytes).
const maxMessage = 1 << 31

func sglLength(sgl []SGE) (uint64, error) {
	var n uint64
	for _, s := range sgl {
		n += uint64(s.Length)
	}
	if n > maxMessage {
		return 0, fmt.Errorf("%w: message of %d bytes exceeds 2^31", ErrInvalidWR, n)
	}
	return n, nil
}

// checkSendWR validates a work request for a QP of type t, returning its length.
func (q *QP) checkSendWR(wr *SendWR) (uint32, error) {
	if len(wr.SGL) > q.cfg.MaxSGE {
		return 0, fmt.Errorf("%w: %d SGEs, the QP allows %d", ErrInvalidWR, len(wr.SGL), q.cfg.MaxSGE)
	}
	n, err := sglLength(wr.SGL)
	if err != nil {
		return 0, err
	}
	switch q.cfg.Type {
	case XRCRecv:
		return 0, fmt.Errorf("%w: an XRC_RECV QP has no send queue", ErrInvalidWR)
	case UD:
		if wr.Opcode != WRSend && wr.Opcode != WRSendWithImm {
			return 0, fmt.Errorf("%w: %v on a UD QP", ErrInvalidWR, wr.Opcode)
		}
		if wr.AH == nil {
			return 0, fmt.Errorf("%w: UD send without an address handle", ErrInvalidWR)
		}
		if err := wr.AH.Check(); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidWR, err)
		}
		if wr.RemoteQPN > 0xFFFFFF {
			return 0, fmt.Errorf("%w: remote QPN %#x exceeds 24 bits", ErrInvalidWR, wr.RemoteQPN)
		}
	case UC:
		if !wr.Opcode.isWrite() && wr.Opcode != WRSend && wr.Opcode != WRSendWithImm && !wr.Opcode.isLocal() {
			return 0, fmt.Errorf("%w: %v on a UC QP", ErrInvalidWR, wr.Opcode)
		}
	case RC, XRCSend:
		if q.cfg.Type == XRCSend && wr.RemoteSRQN > 0xFFFFFF {
			return 0, fmt.Errorf("%w: remote SRQ number %#x exceeds 24 bits", ErrInvalidWR, wr.RemoteSRQN)
		}
		switch {
		case wr.Opcode.isSend(), wr.Opcode.isWrite(), wr.Opcode == WRRead, wr.Opcode.isLocal():
		case wr.Opcode.isAtomic():
			if n != 8 {
				return 0, fmt.Errorf("%w: %v needs one 8-byte local buffer, got %d bytes", ErrInvalidWR, wr.Opcode, n)
			}
		default:
			return 0, fmt.Errorf("%w: unknown opcode %v", ErrInvalidWR, wr.Opcode)
		}
	}
	return uint32(n), nil
}
