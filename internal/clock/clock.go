// Package clock is the one source of time and the event scheduler for every node of a
// lab. Protocol code never calls time.Now, time.Sleep or Go timers: it asks its Loop.
//
// Three drivers implement the same interfaces:
//
//   - Virtual is a discrete-event simulator. Every loop runs on the single goroutine that
//     calls Run; time jumps from event to event; events due at the same instant run in
//     the order they were scheduled; each loop has a random source derived from one
//     seed. The same inputs and seed therefore give the same run, bit for bit.
//   - Parallel is Virtual partitioned: each partition of loops has its own queue and
//     time, and the partitions advance together in windows of the lookahead on
//     several threads, giving the same run whatever the number of threads.
//   - Real runs each loop on its own goroutine, locked to an OS thread that sleeps with
//     nanosecond slack and spins for the last microseconds before a deadline, because Go
//     timers fire at about 1.1 ms granularity on the project's machines. A loop's events
//     are serialized, so a node's state needs no locks. A loop that falls behind runs
//     its overdue events at their own times, up to MaxLag behind real time, so that a
//     stall of its thread delays the lab's events without changing them.
//
// A node is written once against Loop and runs under every driver.
package clock

import (
	"math"
	"math/rand/v2"
	"time"
)

// Time is a point on a clock's timeline in nanoseconds since the clock's epoch (the
// moment the driver was created). The zero value is the epoch.
type Time int64

// Never is later than any time a clock reaches; a timer set to Never does not fire.
const Never Time = math.MaxInt64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Duration returns t as the time elapsed since the epoch.
func (t Time) Duration() time.Duration { return time.Duration(t) }

// String formats t as the duration since the epoch, e.g. "1.5µs".
func (t Time) String() string { return time.Duration(t).String() }

// Clock is a driver: it creates the loops of a lab's nodes.
type Clock interface {
	// NewLoop creates the event loop of one node. name appears in diagnostics only.
	// Loops are created before the clock runs; the order of creation seeds each
	// loop's random source, so a deterministic setup gives deterministic loops.
	NewLoop(name string) Loop
}

// Loop is the event loop of one node: the only goroutine (Real) or the only logical
// thread (Virtual) that touches the node's state. All methods except Task.Post must be
// called from the loop's own callbacks or, before the clock runs, from setup code.
type Loop interface {
	// Now returns the loop's current time. Inside a timer callback it is at or after
	// the time the timer was set for: under Virtual exactly that time, under Real
	// that time too unless the loop is more than its MaxLag behind real time. It
	// does not move during a callback and never goes back.
	Now() Time

	// NewTimer returns a stopped timer that runs fn on this loop when it fires. A node
	// allocates its timers once and re-arms them with Reset, so scheduling on the data
	// path allocates nothing.
	NewTimer(fn func()) *Timer

	// NewTask returns a task that runs fn on this loop after Post. Tasks are the only
	// way another goroutine (another node's loop under Real) hands work to this loop.
	NewTask(fn func()) *Task

	// Rand returns the loop's random source. Under Virtual it is seeded from the
	// driver's seed and the loop's creation order. Only the loop may use it.
	Rand() *rand.Rand
}

// Timer is a one-shot callback on a loop. The zero value is not usable; get timers from
// Loop.NewTimer. Reset and Stop must be called from the owning loop (or setup code).
type Timer struct {
	fn    func()
	when  Time
	seq   uint64 // insertion order, breaks ties between equal deadlines
	index int    // position in the heap, -1 when not scheduled
	q     *queue
}

// Reset (re)arms the timer to fire at t, replacing any pending deadline. A t in the past
// fires as soon as the loop gets to it, after the events already due.
func (t *Timer) Reset(at Time) {
	t.q.schedule(t, at)
}

// Stop cancels the timer. It reports whether the timer was pending; after Stop returns
// the callback will not run unless the timer is Reset again.
func (t *Timer) Stop() bool {
	if t.index < 0 {
		return false
	}
	t.q.remove(t)
	return true
}

// Pending reports whether the timer is armed.
func (t *Timer) Pending() bool { return t.index >= 0 }

// When returns the deadline of a pending timer.
func (t *Timer) When() Time { return t.when }
