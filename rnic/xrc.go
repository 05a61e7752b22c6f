package rnic

import (
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// XRCDFile names the file an XRC domain is associated with (ibv_open_xrcd's fd): its
// device and inode, as fstat reports them, so that every process that opens the same
// file shares the domain.
type XRCDFile struct{ Dev, Ino uint64 }

// xrcDomain is an XRC domain: what the openings of one file (or one private opening)
// share. It lives while any opening does.
type xrcDomain struct {
	file   XRCDFile
	shared bool // associated with file; a private domain is in no table
	opens  int
}

// XRCD is one opening of an XRC domain (ibv_xrcd). The XRC SRQs and XRC_RECV QPs
// created through it hold it: it cannot be closed while they exist, as the kernel's
// uverbs refuses (EBUSY).
type XRCD struct {
	dev    *Device
	dom    *xrcDomain
	refs   int
	closed bool
}

// Open flags of OpenXRCD (ibv_open_xrcd's oflags), the values of <fcntl.h>.
const (
	XRCDCreate    = 0x40 // O_CREAT: create the file's domain if it has none
	XRCDExclusive = 0x80 // O_EXCL: with O_CREAT, fail if the file has a domain
)

// OpenXRCD opens an XRC domain (ibv_open_xrcd). With a file it opens the domain
// associated with it, creating it under XRCDCreate; without XRCDCreate a file that has
// none fails with ErrNotFound, and XRCDCreate|XRCDExclusive fails with
// ErrInvalidArgument if it has one (the kernel's EINVAL). file nil opens a new private
// domain, as fd -1 does.
func (d *Device) OpenXRCD(file *XRCDFile, oflags int) (*XRCD, error) {
	if d.closed {
		return nil, errorf(ErrClosed, "open XRCD")
	}
	if oflags&^(XRCDCreate|XRCDExclusive) != 0 {
		return nil, errorf(ErrInvalidArgument, "XRCD open flags %#x: only O_CREAT and O_EXCL", oflags)
	}
	if file == nil {
		return &XRCD{dev: d, dom: &xrcDomain{opens: 1}}, nil
	}
	dom, ok := d.xrcds[*file]
	switch {
	case !ok && oflags&XRCDCreate == 0:
		return nil, errorf(ErrNotFound, "no XRC domain for inode %d of device %#x, and O_CREAT not given", file.Ino, file.Dev)
	case ok && oflags&XRCDCreate != 0 && oflags&XRCDExclusive != 0:
		return nil, errorf(ErrInvalidArgument, "inode %d of device %#x has an XRC domain and O_EXCL was given", file.Ino, file.Dev)
	case !ok:
		dom = &xrcDomain{file: *file, shared: true}
		d.xrcds[*file] = dom
	}
	dom.opens++
	return &XRCD{dev: d, dom: dom}, nil
}

// CloseXRCD closes an opening of an XRC domain (ibv_close_xrcd). It fails with ErrBusy
// while SRQs or QPs created through it exist; the domain goes with its last opening.
func (d *Device) CloseXRCD(x *XRCD) error {
	switch {
	case x.closed:
		return errorf(ErrNotFound, "XRCD already closed")
	case x.refs > 0:
		return errorf(ErrBusy, "XRCD still used by %d SRQs and QPs", x.refs)
	}
	x.closed = true
	if x.dom.opens--; x.dom.opens == 0 && x.dom.shared {
		delete(d.xrcds, x.dom.file)
	}
	return nil
}

// CreateXRCSRQ creates an XRC SRQ (ibv_create_srq_ex with IBV_SRQT_XRC): receive WRs
// that the XRC_RECV QPs of its domain take for the requests naming its number, their
// completions on cq; the R_Keys of those requests are checked against pd's MRs.
func (d *Device) CreateXRCSRQ(pd *PD, xrcd *XRCD, cq *CQ, attr SRQInitAttr) (*SRQ, error) {
	switch {
	case xrcd == nil || xrcd.closed || xrcd.dev != d:
		return nil, errorf(ErrInvalidArgument, "XRC SRQ needs an open XRCD of this device")
	case cq == nil || cq.dev != d:
		return nil, errorf(ErrInvalidArgument, "XRC SRQ needs a CQ of this device")
	}
	s, err := d.CreateSRQ(pd, attr)
	if err != nil {
		return nil, err
	}
	for {
		d.nextSRQ = (d.nextSRQ + 1) & roce.QPNMask // 24 bits on the wire; 0 is never one
		if _, used := d.xsrqs[d.nextSRQ]; d.nextSRQ != 0 && !used {
			break
		}
	}
	s.xrcd, s.cq, s.num = xrcd, cq, d.nextSRQ
	d.xsrqs[s.num] = s
	xrcd.refs++
	cq.refs++
	return s, nil
}

// SRQNum returns an XRC SRQ's number (ibv_get_srq_num), which initiators put in their
// work requests; 0 for an SRQ that is not XRC.
func (s *SRQ) SRQNum() uint32 { return s.num }

// xrcSRQ finds, for XRC_RECV QP x, the XRC SRQ numbered n in x's domain.
func (x *QP) xrcSRQ(n uint32) (qp.RecvQueue, qp.CompletionQueue, qp.Memory, bool) {
	s, ok := x.dev.xsrqs[n]
	if !ok || s.xrcd.dom != x.xrcd.dom {
		return nil, nil, nil, false
	}
	x.xsrq = s
	v, ok := x.xviews[s.pd]
	if !ok {
		if x.xviews == nil {
			x.xviews = map[*PD]*memView{}
		}
		v = s.pd.view(uint32(x.QPN()))
		x.xviews[s.pd] = v
	}
	return s, s.cq, v, true
}

// OpenQP opens an existing XRC_RECV QP of xrcd's domain by number (ibv_open_qp), for
// a process that did not create it. Every opening is destroyed with DestroyQP; the QP
// goes with the last.
func (d *Device) OpenQP(xrcd *XRCD, qpn roce.QPN) (*QP, error) {
	x, ok := d.qps[qpn]
	switch {
	case xrcd == nil || xrcd.closed || xrcd.dev != d:
		return nil, errorf(ErrInvalidArgument, "open QP needs an open XRCD of this device")
	case !ok || x.q.Type() != qp.XRCRecv:
		return nil, errorf(ErrNotFound, "no XRC_RECV QP %v on %s", qpn, d.cfg.Name)
	case x.xrcd.dom != xrcd.dom:
		return nil, errorf(ErrInvalidArgument, "XRC_RECV QP %v belongs to another XRC domain", qpn)
	}
	x.opens++
	xrcd.refs++
	return x, nil
}
