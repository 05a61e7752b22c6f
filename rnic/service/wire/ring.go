package wire

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

func roceMTU(v uint16) roce.MTU { return roce.MTU(v) }
func rocePSN(v uint32) roce.PSN { return roce.PSN(v) }
func roceQPN(v uint32) roce.QPN { return roce.QPN(v) }

// A ring is a single-producer, single-consumer queue in shared memory: a header of three
// cache lines, then Cap entries of EntrySize bytes (Cap a power of two). Indices are
// free-running uint32 counters; entry i lives in slot i mod Cap. Each counter has its
// own cache line so that the two processes never write the same line.
//
//	 0                  64                 128                                   192
//	+------------------+------------------+-------------------------------------+
//	| Prod (u32)       | Cons (u32)       | Armed | Events | Error | (CQ only)  |
//	| written by the   | written by the   | u32   | u32    | u32   |            |
//	| producer only    | consumer only    | @128  | @132   | @136  |            |
//	+------------------+------------------+-------------------------------------+
//	| entry 0 | entry 1 | ... | entry Cap-1                                      |
//	+--------------------------------------------------------------------------+
//
// Work queues (send, receive, SRQ): the client produces WQEs (Prod); the service
// publishes in Cons how far the slots are free again — not merely read, but retired by
// the QP (completed, or implied complete by a later signaled completion), because the
// QP keeps a posted WR's scatter/gather list until then. Error is set by the service
// when the client broke the ring (an index out of range); the client's posts then fail.
//
// A QP's send ring keeps the QP's state (an ibv_qp_state) in the word at 128, written by
// the service whenever the state changes — by ibv_modify_qp, by the CM agent, by the
// transport's move to ERR — so that the client's posts check it as rxe checks them
// (sends from RTS on, receives from INIT on) without a call.
//
// Completion queues: the service produces CQEs (Prod), the client consumes (Cons).
// Armed is ibv_req_notify_cq: the client stores 1, whoever moves it back to 0 (CAS)
// raises one event: adds one to Events and writes the channel's eventfd. Error is set
// when the CQ overran.
type Ring struct {
	Mem       []byte
	Cap       uint32
	EntrySize uint32
}

// Ring header offsets.
const (
	RingHeader = 192
	offProd    = 0
	offCons    = 64
	offArmed   = 128
	offState   = 128 // a send ring's QP state; CQs' Armed
	offEvents  = 132
	offError   = 136
)

// RingBytes is the size of a ring of capacity cap (rounded up to a power of two).
func RingBytes(cap, entrySize uint32) uint64 {
	return RingHeader + uint64(cap)*uint64(entrySize)
}

// PageAlign rounds n up to a multiple of 4096.
func PageAlign(n uint64) uint64 { return (n + 4095) &^ 4095 }

// PowerOfTwo returns the smallest power of two ≥ n (≥ 1).
func PowerOfTwo(n uint32) uint32 {
	p := uint32(1)
	for p < n && p != 0 {
		p <<= 1
	}
	return p
}

// NewRing views mem as a ring. It reports false when mem is too small.
func NewRing(mem []byte, cap, entrySize uint32) (Ring, bool) {
	if cap == 0 || cap&(cap-1) != 0 || entrySize%8 != 0 || uint64(len(mem)) < RingBytes(cap, entrySize) {
		return Ring{}, false
	}
	return Ring{Mem: mem, Cap: cap, EntrySize: entrySize}, true
}

func (r *Ring) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r.Mem[off])) }

// Prod returns the header's producer index, for sync/atomic.
func (r *Ring) Prod() *uint32 { return r.word(offProd) }

// Cons returns the header's consumer index, for sync/atomic.
func (r *Ring) Cons() *uint32 { return r.word(offCons) }

// Armed returns a CQ ring's armed word (ibv_req_notify_cq), for sync/atomic.
func (r *Ring) Armed() *uint32 { return r.word(offArmed) }

// State returns a send ring's QP state word, which the service writes on every change,
// for sync/atomic. It shares its offset with a CQ ring's armed word.
func (r *Ring) State() *uint32 { return r.word(offState) }

// Events returns the header's count of events, for sync/atomic.
func (r *Ring) Events() *uint32 { return r.word(offEvents) }

// Error returns the header's error word, for sync/atomic.
func (r *Ring) Error() *uint32 { return r.word(offError) }

// Entry returns slot i mod Cap.
func (r *Ring) Entry(i uint32) []byte {
	off := RingHeader + uint64(i&(r.Cap-1))*uint64(r.EntrySize)
	return r.Mem[off : off+uint64(r.EntrySize) : off+uint64(r.EntrySize)]
}

// Ring error values (Ring.Error).
const (
	RingOK        = 0
	RingOverrun   = 1 // CQ: a completion found the ring full
	RingBadIndex  = 2 // WQ: Prod ran more than Cap ahead of Cons
	RingDestroyed = 3 // the object is gone (its connection's QP destroyed)
)

// Doorbell page: one per connection, PageSize bytes: Pending at offset 0 (written by the
// client and cleared by the service), Awake at offset 64 (written by the service only).
//
// The device's loop polls every connection's Pending while it is awake and sleeps on the
// service's doorbell eventfd (clock.Watch). A post publishes the WQE (Prod), swaps
// Pending to 1 and, only if Pending was 0 and Awake is 0, writes the eventfd. The
// service clears Awake before the loop sleeps and then looks at Pending once more; it
// sets Awake after the loop woke, and clears Pending before it scans the rings. So a
// post costs no system call while the loop is awake (working, or spinning before a
// deadline), and one eventfd write — one wake-up, of the loop itself — when it sleeps.
// A service that never sets Awake (version 1 without it) gets an eventfd write for
// every post that finds Pending 0, as before.
const PageSize = 4096

// Pending returns the doorbell page's Pending word.
func Pending(page []byte) *uint32 { return (*uint32)(unsafe.Pointer(&page[0])) }

// Awake returns the doorbell page's Awake word.
func Awake(page []byte) *uint32 { return (*uint32)(unsafe.Pointer(&page[64])) }

// Send WQE, SendEntrySize(maxSGE) bytes:
//
//	 0       8     9      10      12        16     20     24            32
//	+-------+-----+------+-------+---------+------+------+-------------+
//	| WRID  | Op  | NSGE | 0     | Flags   | Imm  | RKey | RemoteAddr  |
//	+-------+-----+------+-------+---------+------+------+-------------+
//	 32            40      48    52          56           60          64
//	+-------------+-------+-----+-----------+------------+-----------+
//	| CompareAdd  | Swap  | AH  | RemoteQPN | RemoteQKey | InvRKey   |
//	+-------------+-------+-----+-----------+------------+-----------+
//	 64: NSGE × { Addr u64, Length u32, LKey u32 }
//
// AH is the handle of an address handle (UD), 0 otherwise. An XRC_SEND QP's WQE carries
// the remote XRC SRQ number in RemoteQPN. A BIND_MW WQE (no SGE)
// reuses the fields: RKey is the window's current rkey, InvRKey its new one,
// RemoteAddr and CompareAdd the bound range's address and length, and Swap holds the
// MR's lkey (bytes 40-43) and the window's access flags (44-47).
const (
	SendWQEHeader = 64
	RecvWQEHeader = 16
	SGESize       = 16
	CQESize       = 64
)

// SendEntrySize is the size of a send WQE with room for maxSGE SGEs.
func SendEntrySize(maxSGE uint32) uint32 { return SendWQEHeader + SGESize*max(maxSGE, 1) }

// RecvEntrySize is the size of a receive WQE with room for maxSGE SGEs:
//
//	 0       8      12    16
//	+-------+------+-----+------------------------------------+
//	| WRID  | NSGE | 0   | NSGE × { Addr u64, Length u32, LKey u32 }
//	+-------+------+-----+------------------------------------+
func RecvEntrySize(maxSGE uint32) uint32 { return RecvWQEHeader + SGESize*max(maxSGE, 1) }

var le = binary.LittleEndian

// PutSendWQE encodes wr into e with the AH handle ah; it reports false if the SGL does
// not fit.
func PutSendWQE(e []byte, wr *qp.SendWR, ah uint32) bool {
	if SendWQEHeader+SGESize*len(wr.SGL) > len(e) || len(wr.SGL) > 255 {
		return false
	}
	le.PutUint64(e[0:], wr.WRID)
	e[8], e[9], e[10], e[11] = byte(wr.Opcode), byte(len(wr.SGL)), 0, 0
	le.PutUint32(e[12:], uint32(wr.Flags))
	le.PutUint32(e[16:], wr.Imm)
	le.PutUint32(e[20:], wr.RKey)
	le.PutUint64(e[24:], wr.RemoteAddr)
	le.PutUint64(e[32:], wr.CompareAdd)
	le.PutUint64(e[40:], wr.Swap)
	le.PutUint32(e[48:], ah)
	le.PutUint32(e[52:], wr.RemoteQPN)
	le.PutUint32(e[56:], wr.RemoteQKey)
	le.PutUint32(e[60:], wr.InvalidateRKey)
	if wr.Opcode == qp.WRBindMW {
		b := &wr.Bind
		le.PutUint32(e[20:], b.MWRKey)
		le.PutUint64(e[24:], b.Addr)
		le.PutUint64(e[32:], b.Length)
		le.PutUint32(e[40:], b.MRLKey)
		le.PutUint32(e[44:], uint32(b.Access))
		le.PutUint32(e[60:], b.NewRKey)
	}
	putSGL(e[SendWQEHeader:], wr.SGL)
	return true
}

func putSGL(b []byte, sgl []qp.SGE) {
	for i := range sgl {
		s := b[i*SGESize:]
		le.PutUint64(s, sgl[i].Addr)
		le.PutUint32(s[8:], sgl[i].Length)
		le.PutUint32(s[12:], sgl[i].LKey)
	}
}

// GetSendWQE decodes e into wr, whose SGL is resliced from sgl (never grown, so the
// service's per-slot storage is reused); it returns the AH handle, or ok=false when the
// SGE count exceeds len(sgl) or the entry.
func GetSendWQE(e []byte, wr *qp.SendWR, sgl []qp.SGE) (ah uint32, ok bool) {
	if len(e) < SendWQEHeader {
		return 0, false
	}
	n := int(e[9])
	if n > len(sgl) || SendWQEHeader+n*SGESize > len(e) {
		return 0, false
	}
	*wr = qp.SendWR{WRID: le.Uint64(e), Opcode: qp.WROpcode(e[8]), Flags: qp.SendFlags(le.Uint32(e[12:])),
		Imm: le.Uint32(e[16:]), RKey: le.Uint32(e[20:]), RemoteAddr: le.Uint64(e[24:]),
		CompareAdd: le.Uint64(e[32:]), Swap: le.Uint64(e[40:]), RemoteQPN: le.Uint32(e[52:]),
		RemoteQKey: le.Uint32(e[56:]), InvalidateRKey: le.Uint32(e[60:]), SGL: sgl[:n]}
	getSGL(e[SendWQEHeader:], wr.SGL)
	if wr.Opcode == qp.WRBindMW {
		wr.Bind = qp.MWBind{MWRKey: wr.RKey, NewRKey: wr.InvalidateRKey, MRLKey: le.Uint32(e[40:]),
			Addr: wr.RemoteAddr, Length: wr.CompareAdd, Access: qp.Access(le.Uint32(e[44:]))}
	}
	return le.Uint32(e[48:]), true
}

func getSGL(b []byte, sgl []qp.SGE) {
	for i := range sgl {
		s := b[i*SGESize:]
		sgl[i] = qp.SGE{Addr: le.Uint64(s), Length: le.Uint32(s[8:]), LKey: le.Uint32(s[12:])}
	}
}

// PutRecvWQE encodes wr into e; it reports false if the SGL does not fit.
func PutRecvWQE(e []byte, wr *qp.RecvWR) bool {
	if RecvWQEHeader+SGESize*len(wr.SGL) > len(e) {
		return false
	}
	le.PutUint64(e, wr.WRID)
	le.PutUint32(e[8:], uint32(len(wr.SGL)))
	le.PutUint32(e[12:], 0)
	putSGL(e[RecvWQEHeader:], wr.SGL)
	return true
}

// GetRecvWQE decodes e into wr, reslicing sgl as GetSendWQE does.
func GetRecvWQE(e []byte, wr *qp.RecvWR, sgl []qp.SGE) bool {
	if len(e) < RecvWQEHeader {
		return false
	}
	n := le.Uint32(e[8:])
	if n > uint32(len(sgl)) || RecvWQEHeader+uint64(n)*SGESize > uint64(len(e)) {
		return false
	}
	wr.WRID, wr.SGL = le.Uint64(e), sgl[:n]
	getSGL(e[RecvWQEHeader:], wr.SGL)
	return true
}

// CQE, 64 bytes (a cache line):
//
//	 0      8        9        10         12          16        20    24      28      32      36   37    64
//	+------+--------+--------+----------+-----------+---------+-----+-------+-------+-------+----+-----+
//	| WRID | Status | Opcode | PKeyIdx  | VendorErr | ByteLen | Imm | QPNum | SrcQP | Flags | SL | 0   |
//	+------+--------+--------+----------+-----------+---------+-----+-------+-------+-------+----+-----+

// PutCQE encodes wc into e.
func PutCQE(e []byte, wc *qp.WC) {
	_ = e[CQESize-1]
	le.PutUint64(e, wc.WRID)
	e[8], e[9] = byte(wc.Status), byte(wc.Opcode)
	le.PutUint16(e[10:], wc.PKeyIndex)
	le.PutUint32(e[12:], wc.VendorErr)
	le.PutUint32(e[16:], wc.ByteLen)
	le.PutUint32(e[20:], wc.Imm)
	le.PutUint32(e[24:], wc.QPNum)
	le.PutUint32(e[28:], wc.SrcQP)
	le.PutUint32(e[32:], uint32(wc.Flags))
	e[36] = wc.SL
}

// GetCQE decodes e into wc.
func GetCQE(e []byte, wc *qp.WC) {
	_ = e[CQESize-1]
	*wc = qp.WC{WRID: le.Uint64(e), Status: qp.WCStatus(e[8]), Opcode: qp.WCOpcode(e[9]),
		PKeyIndex: le.Uint16(e[10:]), VendorErr: le.Uint32(e[12:]), ByteLen: le.Uint32(e[16:]),
		Imm: le.Uint32(e[20:]), QPNum: le.Uint32(e[24:]), SrcQP: le.Uint32(e[28:]), Flags: qp.WCFlags(le.Uint32(e[32:])), SL: e[36]}
}

// Load is the atomic read both sides use on ring words.
func Load(p *uint32) uint32 { return atomic.LoadUint32(p) }

// Store is the atomic write both sides use on ring words.
func Store(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
