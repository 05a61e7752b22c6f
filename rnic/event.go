package rnic

import "context"

// EventType is an asynchronous event type (enum ibv_event_type).
type EventType uint8

// Asynchronous events, numbered as rdma-core numbers them.
const (
	EventCQErr           EventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EventQPFatal         EventType = 1  // IBV_EVENT_QP_FATAL: a QP entered ERR by itself
	EventSQDrained       EventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPortActive      EventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventSRQLimitReached EventType = 14 // IBV_EVENT_SRQ_LIMIT_REACHED
)

var eventNames = map[EventType]string{
	EventCQErr: "CQ_ERR", EventQPFatal: "QP_FATAL", EventSQDrained: "SQ_DRAINED",
	EventPortActive: "PORT_ACTIVE", EventSRQLimitReached: "SRQ_LIMIT_REACHED",
}

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
