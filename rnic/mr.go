package rnic

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
)

// MR is a registered memory region (ibv_mr): Length bytes of shared memory that the
// device reads and writes on behalf of its QPs. The memory is a memfd mapping, so the
// lab's verbs service can hand the same pages to an application in another process
// (SCM_RIGHTS): an RDMA WRITE lands directly in the application's buffer.
type MR struct {
	pd     *PD
	lkey   uint32
	rkey   uint32
	addr   uint64 // the address the application names the first byte by (iova)
	access qp.Access
	length uint64
	mem    []byte // nil on a PayloadFree device: the region is a length
	fd     int    // the memfd behind mem; -1 without one or once deregistered
	live   bool   // false once deregistered
	mws    int    // memory windows bound to it
}

// LKey returns the local key (ibv_mr.lkey).
func (m *MR) LKey() uint32 { return m.lkey }

// RKey returns the remote key (ibv_mr.rkey).
func (m *MR) RKey() uint32 { return m.rkey }

// Addr returns the address of the region's first byte as work requests name it.
func (m *MR) Addr() uint64 { return m.addr }

// Length returns the region's length in bytes.
func (m *MR) Length() int { return int(m.length) }

// Access returns the access flags the region grants.
func (m *MR) Access() qp.Access { return m.access }

// Bytes returns the region's memory. The device writes it from its loop while QPs are
// active: read it from the loop, or after the completion that covers the data. A
// PayloadFree device's regions have none: nil.
func (m *MR) Bytes() []byte { return m.mem }

// FD returns the memfd that backs the region, for passing to another process (-1 on a
// PayloadFree device, whose regions have no memory). It stays owned by the MR and is
// closed by DeregMR.
func (m *MR) FD() int { return m.fd }

// newMemfd creates and maps a memfd of length bytes.
func newMemfd(name string, length int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, os.NewSyscallError("memfd_create", err)
	}
	if err := unix.Ftruncate(fd, int64(length)); err != nil {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError("ftruncate", err)
	}
	mem, err = mapFD(fd, 0, length)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}

func mapFD(fd int, offset int64, length int) ([]byte, error) {
	mem, err := unix.Mmap(fd, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return mem, nil
}

// span returns the bytes [addr, addr+n) of the region after checking key kind, bounds
// and access; it is the one place qp.Memory's contract is enforced. A region without
// memory (PayloadFree) checks the same and returns nil.
func (m *MR) span(addr, n uint64, need qp.Access) ([]byte, error) {
	if m.access&need != need {
		return nil, errorf(qp.ErrAccessDenied, "MR %#x grants %#x, the access needs %#x", m.lkey, m.access, need)
	}
	if addr < m.addr || addr-m.addr > m.length || n > m.length-(addr-m.addr) {
		return nil, errorf(qp.ErrOutOfBounds, "[%#x, +%d) outside MR %#x at [%#x, +%d)", addr, n, m.lkey, m.addr, m.length)
	}
	if m.mem == nil {
		return nil, nil
	}
	off := addr - m.addr
	return m.mem[off : off+n], nil
}

// word returns the 8-byte word at addr for an atomic.
func (m *MR) word(addr uint64, need qp.Access) (*uint64, error) {
	b, err := m.span(addr, 8, need)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errorf(qp.ErrAccessDenied, "MR %#x has no memory (payload-free device): no atomics", m.lkey)
	}
	return (*uint64)(unsafe.Pointer(&b[0])), nil
}

// atomic runs op on the word at w: linearizable with any other atomic on the same
// mapping, in this process or another, because it is a CPU atomic on shared memory.
func atomicApply(w *uint64, op qp.AtomicOp) uint64 {
	if op.CompareSwap {
		for {
			old := atomic.LoadUint64(w)
			if old != op.Compare || atomic.CompareAndSwapUint64(w, old, op.SwapAdd) {
				return old
			}
		}
	}
	return atomic.AddUint64(w, op.SwapAdd) - op.SwapAdd
}
