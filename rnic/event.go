package rnic

import (
	"context"

	"github.com/rocelab/rocelab/qp"
)

// EventType is an asynchronous event type (enum ibv_event_type).
type EventType uint8

// Asynchronous events, numbered as rdma-core numbers them.
const (
	EventCQErr           EventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EventQPFatal         EventType = 1  // IBV_EVENT_QP_FATAL: a QP entered ERR by itself
	EventCommEst         EventType = 4  // IBV_EVENT_COMM_EST: an RC or UC QP in RTR received a request
	EventSQDrained       EventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPortActive      EventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventSRQLimitReached EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	// EventLastWQEReached: a QP of an SRQ entered ERR; no receive of the SRQ will
	// complete on it any more (IBV_EVENT_QP_LAST_WQE_REACHED).
	EventLastWQEReached EventType = 16
)

var eventNames = map[EventType]string{
	EventCQErr: "CQ_ERR", EventQPFatal: "QP_FATAL", EventCommEst: "COMM_EST", EventSQDrained: "SQ_DRAINED",
	EventPortActive: "PORT_ACTIVE", EventSRQLimitReached: "SRQ_LIMIT_REACHED", EventLastWQEReached: "QP_LAST_WQE_REACHED",
}

// String returns the event's name as libibverbs spells it.
func (t EventType) String() string { return eventNames[t] }

// AsyncEvent is an asynchronous event (struct ibv_async_event); the field matching the
// type names the object.
type AsyncEvent struct {
	Type EventType
	CQ   *CQ
	QP   *QP
	SRQ  *SRQ
}

// GetAsyncEvent waits for the device's next asynchronous event (ibv_get_async_event).
// Safe from any goroutine; Config.AsyncHandler, when set, receives events instead.
func (d *Device) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	select {
	case e := <-d.async:
		return e, nil
	case <-ctx.Done():
		return AsyncEvent{}, ctx.Err()
	}
}

// SetAsyncHandler makes h receive the device's asynchronous events on the loop
// instead of GetAsyncEvent, as Config.AsyncHandler does (the verbs service sets it
// once it serves the device); nil gives them back to GetAsyncEvent. Call it on the
// loop.
func (d *Device) SetAsyncHandler(h func(AsyncEvent)) { d.cfg.AsyncHandler = h }

// enteredErr raises what a QP's move to ERR raises: QP_FATAL when the transport put it
// there (a retry or RNR count exhausted, a fatal NAK, a responder's error), and
// LAST_WQE_REACHED for a QP of an SRQ however it got there, as rxe does.
func (x *QP) enteredErr(spontaneous bool) {
	if spontaneous {
		x.dev.raise(AsyncEvent{Type: EventQPFatal, QP: x})
	}
	if x.srq != nil {
		x.dev.raise(AsyncEvent{Type: EventLastWQEReached, QP: x})
	}
}

// checkCommEst raises COMM_EST once for a connected QP in RTR that has accepted a
// request: its peer is sending before this side reached RTS (a passive side whose
// RTU is late, rdma_notify's case). UD QPs raise none (IBTA o11-5.1.1).
func (x *QP) checkCommEst() {
	if x.q.Type() != qp.UD && x.q.Counters().RxRequests > x.rtrRequests {
		x.commEst = true
		x.dev.raise(AsyncEvent{Type: EventCommEst, QP: x})
	}
}

func (d *Device) raise(e AsyncEvent) {
	d.stats.AsyncEvents++
	if d.cfg.AsyncHandler != nil {
		d.cfg.AsyncHandler(e)
		return
	}
	select {
	case d.async <- e:
	default:
		d.stats.AsyncEventsLost++
	}
}
