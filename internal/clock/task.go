package clock

import "sync/atomic"

// Task is a prebound callback that any goroutine may post to its loop without
// allocating. Posts coalesce: posting a task that is already pending does nothing, and
// the pending flag clears just before the callback runs, so a post made while it runs
// schedules one more run. Batched handoff between nodes is built on this: the producer
// appends to a queue the consumer drains, and posts the consumer's task once per batch.
type Task struct {
	fn      func()
	pending atomic.Bool
	post    func(*Task)
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

func (t *Task) run() {
	t.pending.Store(false)
	t.fn()
}
