package service

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

// call executes one control call on the loop. It owns fds (closing those it does not
// keep) and returns the response and the descriptors to send with it.
func (c *conn) call(op wire.Op, body []byte, fds []int, resp []byte) (out []byte, outFDs []int) {
	defer func() {
		// A bug in a handler must cost the client its call, not the lab its process.
		if r := recover(); r != nil {
			c.settle(false) // what the call reserved went with it
			out, outFDs = wire.AppendError(resp, op, fmt.Errorf("%w: internal error: %v", rnic.ErrInvalidArgument, r)), nil
		}
	}()
	var h handler
	if int(op) < len(handlers) {
		h = handlers[op]
	}
	if h.run == nil && h.withFD == nil {
		wire.CloseFDs(fds)
		return wire.AppendError(resp, op, fmt.Errorf("%w: unknown call %v", rnic.ErrNotSupported, op)), nil
	}
	wantFDs := 0
	if h.withFD != nil {
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
	if h.withFD != nil && op != wire.OpRegMR { // the others pass an eventfd to signal
		if err := checkEventfd(fds[0]); err != nil {
			wire.CloseFDs(fds)
			return wire.AppendError(resp, op, err), nil
		}
	}
	var (
		respBody any
		fd       int
		err      error
	)
	if h.withFD != nil {
		respBody, fd, err = h.withFD(c, body, fds[0])
	} else {
		respBody, fd, err = h.run(c, body)
	}
	c.settle(err == nil)
	if err != nil {
		return wire.AppendError(resp, op, err), nil
	}
	if fd >= 0 {
		outFDs = []int{fd}
	}
	return wire.AppendResponse(resp, op, respBody), outFDs
}

// A handler decodes and runs one call on the loop. It returns the response body and,
// for the calls that create a ring, the ring's memfd (else -1). Calls that carry a
// descriptor have withFD, which owns it (closing it unless it keeps it); the others run.
type handler struct {
	run    func(c *conn, body []byte) (any, int, error)
	withFD func(c *conn, body []byte, fd int) (any, int, error)
}

// handlers is indexed by wire.Op; an op without an entry is an unknown call (OpHello
// is the connection's handshake, not a call).
var handlers = [...]handler{
	wire.OpQueryDevice:       {run: (*conn).queryDevice},
	wire.OpQueryPort:         {run: (*conn).queryPort},
	wire.OpQueryGID:          {run: (*conn).queryGID},
	wire.OpAllocPD:           {run: (*conn).allocPD},
	wire.OpDeallocPD:         {run: destroying(kindPD, wire.OpDeallocPD)},
	wire.OpRegMR:             {withFD: (*conn).regMR},
	wire.OpDeregMR:           {run: destroying(kindMR, wire.OpDeregMR)},
	wire.OpCreateCompChannel: {withFD: (*conn).createCompChannel},
	wire.OpDestroyCompChan:   {run: destroying(kindChannel, wire.OpDestroyCompChan)},
	wire.OpCreateCQ:          {run: (*conn).createCQ},
	wire.OpDestroyCQ:         {run: destroying(kindCQ, wire.OpDestroyCQ)},
	wire.OpCreateSRQ:         {run: (*conn).createSRQ},
	wire.OpModifySRQ:         {run: (*conn).modifySRQ},
	wire.OpDestroySRQ:        {run: destroying(kindSRQ, wire.OpDestroySRQ)},
	wire.OpCreateAH:          {run: (*conn).createAH},
	wire.OpDestroyAH:         {run: destroying(kindAH, wire.OpDestroyAH)},
	wire.OpCreateQP:          {run: (*conn).createQP},
	wire.OpModifyQP:          {run: (*conn).modifyQP},
	wire.OpQueryQP:           {run: (*conn).queryQP},
	wire.OpDestroyQP:         {run: destroying(kindQP, wire.OpDestroyQP)},
	wire.OpAsyncFD:           {withFD: (*conn).asyncFD},
	wire.OpGetAsyncEvent:     {run: (*conn).getAsyncEvent},
	wire.OpResizeCQ:          {run: (*conn).resizeCQ},
	wire.OpResizeSRQ:         {run: (*conn).resizeSRQ},
	wire.OpReregMR:           {run: (*conn).reregMR},
	wire.OpAttachMcast:       {run: mcast((*rnic.Device).AttachMcast)},
	wire.OpDetachMcast:       {run: mcast((*rnic.Device).DetachMcast)},
	wire.OpAllocMW:           {run: (*conn).allocMW},
	wire.OpDeallocMW:         {run: destroying(kindMW, wire.OpDeallocMW)},
	wire.OpOpenXRCD:          {run: (*conn).openXRCD},
	wire.OpCloseXRCD:         {run: destroying(kindXRCD, wire.OpCloseXRCD)},
	wire.OpCreateXRCSRQ:      {run: (*conn).createXRCSRQ},
	wire.OpOpenQP:            {run: (*conn).openQP},
	wire.OpCMCreateChannel:   {withFD: (*conn).cmCreateChannel},
	wire.OpCMDestroyChannel:  {run: destroying(kindCMChannel, wire.OpCMDestroyChannel)},
	wire.OpCMCreateID:        {run: (*conn).cmCreateID},
	wire.OpCMDestroyID:       {run: destroying(kindCMID, wire.OpCMDestroyID)},
	wire.OpCMListen:          {run: (*conn).cmListen},
	wire.OpCMResolveAddr:     {run: (*conn).cmResolveAddr},
	wire.OpCMResolveRoute:    {run: cmIDCall((*rnic.Device).ResolveRoute)},
	wire.OpCMConnect:         {run: cmConnecting(false)},
	wire.OpCMAccept:          {run: cmConnecting(true)},
	wire.OpCMReject:          {run: (*conn).cmReject},
	wire.OpCMDisconnect:      {run: cmIDCall((*rnic.Device).Disconnect)},
	wire.OpCMGetEvent:        {run: (*conn).cmGetEvent},
	wire.OpCMInitQPAttr:      {run: (*conn).cmInitQPAttr},
	wire.OpCMEstablish:       {run: cmIDCall((*rnic.Device).Establish)},
	wire.OpCMSetOption:       {run: (*conn).cmSetOption},
	wire.OpCMBind:            {run: (*conn).cmBind},
	wire.OpCMMigrateID:       {run: (*conn).cmMigrateID},
}

func (c *conn) queryDevice(body []byte) (any, int, error) {
	if err := wire.DecodeBody(body, &struct{}{}); err != nil {
		return nil, -1, err
	}
	a := c.s.dev.QueryDevice()
	r := &wire.DeviceAttr{NodeGUID: a.NodeGUID, MaxQP: uint32(a.MaxQP), MaxQPWR: uint32(a.MaxQPWR),
		MaxSGE: uint32(a.MaxSGE), MaxCQE: uint32(a.MaxCQE), MaxQPRdAtom: uint32(a.MaxQPRdAtom),
		MaxQPInitRdAtom: uint32(a.MaxQPInitRdAtm), PhysPortCnt: uint32(a.PhysPortCnt), MaxSRQ: maxObjects,
		MaxMcastGrp: rnic.MaxMcastGroups, MaxMcastQPAttach: rnic.MaxMcastQPAttach, MaxTotalMcastQPAttach: rnic.MaxTotalMcastAttach}
	wire.PutString(r.FWVer[:], a.FWVer)
	return r, -1, nil
}

func (c *conn) queryPort(body []byte) (any, int, error) {
	var q wire.QueryPort
	if err := wire.DecodeBody(body, &q); err != nil {
		return nil, -1, err
	}
	a, err := c.s.dev.QueryPort(q.Port)
	if err != nil {
		return nil, -1, err
	}
	r := &wire.PortAttr{MaxMTU: uint16(a.MaxMTU), ActiveMTU: uint16(a.ActiveMTU), GIDTableLen: uint32(a.GIDTableLen),
		MaxMsgSize: a.MaxMsgSize, Rate: a.Rate}
	wire.PutString(r.State[:], a.State)
	wire.PutString(r.LinkLayer[:], a.LinkLayer)
	return r, -1, nil
}

func (c *conn) queryGID(body []byte) (any, int, error) {
	var q wire.QueryGID
	if err := wire.DecodeBody(body, &q); err != nil {
		return nil, -1, err
	}
	if q.Index > 1<<16 {
		return nil, -1, fmt.Errorf("%w: GID index %d", rnic.ErrInvalidArgument, q.Index)
	}
	g, err := c.s.dev.QueryGID(int(q.Index))
	return &wire.GID{GID: g}, -1, err
}

func (c *conn) allocPD(body []byte) (any, int, error) {
	if err := wire.DecodeBody(body, &struct{}{}); err != nil {
		return nil, -1, err
	}
	pd, err := c.s.dev.AllocPD()
	if err != nil {
		return nil, -1, err
	}
	hd, err := c.add(&sPD{pd: pd})
	if err != nil {
		c.s.dev.DeallocPD(pd)
	}
	return &wire.Handle{Handle: hd}, -1, err
}

func (c *conn) allocMW(body []byte) (any, int, error) {
	var r wire.AllocMW
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	pd, err := get[*sPD](c, r.PD, "PD")
	if err != nil {
		return nil, -1, err
	}
	if r.Type > 0xFF {
		return nil, -1, fmt.Errorf("%w: memory window type %d", rnic.ErrInvalidArgument, r.Type)
	}
	mw, err := c.s.dev.AllocMW(pd.pd, rnic.MWType(r.Type))
	if err != nil {
		return nil, -1, err
	}
	hd, err := c.add(&sMW{mw: mw})
	if err != nil {
		c.s.dev.DeallocMW(mw)
	}
	return &wire.MWResp{Handle: hd, RKey: mw.RKey()}, -1, err
}

func (c *conn) createCompChannel(body []byte, fd int) (any, int, error) {
	return c.addEventFD(body, fd, &sChannel{fd: fd})
}

// addEventFD adds o, the object of the eventfd a call carried (a completion channel's
// or a CM event channel's), charged as one descriptor; the descriptor is closed if the
// call fails.
func (c *conn) addEventFD(body []byte, fd int, o any) (any, int, error) {
	if err := wire.DecodeBody(body, &struct{}{}); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	if err := c.reserve(Usage{FDs: 1, Memory: objectMemory}); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	hd, err := c.add(o)
	if err != nil {
		unix.Close(fd)
	}
	return &wire.Handle{Handle: hd}, -1, err
}

func (c *conn) modifySRQ(body []byte) (any, int, error) {
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
}

func (c *conn) createAH(body []byte) (any, int, error) {
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
	ah, err := c.s.dev.CreateAH(pd.pd, rnic.AHAttr{DGID: a.DGID, SGIDIndex: int(a.SGIDIndex), TrafficClass: a.TrafficClass,
		HopLimit: a.HopLimit, FlowLabel: a.FlowLabel})
	if err != nil {
		return nil, -1, err
	}
	hd, err := c.add(&sAH{ah: ah})
	if err != nil {
		c.s.dev.DestroyAH(ah)
	}
	return &wire.Handle{Handle: hd}, -1, err
}

func (c *conn) modifyQP(body []byte) (any, int, error) {
	var m wire.ModifyQP
	if err := wire.DecodeBody(body, &m); err != nil {
		return nil, -1, err
	}
	x, err := get[*sQP](c, m.Handle, "QP")
	if err != nil {
		return nil, -1, err
	}
	a := m.Attr.QP()
	mask := uverbsMask(x.typ, qp.AttrMask(m.Mask))
	if err := c.s.dev.ModifyQP(x.x, &a, mask); err != nil {
		return nil, -1, err
	}
	if mask&qp.AttrState != 0 && a.State == qp.StateReset {
		x.reset()
	}
	return nil, -1, nil
}

func (c *conn) queryQP(body []byte) (any, int, error) {
	var h wire.Handle
	if err := wire.DecodeBody(body, &h); err != nil {
		return nil, -1, err
	}
	x, err := get[*sQP](c, h.Handle, "QP")
	if err != nil {
		return nil, -1, err
	}
	a := c.s.dev.QueryQP(x.x)
	r := wire.FromQPAttr(&a)
	return &r, -1, nil
}

// mcast is the handler of ATTACH_MCAST or DETACH_MCAST, which do op.
func mcast(op func(*rnic.Device, *rnic.QP, roce.GID) error) func(c *conn, body []byte) (any, int, error) {
	return func(c *conn, body []byte) (any, int, error) {
		var m wire.Mcast
		if err := wire.DecodeBody(body, &m); err != nil {
			return nil, -1, err
		}
		x, err := get[*sQP](c, m.Handle, "QP")
		if err != nil {
			return nil, -1, err
		}
		return nil, -1, op(c.s.dev, x.x, m.GID)
	}
}

// destroying is the handler of op, which destroys an object of kind.
func destroying(kind int, op wire.Op) func(c *conn, body []byte) (any, int, error) {
	return func(c *conn, body []byte) (any, int, error) {
		var h wire.Handle
		if err := wire.DecodeBody(body, &h); err != nil {
			return nil, -1, err
		}
		o, ok := c.objs[h.Handle]
		if !ok || kindOf(o) != kind {
			return nil, -1, fmt.Errorf("%w: %v: no such object (handle %d)", rnic.ErrNotFound, op, h.Handle)
		}
		if err := c.destroy(o); err != nil {
			return nil, -1, err
		}
		c.remove(h.Handle)
		return nil, -1, nil
	}
}

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
	if err := c.reserve(mrCost(r.Length)); err != nil {
		return nil, -1, err
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
