package qp

import "fmt"

// PostSend queues a send work request (ibv_post_send with one WR). It fails with
// ErrInvalidState before RTS, ErrInvalidWR for a request the QP cannot carry and
// ErrQueueFull when the send queue is full. In SQE and ERR the request is accepted and
// completes at once with WR_FLUSH_ERR, as verbs devices do.
func (q *QP) PostSend(wr *SendWR) error {
	switch q.state {
	case StateReset, StateInit, StateRTR:
		return fmt.Errorf("%w: post send in %v", ErrInvalidState, q.state)
	}
	n, err := q.checkSendWR(wr)
	if err != nil {
		return err
	}
	if q.cfg.Type.reliable() && wr.Opcode.readOrAtomic() && q.attr.MaxRdAtomic == 0 {
		return fmt.Errorf("%w: %v with max_rd_atomic 0", ErrInvalidWR, wr.Opcode)
	}
	if q.sq.full() {
		return fmt.Errorf("%w: send queue holds %d WRs", ErrQueueFull, q.sq.depth)
	}
	*q.sq.push() = sendWQE{wr: *wr, length: n}
	if q.state == StateErr || q.state == StateSQE {
		q.flushSend()
	}
	return nil
}

// PostRecv queues a receive work request on the QP's own receive queue
// (ibv_post_recv). A QP attached to an SRQ has none: post to the SRQ instead. In ERR the
// request completes at once with WR_FLUSH_ERR.
func (q *QP) PostRecv(wr *RecvWR) error {
	if q.cfg.Type.isXRC() {
		return fmt.Errorf("%w: an %v QP has no receive queue (XRC receives post to the XRC SRQ)", ErrInvalidWR, q.cfg.Type)
	}
	if q.rq == nil {
		return fmt.Errorf("%w: the QP receives from an SRQ", ErrInvalidWR)
	}
	if q.state == StateReset {
		return fmt.Errorf("%w: post receive in RESET", ErrInvalidState)
	}
	if len(wr.SGL) > q.cfg.MaxSGE {
		return fmt.Errorf("%w: %d SGEs, the QP allows %d", ErrInvalidWR, len(wr.SGL), q.cfg.MaxSGE)
	}
	if _, err := sglLength(wr.SGL); err != nil {
		return err
	}
	if err := q.rq.push(*wr); err != nil {
		return err
	}
	if q.state == StateErr {
		q.flushRecv()
	}
	return nil
}
