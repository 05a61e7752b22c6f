package service

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// call executes one control call on the loop. It owns fds (closing those it does not
// keep) and returns the response and the descriptors to send with it.
func (c *conn) call(op wire.Op, body []byte, fds []int, resp []byte) (out []byte, outFDs []int) {
	defer func() {
		// A bug in a handler must cost the client its call, not the lab its process.
		if r := recover(); r != nil {
			out, outFDs = wire.AppendError(resp, op, fmt.Errorf("%w: internal error: %v", rnic.ErrInvalidArgument, r)), nil
		}
	}()
	wantFDs := 0
	if op == wire.OpRegMR || op == wire.OpCreateCompChannel {
		wantFDs = 1
	}
	if len(fds) != wantFDs {
		wire.CloseFDs(fds)
		return wire.AppendError(resp, op, fmt.Errorf("%w: %v carries %d descriptors, want %d", wire.ErrProtocol, op, len(fds), wantFDs)), nil
	}
	if c.closed {
		wire.CloseFDs(fds)
		return wire.AppendError(resp, op, rnic.ErrClosed), nil
	}
	body2, fd, err := c.dispatch(op, body, fds)
	if err != nil {
		return wire.AppendError(resp, op, err), nil
	}
	if fd >= 0 {
		outFDs = []int{fd}
	}
	return wire.AppendResponse(resp, op, body2), outFDs
}

// dispatch decodes and runs a call. It returns the response body and, for the calls that
// create a ring, the ring's memfd.
func (c *conn) dispatch(op wire.Op, body []byte, fds []int) (any, int, error) {
	d := c.s.dev
	var h wire.Handle
	switch op {
	case wire.OpQueryDevice:
		if err := wire.DecodeBody(body, &struct{}{}); err != nil {
			return nil, -1, err
		}
		a := d.QueryDevice()
		r := &wire.DeviceAttr{NodeGUID: a.NodeGUID, MaxQP: uint32(a.MaxQP), MaxQPWR: uint32(a.MaxQPWR),
			MaxSGE: uint32(a.MaxSGE), MaxCQE: uint32(a.MaxCQE), MaxQPRdAtom: uint32(a.MaxQPRdAtom),
			MaxQPInitRdAtom: uint32(a.MaxQPInitRdAtm), PhysPortCnt: uint32(a.PhysPortCnt), MaxSRQ: maxObjects}
		wire.PutString(r.FWVer[:], a.FWVer)
		return r, -1, nil
	case wire.OpQueryPort:
		var q wire.QueryPort
		if err := wire.DecodeBody(body, &q); err != nil {
			return nil, -1, err
		}
		a, err := d.QueryPort(q.Port)
		if err != nil {
			return nil, -1, err
		}
		r := &wire.PortAttr{MaxMTU: uint16(a.MaxMTU), ActiveMTU: uint16(a.ActiveMTU), GIDTableLen: uint32(a.GIDTableLen), Rate: a.Rate}
		wire.PutString(r.State[:], a.State)
		wire.PutString(r.LinkLayer[:], a.LinkLayer)
		return r, -1, nil
	case wire.OpQueryGID:
		var q wire.QueryGID
		if err := wire.DecodeBody(body, &q); err != nil {
			return nil, -1, err
		}
		if q.Index > 1<<16 {
			return nil, -1, fmt.Errorf("%w: GID index %d", rnic.ErrInvalidArgument, q.Index)
		}
		g, err := d.QueryGID(int(q.Index))
		return &wire.GID{GID: g}, -1, err
	case wire.OpAllocPD:
		if err := wire.DecodeBody(body, &struct{}{}); err != nil {
			return nil, -1, err
		}
		pd, err := d.AllocPD()
		if err != nil {
			return nil, -1, err
		}
		hd, err := c.add(&sPD{pd: pd})
		if err != nil {
			d.DeallocPD(pd)
		}
		return &wire.Handle{Handle: hd}, -1, err
	case wire.OpRegMR:
		return c.regMR(body, fds[0])
	case wire.OpCreateCompChannel:
		if err := wire.DecodeBody(body, &struct{}{}); err != nil {
			unix.Close(fds[0])
			return nil, -1, err
		}
		hd, err := c.add(&sChannel{fd: fds[0]})
		if err != nil {
			unix.Close(fds[0])
		}
		return &wire.Handle{Handle: hd}, -1, err
	case wire.OpCreateCQ:
		return c.createCQ(body)
	case wire.OpCreateSRQ:
		return c.createSRQ(body)
	case wire.OpModifySRQ:
		var m wire.ModifySRQ
		if err := wire.DecodeBody(body, &m); err != nil {
			return nil, -1, err
		}
		s, err := get[*sSRQ](c, m.Handle, "SRQ")
		if err != nil {
			return nil, -1, err
		}
		if m.Limit > 1<<20 {
			return nil, -1, fmt.Errorf("%w: SRQ limit %d", rnic.ErrInvalidArgument, m.Limit)
		}
		return nil, -1, s.srq.ModifySRQ(int(m.Limit))
	case wire.OpCreateAH:
		var a wire.CreateAH
		if err := wire.DecodeBody(body, &a); err != nil {
			return nil, -1, err
		}
		pd, err := get[*sPD](c, a.PD, "PD")
		if err != nil {
			return nil, -1, err
		}
		if a.SGIDIndex > 1<<16 {
			return nil, -1, fmt.Errorf("%w: SGID index %d", rnic.ErrInvalidArgument, a.SGIDIndex)
		}
		ah, err := d.CreateAH(pd.pd, rnic.AHAttr{DGID: a.DGID, SGIDIndex: int(a.SGIDIndex), TrafficClass: a.TrafficClass,
			HopLimit: a.HopLimit, FlowLabel: a.FlowLabel})
		if err != nil {
			return nil, -1, err
		}
		hd, err := c.add(&sAH{ah: ah})
		if err != nil {
			d.DestroyAH(ah)
		}
		return &wire.Handle{Handle: hd}, -1, err
	case wire.OpCreateQP:
		return c.createQP(body)
	case wire.OpModifyQP:
		var m wire.ModifyQP
		if err := wire.DecodeBody(body, &m); err != nil {
			return nil, -1, err
		}
		x, err := get[*sQP](c, m.Handle, "QP")
		if err != nil {
			return nil, -1, err
		}
		a := m.Attr.QP()
		mask := qp.AttrMask(m.Mask)
		if err := d.ModifyQP(x.x, &a, mask); err != nil {
			return nil, -1, err
		}
		if mask&qp.AttrState != 0 && a.State == qp.StateReset {
			x.reset()
		}
		return nil, -1, nil
	case wire.OpQueryQP:
		if err := wire.DecodeBody(body, &h); err != nil {
			return nil, -1, err
		}
		x, err := get[*sQP](c, h.Handle, "QP")
		if err != nil {
			return nil, -1, err
		}
		a := d.QueryQP(x.x)
		r := wire.FromQPAttr(&a)
		return &r, -1, nil
	case wire.OpDeallocPD, wire.OpDeregMR, wire.OpDestroyCompChan, wire.OpDestroyCQ, wire.OpDestroySRQ,
		wire.OpDestroyAH, wire.OpDestroyQP:
		if err := wire.DecodeBody(body, &h); err != nil {
			return nil, -1, err
		}
		o, ok := c.objs[h.Handle]
		if !ok || destroyOp[kindOf(o)] != op {
			return nil, -1, fmt.Errorf("%w: %v: no such object (handle %d)", rnic.ErrNotFound, op, h.Handle)
		}
		if err := c.destroy(o); err != nil {
			return nil, -1, err
		}
		c.remove(h.Handle)
		return nil, -1, nil
	}
	return nil, -1, fmt.Errorf("%w: unknown call %v", rnic.ErrNotSupported, op)
}

var destroyOp = map[int]wire.Op{kindPD: wire.OpDeallocPD, kindMR: wire.OpDeregMR, kindChannel: wire.OpDestroyCompChan,
	kindCQ: wire.OpDestroyCQ, kindSRQ: wire.OpDestroySRQ, kindAH: wire.OpDestroyAH, kindQP: wire.OpDestroyQP}

func (c *conn) regMR(body []byte, fd int) (any, int, error) {
	defer unix.Close(fd) // RegMRFD keeps a duplicate
	var r wire.RegMR
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	pd, err := get[*sPD](c, r.PD, "PD")
	if err != nil {
		return nil, -1, err
	}
	// Offsets reach 2^57: rocelab's libibverbs.so.1 registers an application's pages at
	// their own virtual address in a sparse memfd (docs/libibverbs.md).
	if r.Length == 0 || r.Length > 1<<40 || r.Offset > 1<<57 || r.Offset%4096 != 0 {
		return nil, -1, fmt.Errorf("%w: MR of %d bytes at offset %d", rnic.ErrInvalidArgument, r.Length, r.Offset)
	}
	if err := wire.CheckSealed(fd, r.Offset+r.Length); err != nil {
		return nil, -1, fmt.Errorf("%w: MR memory: %v", rnic.ErrInvalidArgument, err)
	}
	mr, err := c.s.dev.RegMRFD(pd.pd, fd, int64(r.Offset), int(r.Length), r.Addr, qp.Access(r.Access))
	if err != nil {
		return nil, -1, err
	}
	hd, err := c.add(&sMR{mr: mr})
	if err != nil {
		c.s.dev.DeregMR(mr)
		return nil, -1, err
	}
	return &wire.MRResp{Handle: hd, LKey: mr.LKey(), RKey: mr.RKey()}, -1, nil
}
