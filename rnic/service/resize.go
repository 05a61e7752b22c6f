package service

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// Resizing a ring (ibv_resize_cq, ibv_modify_srq with IBV_SRQ_MAX_WR) moves it to a new
// memfd: the entries between the consumer's and the producer's index go to the same
// free-running indices in the new ring, and the header's words carry over, so neither
// side renumbers anything. The client holds its side's lock across the call; the
// service runs it on the loop, where nothing else touches the ring meanwhile.

// moveRing copies the entries [from, to) and the header of old into ring.
func moveRing(ring, old wire.Ring, from, to uint32) {
	for k := from; k != to; k++ {
		copy(ring.Entry(k), old.Entry(k))
	}
	for _, w := range [...]func(*wire.Ring) *uint32{(*wire.Ring).Prod, (*wire.Ring).Cons, (*wire.Ring).Armed,
		(*wire.Ring).Events, (*wire.Ring).Error} {
		wire.Store(w(&ring), wire.Load(w(&old)))
	}
}

func (c *conn) resizeCQ(body []byte) (any, int, error) {
	var r wire.Resize
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	q, err := get[*sCQ](c, r.Handle, "CQ")
	if err != nil {
		return nil, -1, err
	}
	if r.Entries < 1 || r.Entries > rnic.MaxCQE {
		return nil, -1, fmt.Errorf("%w: CQ of %d entries: must be in [1, %d]", rnic.ErrInvalidArgument, r.Entries, rnic.MaxCQE)
	}
	// rxe refuses "cqe < current # elements in queue". Its completions arrive while the
	// post_send call still runs; ours arrive from the loop later, so the send WRs posted
	// before this call count too: the completions they owe need the room as much.
	var owed uint32
	for _, x := range c.qps {
		if x.sendCQ == q {
			x.drainSQ()
			owed += x.sq.owed
		}
	}
	capacity, cons := wire.PowerOfTwo(r.Entries), wire.Load(q.ring.Cons())
	if held := q.prod - cons; held+owed > capacity {
		return nil, -1, fmt.Errorf("%w: CQ of %d entries holds %d completions and its send queues owe %d",
			rnic.ErrInvalidArgument, r.Entries, held, owed)
	}
	size := wire.PageAlign(wire.RingBytes(capacity, wire.CQESize))
	fd, mem, err := wire.SealedMemfd("rocelab-verbs-cq", int(size))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: CQ ring: %v", rnic.ErrNoMemory, err)
	}
	// The rnic CQ is drained into the ring after every event: it holds nothing here.
	if err := q.cq.ResizeCQ(int(capacity)); err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	ring, _ := wire.NewRing(mem, capacity, wire.CQESize)
	moveRing(ring, q.ring, cons, q.prod)
	unix.Munmap(q.mem)
	q.ring, q.mem = ring, mem
	return &wire.RingResp{Handle: q.h, Cap: capacity, EntrySize: wire.CQESize, Size: size}, fd, nil
}

func (c *conn) resizeSRQ(body []byte) (any, int, error) {
	var r wire.Resize
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	s, err := get[*sSRQ](c, r.Handle, "SRQ")
	if err != nil {
		return nil, -1, err
	}
	if r.Entries < 1 || r.Entries > rnic.MaxWR {
		return nil, -1, fmt.Errorf("%w: SRQ of %d WRs: must be in [1, %d]", rnic.ErrInvalidArgument, r.Entries, rnic.MaxWR)
	}
	w := &s.rq
	capacity, prod := wire.PowerOfTwo(r.Entries), wire.Load(w.ring.Prod())
	if w.broken {
		return nil, -1, fmt.Errorf("%w: SRQ ring is broken", rnic.ErrInvalidArgument)
	}
	if held := prod - w.free; held > capacity {
		return nil, -1, fmt.Errorf("%w: SRQ of %d WRs holds %d", rnic.ErrInvalidArgument, r.Entries, held)
	}
	entry := w.ring.EntrySize
	size := wire.PageAlign(wire.RingBytes(capacity, entry))
	fd, mem, err := wire.SealedMemfd("rocelab-verbs-srq", int(size))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: SRQ ring: %v", rnic.ErrNoMemory, err)
	}
	if err := s.srq.ResizeSRQ(int(capacity)); err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, -1, err
	}
	// The WRs the SRQ holds keep their scatter/gather lists in the old wq's sgl (the
	// SRQ keeps the slices); new slots get the new wq's.
	nw, _ := newWQ(mem, capacity, entry, w.maxSGE, true)
	moveRing(nw.ring, w.ring, w.free, prod)
	for k := w.free; k != w.posted; k++ {
		nw.wrid[k&(capacity-1)], nw.done[k&(capacity-1)] = w.wrid[k&(w.ring.Cap-1)], w.done[k&(w.ring.Cap-1)]
	}
	nw.posted, nw.free = w.posted, w.free
	unix.Munmap(s.mem)
	s.rq, s.mem = nw, mem
	return &wire.RingResp{Handle: s.h, Cap: capacity, EntrySize: entry, Size: size}, fd, nil
}

func (c *conn) reregMR(body []byte) (any, int, error) {
	var r wire.ReregMR
	if err := wire.DecodeBody(body, &r); err != nil {
		return nil, -1, err
	}
	m, err := get[*sMR](c, r.Handle, "MR")
	if err != nil {
		return nil, -1, err
	}
	var pd *rnic.PD
	if r.ChangePD != 0 {
		p, err := get[*sPD](c, r.PD, "PD")
		if err != nil {
			return nil, -1, err
		}
		pd = p.pd
	}
	return nil, -1, c.s.dev.ReregMR(m.mr, pd, qp.Access(r.Access), r.ChangeAccess != 0)
}
