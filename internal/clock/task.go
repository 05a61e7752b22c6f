package clock

import (
	"sync"
	"sync/atomic"
)

// Task is a prebound callback that any goroutine may post to its loop without
// allocating. Posts coalesce: posting a task that is already pending does nothing, and
// the pending flag clears just before the callback runs, so a post made while it runs
// schedules one more run. Batched handoff between nodes is built on this: the producer
// appends to a queue the consumer drains, and posts the consumer's task once per batch.
type Task struct {
	fn      func()
	pending atomic.Bool
	post    func(*Task)
	// postFrom, under Parallel, posts on behalf of another loop's code (PostFrom);
	// order is the task's creation order in its partition, the order hand-overs run in.
	postFrom func(*Task, Loop)
	order    uint64
}

// Post schedules the task's callback to run on its loop. Under Real it is safe from any
// goroutine; under Virtual it must be called from the goroutine running the clock, and
// the callback runs at the current time after the events already due.
func (t *Task) Post() {
	if t.pending.Swap(true) {
		return
	}
	t.post(t)
}

// PostFrom is Post called by code running on another node's loop, src: the way a link
// end wakes its peer. Under Real and Virtual it is Post. Under Parallel, a post from
// another partition runs at the start of the next window, before any event of it
// (the lookahead guarantees nothing it hands over is due earlier).
func (t *Task) PostFrom(src Loop) {
	if t.postFrom == nil {
		t.Post()
		return
	}
	if t.pending.Swap(true) {
		return
	}
	t.postFrom(t, src)
}

func (t *Task) run() {
	t.pending.Store(false)
	t.fn()
}

// Inbox runs functions on a loop on behalf of other goroutines: the way code outside a
// node (a verbs service, a control socket) reaches the node's state. Do appends under
// a short lock and posts one Task; the loop runs everything queued, in order, and
// reuses the queue's storage, so a steady stream of calls allocates only its closures.
type Inbox struct {
	mu        sync.Mutex
	fns, free []func()
	task      *Task
}

// NewInbox returns an inbox of loop. Like every Task, it is created during setup.
func NewInbox(loop Loop) *Inbox {
	b := &Inbox{}
	b.task = loop.NewTask(b.run)
	return b
}

// Do runs fn on the loop after the events already due; calls made from one goroutine
// run in order. It returns at once and is safe from any goroutine (under Virtual, from
// the goroutine running the clock, as Task.Post).
func (b *Inbox) Do(fn func()) {
	b.mu.Lock()
	b.fns = append(b.fns, fn)
	b.mu.Unlock()
	b.task.Post()
}

func (b *Inbox) run() {
	b.mu.Lock()
	fns := b.fns
	b.fns = b.free[:0]
	b.mu.Unlock()
	for i, fn := range fns {
		fn()
		fns[i] = nil
	}
	b.free = fns[:0]
}
