package service

import (
	"fmt"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

// sXRCD is a client's opening of an XRC domain.
type sXRCD struct{ x *rnic.XRCD }

// openXRCD opens an XRC domain. The client names the file by the device and inode its
// fstat reported: like every call's handles, the service takes the client's word, and
// a domain shared this way is shared only among clients that could open the same file.
func (c *conn) openXRCD(body []byte) (any, int, error) {
	var r wire.OpenXRCD
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	var file *rnic.XRCDFile
	if r.HasFile != 0 {
		file = &rnic.XRCDFile{Dev: r.Dev, Ino: r.Ino}
	}
	x, err := c.s.dev.OpenXRCD(file, int(r.OFlags))
	if err != nil {
		return nil, -1, err
	}
	h, err := c.add(&sXRCD{x: x})
	if err != nil {
		c.s.dev.CloseXRCD(x)
		return nil, -1, err
	}
	return &wire.Handle{Handle: h}, -1, nil
}

// createXRCSRQ creates an XRC SRQ; the XRC_RECV QPs of its domain, whichever client
// holds them, deliver into it and complete on its CQ.
func (c *conn) createXRCSRQ(body []byte) (any, int, error) {
	var r wire.CreateXRCSRQ
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	pd, err := get[*sPD](c, r.PD, "PD")
	if err != nil {
		return nil, -1, err
	}
	xrcd, err := get[*sXRCD](c, r.XRCD, "XRCD")
	if err != nil {
		return nil, -1, err
	}
	cq, err := get[*sCQ](c, r.CQ, "CQ")
	if err != nil {
		return nil, -1, err
	}
	s, ring, fd, err := c.newSRQ(r.MaxWR, r.MaxSGE, func(a rnic.SRQInitAttr) (*rnic.SRQ, error) {
		return c.s.dev.CreateXRCSRQ(pd.pd, xrcd.x, cq.cq, a)
	})
	if err != nil {
		return nil, -1, err
	}
	s.srq.RecvRefill = s.drain
	return &wire.XRCSRQResp{Ring: *ring, SRQN: s.srq.SRQNum()}, fd, nil
}

// openQP gives the client a handle of an existing XRC_RECV QP of its domain, which it
// may modify, query and destroy (its handle; the QP goes with the last).
func (c *conn) openQP(body []byte) (any, int, error) {
	var r wire.OpenQP
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	xrcd, err := get[*sXRCD](c, r.XRCD, "XRCD")
	if err != nil {
		return nil, -1, err
	}
	if r.QPN > roce.QPNMask {
		return nil, -1, fmt.Errorf("%w: QP number %#x exceeds 24 bits", rnic.ErrInvalidArgument, r.QPN)
	}
	x, err := c.s.dev.OpenQP(xrcd.x, roce.QPN(r.QPN))
	if err != nil {
		return nil, -1, err
	}
	s := &sQP{c: c, x: x, typ: qp.XRCRecv, opened: xrcd}
	h, err := c.add(s)
	if err != nil {
		c.s.dev.CloseQP(x, xrcd.x)
		return nil, -1, err
	}
	s.h = h
	return &wire.QPResp{Handle: h, QPN: r.QPN}, -1, nil
}

// uverbsMask drops from an XRC QP's modify mask the attributes of the half it lacks,
// as the kernel's uverbs does (modify_qp_mask) before the state table sees them:
// perftest -c XRC moves its XRC_SEND QPs to RTR with RC's MIN_RNR_TIMER and
// MAX_DEST_RD_ATOMIC.
func uverbsMask(t qp.Type, mask qp.AttrMask) qp.AttrMask {
	switch t {
	case qp.XRCSend:
		return mask &^ (qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer)
	case qp.XRCRecv:
		return mask &^ (qp.AttrMaxQPRdAtomic | qp.AttrRetryCnt | qp.AttrRNRRetry)
	}
	return mask
}

// destroyQP drops the client's handle of a QP: the QP itself, or, for an XRC_RECV QP
// that other handles keep, only this one.
func (c *conn) destroyQP(o *sQP) error {
	d := c.s.dev
	if o.opened != nil {
		return d.CloseQP(o.x, o.opened.x)
	}
	if o.typ == qp.XRCRecv {
		// The QP may outlive this client's handle (OpenQP): its hooks must no longer
		// reach this client's rings, about to be unmapped, nor its events a handle
		// the client may reuse.
		o.x.OnState, o.x.RecvRefill, o.x.Context = nil, nil, nil
	}
	return d.DestroyQP(o.x)
}
