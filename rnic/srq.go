package rnic

import (
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
)

// SRQ is a shared receive queue (ibv_srq): receive work requests that any QP attached
// to it consumes. When armed with a limit, it raises EventSRQLimitReached once the
// number of posted WRs falls below it (ibv_modify_srq with IBV_SRQ_LIMIT).
type SRQ struct {
	pd      *PD
	wrs     []qp.RecvWR
	head, n int
	maxSGE  int
	limit   int // 0: not armed
	refs    int
	// XRC SRQs: the domain opening, the CQ and the number (xrc.go).
	xrcd *XRCD
	cq   *CQ
	num  uint32
	// RecvRefill, for an XRC SRQ, is what QP.RecvRefill is for a QP: it runs when an
	// XRC_RECV QP's packet finds the SRQ empty, and may post to it.
	RecvRefill func()
	// Context is the application's srq_context.
	Context any
}

var _ qp.RecvQueue = (*SRQ)(nil)

// SRQInitAttr sizes a shared receive queue (ibv_srq_init_attr): ibv.SRQInitAttr.
type SRQInitAttr = ibv.SRQInitAttr

// CreateSRQ creates a shared receive queue (ibv_create_srq).
func (d *Device) CreateSRQ(pd *PD, attr SRQInitAttr) (*SRQ, error) {
	if attr.MaxWR < 1 || attr.MaxWR > MaxWR {
		return nil, errorf(ErrInvalidArgument, "SRQ of %d WRs: must be in [1, %d]", attr.MaxWR, MaxWR)
	}
	if attr.MaxSGE == 0 {
		attr.MaxSGE = 1
	}
	if attr.MaxSGE < 1 || attr.MaxSGE > MaxSGE {
		return nil, errorf(ErrInvalidArgument, "SRQ with %d SGEs per WR: must be in [1, %d]", attr.MaxSGE, MaxSGE)
	}
	pd.refs++
	return &SRQ{pd: pd, wrs: make([]qp.RecvWR, attr.MaxWR), maxSGE: attr.MaxSGE}, nil
}

// ModifySRQ arms the limit event (ibv_modify_srq with IBV_SRQ_LIMIT); 0 disarms it.
func (s *SRQ) ModifySRQ(limit int) error {
	if limit < 0 || limit > len(s.wrs) {
		return errorf(ErrInvalidArgument, "SRQ limit %d outside [0, %d]", limit, len(s.wrs))
	}
	s.limit = limit
	return nil
}

// DestroySRQ destroys a shared receive queue; it fails with ErrBusy while QPs use it.
func (d *Device) DestroySRQ(s *SRQ) error {
	if s.refs != 0 {
		return errorf(ErrBusy, "SRQ still used by %d QPs", s.refs)
	}
	if s.xrcd != nil {
		delete(d.xsrqs, s.num)
		s.xrcd.refs--
		s.cq.refs--
		// A target QP may still name the SRQ as its last message's: the hook, whose
		// memory (the verbs service's ring) goes with the SRQ, must not run again.
		s.RecvRefill = nil
	}
	s.pd.refs--
	return nil
}

// PostSRQRecv posts a receive work request (ibv_post_srq_recv).
func (s *SRQ) PostSRQRecv(wr *qp.RecvWR) error {
	if len(wr.SGL) > s.maxSGE {
		return errorf(ErrInvalidArgument, "%d SGEs, the SRQ allows %d", len(wr.SGL), s.maxSGE)
	}
	if s.n == len(s.wrs) {
		return errorf(ErrNoMemory, "SRQ holds %d WRs", len(s.wrs))
	}
	s.wrs[(s.head+s.n)%len(s.wrs)] = *wr
	s.n++
	return nil
}

// Pop implements qp.RecvQueue.
func (s *SRQ) Pop() (qp.RecvWR, bool) {
	if s.n == 0 {
		return qp.RecvWR{}, false
	}
	wr := s.wrs[s.head]
	s.wrs[s.head] = qp.RecvWR{}
	s.head = (s.head + 1) % len(s.wrs)
	s.n--
	if s.limit > 0 && s.n < s.limit {
		s.limit = 0 // one event per arming, as IBTA specifies
		s.pd.dev.raise(AsyncEvent{Type: EventSRQLimitReached, SRQ: s})
	}
	return wr, true
}

// Len returns the number of posted WRs.
func (s *SRQ) Len() int { return s.n }

// ResizeSRQ changes how many WRs the SRQ holds (ibv_modify_srq with IBV_SRQ_MAX_WR),
// keeping those posted. As rxe, it refuses a size below the armed limit or below the
// WRs it holds.
func (s *SRQ) ResizeSRQ(maxWR int) error {
	switch {
	case maxWR < 1 || maxWR > MaxWR:
		return errorf(ErrInvalidArgument, "SRQ of %d WRs: must be in [1, %d]", maxWR, MaxWR)
	case s.limit > 0 && maxWR < s.limit:
		return errorf(ErrInvalidArgument, "SRQ of %d WRs below its armed limit %d", maxWR, s.limit)
	case maxWR < s.n:
		return errorf(ErrInvalidArgument, "SRQ of %d WRs holds %d", maxWR, s.n)
	}
	wrs := make([]qp.RecvWR, maxWR)
	for i := range s.n {
		wrs[i] = s.wrs[(s.head+i)%len(s.wrs)]
	}
	s.wrs, s.head = wrs, 0
	return nil
}
