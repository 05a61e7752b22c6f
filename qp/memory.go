package qp

import "errors"

// Memory is the QP's view of registered memory: the memory regions of its protection
// domain, named by lkey (local access) or rkey (remote access). The rnic implements it
// over its MRs in shared memory; tests use fakes.
//
// Every method checks, before touching any byte, that the key names a valid region,
// that [addr, addr+length) lies inside it and that the region grants need; it returns
// an error wrapping ErrInvalidKey, ErrOutOfBounds or ErrAccessDenied otherwise. need is
// AccessLocalRead (no flag) for gathering local data to send, AccessLocalWrite for
// scattering into local buffers, and one of the remote flags for the responder's rkey
// checks; a remote flag means key is an rkey. Methods must not retain the slices they
// are given and must not allocate in steady state.
type Memory interface {
	// Read copies len(dst) bytes at addr of the region key names into dst.
	Read(key uint32, addr uint64, dst []byte, need Access) error

	// Write copies src to addr of the region key names.
	Write(key uint32, addr uint64, src []byte, need Access) error

	// Check validates an access of length bytes at addr without moving data: the
	// responder checks a whole RDMA WRITE or READ when its first packet arrives.
	Check(key uint32, addr uint64, length uint64, need Access) error

	// Atomic executes op on the 8-byte word at addr, which the caller has checked is
	// 8-byte aligned, and returns the word's original value. It must be linearizable
	// with every other Atomic on the same word, from any QP and any goroutine (a real
	// MR uses sync/atomic on the shared mapping). The word is in host (little-endian)
	// byte order, as a NIC on x86 treats it; the wire carries big-endian values.
	Atomic(key uint32, addr uint64, op AtomicOp, need Access) (orig uint64, err error)

	// Invalidate invalidates the memory window or fast-registration MR named by rkey,
	// for SEND with Invalidate and LOCAL_INV. It returns an error wrapping
	// ErrInvalidKey if the key cannot be invalidated.
	Invalidate(rkey uint32) error

	// BindMW executes a BIND_MW work request when the requester reaches it, in order
	// with the QP's other work requests. An error fails the request with MW_BIND_ERR.
	BindMW(b *MWBind) error
}

// AtomicOp is an atomic operation: CompareSwap stores Swap if the word equals Compare;
// otherwise (FetchAdd) it adds Add.
type AtomicOp struct {
	CompareSwap bool
	Compare     uint64
	SwapAdd     uint64 // the swap value (CompareSwap) or the addend (FetchAdd)
}

// Apply returns the new value of a word holding orig.
func (op AtomicOp) Apply(orig uint64) uint64 {
	if op.CompareSwap {
		if orig == op.Compare {
			return op.SwapAdd
		}
		return orig
	}
	return orig + op.SwapAdd
}

// Errors a Memory wraps.
var (
	ErrInvalidKey   = errors.New("invalid memory key")
	ErrOutOfBounds  = errors.New("access outside the memory region")
	ErrAccessDenied = errors.New("memory region does not grant the access")
)
