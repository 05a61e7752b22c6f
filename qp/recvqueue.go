package qp

import "fmt"

// RecvQueue supplies receive work requests to a responder: the QP's own receive queue
// or a shared receive queue (SRQ) the rnic implements over its ring. The responder takes
// one WR per incoming SEND (at its first packet) and per RDMA WRITE with immediate.
type RecvQueue interface {
	// Pop removes and returns the oldest posted WR; ok is false when the queue is
	// empty. An SRQ raises its limit event itself.
	Pop() (wr RecvWR, ok bool)
}

// ring is a fixed-capacity FIFO of receive WRs: the QP's own receive queue.
type ring struct {
	wrs        []RecvWR
	head, size int
}

func newRing(capacity int) *ring { return &ring{wrs: make([]RecvWR, capacity)} }

func (r *ring) push(wr RecvWR) error {
	if r.size == len(r.wrs) {
		return fmt.Errorf("%w: receive queue holds %d WRs", ErrQueueFull, len(r.wrs))
	}
	r.wrs[(r.head+r.size)%len(r.wrs)] = wr
	r.size++
	return nil
}

// Pop implements RecvQueue.
func (r *ring) Pop() (RecvWR, bool) {
	if r.size == 0 {
		return RecvWR{}, false
	}
	wr := r.wrs[r.head]
	r.wrs[r.head] = RecvWR{}
	r.head = (r.head + 1) % len(r.wrs)
	r.size--
	return wr, true
}

func (r *ring) clear() {
	clear(r.wrs)
	r.head, r.size = 0, 0
}
