package rnic

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
)

// PD is a protection domain (ibv_pd): the memory regions, address handles, QPs and
// SRQs created in it may only be used together. It implements qp.Memory for its QPs.
type PD struct {
	dev  *Device
	mrs  map[uint32]*MR // by key: lkey and rkey are equal, as in rxe
	mws  map[uint32]*MW // by index (rkey>>8): a bind changes the rkey's low byte
	refs int            // QPs, SRQs and AHs created in the PD
	// hot is the MR the last lookup found. Every packet of a message names the same
	// key, and a map lookup is a hash once the PD holds more than a few regions (UCX
	// registers a dozen): under ucx_perftest's tag_bw, lookups took 4.0 % of the lab's
	// CPU with the map alone, 2.1 % with hot (perf, docs/libibverbs.md "UCX").
	hot *MR
}

var _ qp.Memory = (*PD)(nil)

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*PD, error) {
	if d.closed {
		return nil, errorf(ErrClosed, "alloc PD on %s", d.cfg.Name)
	}
	pd := &PD{dev: d, mrs: make(map[uint32]*MR), mws: make(map[uint32]*MW)}
	d.pds++
	return pd, nil
}

// DeallocPD frees a protection domain (ibv_dealloc_pd). It fails with ErrBusy while
// memory regions, QPs, SRQs or address handles still use it.
func (d *Device) DeallocPD(pd *PD) error {
	if len(pd.mrs) != 0 || len(pd.mws) != 0 || pd.refs != 0 {
		return errorf(ErrBusy, "PD still holds %d MRs, %d MWs and %d QPs/SRQs/AHs", len(pd.mrs), len(pd.mws), pd.refs)
	}
	d.pds--
	return nil
}

// RegMR registers length bytes of fresh shared memory (a memfd) with the access flags
// (ibv_reg_mr on a buffer the device allocates). The region's Addr is where the memory
// is mapped in this process.
func (d *Device) RegMR(pd *PD, length int, access qp.Access) (*MR, error) {
	if err := checkMR(pd, length, access); err != nil {
		return nil, err
	}
	if d.cfg.PayloadFree {
		// A length, not a buffer: addresses start where a 4 KiB-aligned mapping could.
		return pd.add(-1, nil, uint64(length), uint64(d.nextKey+1)<<32, access), nil
	}
	fd, mem, err := newMemfd(fmt.Sprintf("rocelab-%s-mr", d.cfg.Name), length)
	if err != nil {
		return nil, errorf(ErrNoMemory, "%d-byte MR: %v", length, err)
	}
	return pd.add(fd, mem, uint64(length), uint64(uintptr(unsafe.Pointer(&mem[0]))), access), nil
}

// RegMRFD registers length bytes of the shared memory fd at offset, which the
// application addresses from addr on (ibv_reg_mr over a buffer another process
// allocated in a memfd and passed to the device). The MR takes a duplicate of fd.
func (d *Device) RegMRFD(pd *PD, fd int, offset int64, length int, addr uint64, access qp.Access) (*MR, error) {
	if err := checkMR(pd, length, access); err != nil {
		return nil, err
	}
	if addr+uint64(length) < addr {
		return nil, errorf(ErrInvalidArgument, "MR at %#x of %d bytes wraps the address space", addr, length)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, errorf(ErrInvalidArgument, "memory fd %d: %v", fd, err)
	}
	mem, err := mapFD(dup, offset, length)
	if err != nil {
		unix.Close(dup)
		return nil, errorf(ErrInvalidArgument, "map %d bytes at %d of fd %d: %v", length, offset, fd, err)
	}
	return pd.add(dup, mem, uint64(length), addr, access), nil
}

func checkMR(pd *PD, length int, access qp.Access) error {
	if pd.dev.closed {
		return errorf(ErrClosed, "register MR")
	}
	if length <= 0 {
		return errorf(ErrInvalidArgument, "MR length %d: must be positive", length)
	}
	const known = qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead | qp.AccessRemoteAtomic | qp.AccessMWBind
	if access&^known != 0 {
		return errorf(ErrInvalidArgument, "unknown access flags %#x", access&^known)
	}
	// IBTA o10-29.2.1: remote write or atomic access needs local write access.
	if access&(qp.AccessRemoteWrite|qp.AccessRemoteAtomic) != 0 && access&qp.AccessLocalWrite == 0 {
		return errorf(ErrInvalidArgument, "remote write or atomic access %#x without local write", access)
	}
	return nil
}

func (pd *PD) add(fd int, mem []byte, length, addr uint64, access qp.Access) *MR {
	d := pd.dev
	d.nextKey++
	// rxe: index in the upper 24 bits (unique), a variant byte below it (random).
	key := d.nextKey<<8 | uint32(d.nextKey*0x9E&0xFF)
	if d.cfg.RandomIDs {
		key = d.nextKey<<8 | randomUint32()&0xFF
	}
	m := &MR{pd: pd, lkey: key, rkey: key, addr: addr, access: access, length: length, mem: mem, fd: fd, live: true}
	pd.mrs[key] = m
	return m
}

// DeregMR deregisters a memory region (ibv_dereg_mr) and unmaps its memory.
func (d *Device) DeregMR(m *MR) error {
	if !m.live {
		return errorf(ErrInvalidArgument, "MR %#x already deregistered", m.lkey)
	}
	if m.mws != 0 { // rxe_dereg_mr: EINVAL while windows are bound to it
		return errorf(ErrInvalidArgument, "MR %#x has %d memory windows bound", m.lkey, m.mws)
	}
	delete(m.pd.mrs, m.lkey)
	m.live = false
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	unix.Close(m.fd)
	m.mem, m.fd = nil, -1
	if err != nil {
		return errorf(ErrInvalidArgument, "unmap MR %#x: %v", m.lkey, err)
	}
	return nil
}

// ReregMR changes a region's PD (pd non-nil) and access flags (ibv_rereg_mr with
// IBV_REREG_MR_CHANGE_PD and IBV_REREG_MR_CHANGE_ACCESS), keeping its keys and memory:
// the two changes rxe supports. QPs of the old PD lose access to it at once.
func (d *Device) ReregMR(m *MR, pd *PD, access qp.Access, changeAccess bool) error {
	if !m.live {
		return errorf(ErrInvalidArgument, "MR %#x is deregistered", m.lkey)
	}
	if pd != nil && pd.dev != d {
		return errorf(ErrInvalidArgument, "MR %#x: the new PD belongs to another device", m.lkey)
	}
	to := m.pd
	if pd != nil {
		to = pd
	}
	if !changeAccess {
		access = m.access
	}
	if err := checkMR(to, int(max(m.length, 1)), access); err != nil {
		return err
	}
	delete(m.pd.mrs, m.lkey)
	m.pd, m.access = to, access
	to.mrs[m.lkey] = m
	return nil
}

// Read implements qp.Memory for users outside any QP (no type 2 window matches).
func (pd *PD) Read(key uint32, addr uint64, dst []byte, need qp.Access) error {
	return pd.view(0).Read(key, addr, dst, need)
}

// Write implements qp.Memory for users outside any QP.
func (pd *PD) Write(key uint32, addr uint64, src []byte, need qp.Access) error {
	return pd.view(0).Write(key, addr, src, need)
}

// Check implements qp.Memory for users outside any QP.
func (pd *PD) Check(key uint32, addr uint64, length uint64, need qp.Access) error {
	return pd.view(0).Check(key, addr, length, need)
}

// Atomic implements qp.Memory for users outside any QP.
func (pd *PD) Atomic(key uint32, addr uint64, op qp.AtomicOp, need qp.Access) (uint64, error) {
	return pd.view(0).Atomic(key, addr, op, need)
}

// Invalidate implements qp.Memory for users outside any QP.
func (pd *PD) Invalidate(rkey uint32) error { return pd.view(0).Invalidate(rkey) }

// BindMW implements qp.Memory for users outside any QP.
func (pd *PD) BindMW(b *qp.MWBind) error { return pd.view(0).BindMW(b) }

// view returns the PD as the QP numbered qpn sees it: a type 2 memory window is
// reachable only through the QP that bound it (rxe_lookup_mw).
func (pd *PD) view(qpn uint32) *memView { return &memView{pd: pd, qpn: qpn} }

// memView is the qp.Memory of one QP: its PD's MRs and memory windows.
type memView struct {
	pd  *PD
	qpn uint32
}

var _ qp.Memory = (*memView)(nil)

// span returns the bytes [addr, addr+n) named by key after the checks of qp.Memory:
// key names an MR of the PD or a valid memory window bound through this QP.
func (v *memView) span(key uint32, addr, n uint64, need qp.Access) (*MR, []byte, error) {
	// A live region whose PD is this one is in mrs under its key: checking hot so
	// answers as the map does, and deregistering or moving a region need not touch it.
	if m := v.pd.hot; m != nil && m.lkey == key && m.live && m.pd == v.pd {
		b, err := m.span(addr, n, need)
		return m, b, err
	}
	if m, ok := v.pd.mrs[key]; ok {
		v.pd.hot = m
		b, err := m.span(addr, n, need)
		return m, b, err
	}
	w, err := v.window(key, need)
	if err != nil {
		return nil, nil, err
	}
	if addr < w.addr || addr-w.addr > w.length || n > w.length-(addr-w.addr) {
		return nil, nil, errorf(qp.ErrOutOfBounds, "[%#x, +%d) outside MW %#x at [%#x, +%d)", addr, n, key, w.addr, w.length)
	}
	// The window's access replaces the MR's: the MR need only allow the binding.
	b, err := w.mr.span(addr, n, qp.AccessLocalRead)
	return w.mr, b, err
}

// Read implements qp.Memory.
func (v *memView) Read(key uint32, addr uint64, dst []byte, need qp.Access) error {
	_, b, err := v.span(key, addr, uint64(len(dst)), need)
	if err == nil {
		copy(dst, b)
	}
	return err
}

// Write implements qp.Memory.
func (v *memView) Write(key uint32, addr uint64, src []byte, need qp.Access) error {
	_, b, err := v.span(key, addr, uint64(len(src)), need)
	if err == nil {
		copy(b, src)
	}
	return err
}

// Check implements qp.Memory.
func (v *memView) Check(key uint32, addr uint64, length uint64, need qp.Access) error {
	_, _, err := v.span(key, addr, length, need)
	return err
}

// Atomic implements qp.Memory.
func (v *memView) Atomic(key uint32, addr uint64, op qp.AtomicOp, need qp.Access) (uint64, error) {
	m, _, err := v.span(key, addr, 8, need)
	if err != nil {
		return 0, err
	}
	w, err := m.word(addr, qp.AccessLocalRead)
	if err != nil {
		return 0, err
	}
	return atomicApply(w, op), nil
}
