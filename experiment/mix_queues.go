package experiment

import (
	"container/heap"
)

// EachPortQueue calls fn with every port's queue at each sample where it changed from
// the port's sample before (port_queues.csv's rows), in time order and, at one
// instant, in port order. The rows are merged from the ports' change points as they
// are read: held as rows they were 24 bytes each, a gigabyte and more for the
// 1,024-host fat tree's 10 ms.
func (x *MixInfo) EachPortQueue(fn func(PortQueueSample)) {
	h := make(queueHeap, 0, len(x.ports))
	for i, p := range x.ports {
		q := &queueCursor{changeCursor: p.changes.cursor(), port: i, prev: -1}
		if q.skip(); q.ahead {
			h = append(h, q)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		q := h[0]
		fn(PortQueueSample{T: q.next.T, Port: q.port, Bytes: q.next.Bytes})
		q.prev = q.next.Bytes
		q.step()
		if q.skip(); q.ahead {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
}

// queueCursor walks one port's change points, stopping at those where its queue
// changed (prev is the queue before).
type queueCursor struct {
	changeCursor
	port, prev int
}

// skip steps past the change points that left the queue as it was.
func (q *queueCursor) skip() {
	for q.ahead && q.next.Bytes == q.prev {
		q.step()
	}
}

// queueHeap orders ports' cursors by their next queue change's instant, then port.
type queueHeap []*queueCursor

func (h queueHeap) Len() int { return len(h) }
func (h queueHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.next.T < b.next.T || a.next.T == b.next.T && a.port < b.port
}
func (h queueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *queueHeap) Push(x any)   { *h = append(*h, x.(*queueCursor)) }
func (h *queueHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	*h = old[:len(old)-1]
	return q
}
