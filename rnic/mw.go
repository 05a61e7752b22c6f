package rnic

import "github.com/rocelab/rocelab/qp"

// MWType is a memory window's type (enum ibv_mw_type).
type MWType uint8

// Memory window types.
const (
	MWType1 MWType = 1 // IBV_MW_TYPE_1: bound by ibv_bind_mw, invalidated only by a new bind
	MWType2 MWType = 2 // IBV_MW_TYPE_2: bound by a BIND_MW work request, usable by that QP only
)

// MW is a memory window (ibv_mw): remote access, with its own rkey and access flags, to
// part of an MR that grants MW_BIND. It follows rxe_mw.c: a type 1 window is valid from
// allocation and a bind replaces its range; a type 2 window is free until a BIND_MW WR
// binds it through a QP, and LOCAL_INV or SEND_WITH_INV frees it again.
type MW struct {
	pd     *PD
	typ    MWType
	rkey   uint32 // the index (upper 24 bits) is fixed; each bind sets the low byte
	valid  bool   // type 1: until deallocated; type 2: bound and not invalidated
	mr     *MR    // the bound MR, nil while the window covers nothing
	addr   uint64
	length uint64
	access qp.Access
	qpn    uint32 // type 2: the QP that bound it
	live   bool
}

// RKey returns the window's current rkey (ibv_mw.rkey).
func (w *MW) RKey() uint32 { return w.rkey }

// Type returns the window's type.
func (w *MW) Type() MWType { return w.typ }

// AllocMW allocates a memory window (ibv_alloc_mw). A type other than 1 or 2 fails
// with ErrInvalidArgument (EINVAL), as the kernel's uverbs does.
func (d *Device) AllocMW(pd *PD, typ MWType) (*MW, error) {
	if d.closed {
		return nil, errorf(ErrClosed, "alloc MW on %s", d.cfg.Name)
	}
	if pd == nil || pd.dev != d {
		return nil, errorf(ErrInvalidArgument, "alloc MW: the PD belongs to another device")
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, errorf(ErrInvalidArgument, "memory window type %d: only 1 and 2 exist", typ)
	}
	d.nextKey++
	w := &MW{pd: pd, typ: typ, rkey: d.nextKey<<8 | uint32(d.nextKey*0x9E&0xFF), valid: typ == MWType1, live: true}
	if d.cfg.RandomIDs {
		w.rkey = d.nextKey<<8 | randomUint32()&0xFF
	}
	pd.mws[w.rkey>>8] = w
	return w, nil
}

// DeallocMW frees a memory window (ibv_dealloc_mw), unbinding it first.
func (d *Device) DeallocMW(w *MW) error {
	if !w.live {
		return errorf(ErrInvalidArgument, "MW %#x already deallocated", w.rkey)
	}
	w.unbind()
	w.live, w.valid = false, false
	delete(w.pd.mws, w.rkey>>8)
	return nil
}

func (w *MW) unbind() {
	if w.mr != nil {
		w.mr.mws--
	}
	w.mr, w.addr, w.length, w.access, w.qpn = nil, 0, 0, 0, 0
}

// window returns the memory window rkey names for a remote access needing need, if
// this QP may use it (rxe_lookup_mw).
func (v *memView) window(rkey uint32, need qp.Access) (*MW, error) {
	w, ok := v.pd.mws[rkey>>8]
	switch {
	case !ok || w.rkey != rkey:
		return nil, errorf(qp.ErrInvalidKey, "no MR or MW with key %#x in the PD", rkey)
	case !w.valid || w.length == 0:
		return nil, errorf(qp.ErrInvalidKey, "MW %#x is not bound", rkey)
	case w.typ == MWType2 && w.qpn != v.qpn:
		return nil, errorf(qp.ErrInvalidKey, "MW %#x is bound to QP %#x, not %#x", rkey, w.qpn, v.qpn)
	case w.access&need != need:
		return nil, errorf(qp.ErrAccessDenied, "MW %#x grants %#x, the access needs %#x", rkey, w.access, need)
	}
	return w, nil
}

// Invalidate implements qp.Memory: LOCAL_INV and SEND_WITH_INV free a bound type 2
// window of the PD (rxe_invalidate_mw); type 1 windows and MRs cannot be invalidated.
func (v *memView) Invalidate(rkey uint32) error {
	w, ok := v.pd.mws[rkey>>8]
	switch {
	case !ok || w.rkey != rkey:
		return errorf(qp.ErrInvalidKey, "rkey %#x names no memory window of the PD", rkey)
	case !w.valid:
		return errorf(qp.ErrInvalidKey, "MW %#x is not bound", rkey)
	case w.typ == MWType1:
		return errorf(qp.ErrInvalidKey, "MW %#x is of type 1: only a bind invalidates it", rkey)
	}
	w.unbind()
	w.valid = false
	return nil
}

// BindMW implements qp.Memory: the checks of rxe_check_bind_mw, then the bind.
func (v *memView) BindMW(b *qp.MWBind) error {
	w, ok := v.pd.mws[b.MWRKey>>8]
	if !ok || w.rkey != b.MWRKey {
		return errorf(qp.ErrInvalidKey, "bind: rkey %#x names no memory window of the PD", b.MWRKey)
	}
	if b.NewRKey>>8 != w.rkey>>8 {
		return errorf(qp.ErrInvalidKey, "bind: new rkey %#x changes MW %#x's index", b.NewRKey, w.rkey)
	}
	var mr *MR
	if b.Length != 0 {
		if mr, ok = v.pd.mrs[b.MRLKey]; !ok {
			return errorf(qp.ErrInvalidKey, "bind: no MR with lkey %#x in the PD", b.MRLKey)
		}
	}
	switch {
	case w.typ == MWType1 && !w.valid:
		return errorf(qp.ErrInvalidKey, "bind: type 1 MW %#x is not valid", w.rkey)
	case w.typ == MWType2 && w.valid: // o10-37.2.30
		return errorf(qp.ErrInvalidKey, "bind: type 2 MW %#x is already bound", w.rkey)
	case w.typ == MWType2 && mr == nil: // o10-37.2.40
		return errorf(qp.ErrInvalidKey, "bind: type 2 MW %#x needs an MR and a length", w.rkey)
	case mr == nil:
	case mr.access&qp.AccessMWBind == 0: // C10-73
		return errorf(qp.ErrAccessDenied, "bind: MR %#x does not grant MW_BIND", mr.lkey)
	case b.Access&(qp.AccessRemoteWrite|qp.AccessRemoteAtomic) != 0 && mr.access&qp.AccessLocalWrite == 0: // C10-74
		return errorf(qp.ErrAccessDenied, "bind: remote write or atomic access through MR %#x without local write", mr.lkey)
	case b.Addr < mr.addr || b.Addr-mr.addr > mr.length || b.Length > mr.length-(b.Addr-mr.addr): // C10-75
		return errorf(qp.ErrOutOfBounds, "bind: [%#x, +%d) outside MR %#x at [%#x, +%d)", b.Addr, b.Length, mr.lkey, mr.addr, mr.length)
	}
	w.unbind()
	w.rkey, w.valid, w.access, w.addr, w.length = b.NewRKey, true, b.Access, b.Addr, b.Length
	if mr != nil {
		w.mr = mr
		mr.mws++
	}
	if w.typ == MWType2 {
		w.qpn = v.qpn
	}
	return nil
}
