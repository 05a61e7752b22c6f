package clock

import (
	"math/rand/v2"
	"time"
)

// Virtual is the discrete-event driver. It is not safe for concurrent use: setup, Run
// and every callback happen on one goroutine.
type Virtual struct {
	q      queue
	now    Time
	seed   uint64
	loops  uint64
	events uint64
}

// NewVirtual returns a virtual clock at time 0 whose loops draw randomness from seed.
func NewVirtual(seed uint64) *Virtual { return &Virtual{seed: seed} }

// Now returns the current virtual time.
func (v *Virtual) Now() Time { return v.now }

// Events returns how many callbacks have run.
func (v *Virtual) Events() uint64 { return v.events }

// NewLoop implements Clock.
func (v *Virtual) NewLoop(name string) Loop {
	v.loops++
	return &virtualLoop{v: v, name: name, rng: rand.New(rand.NewPCG(v.seed, v.loops))}
}

// Step runs the earliest pending event, advancing time to it. It reports false when
// nothing is pending.
func (v *Virtual) Step() bool {
	t := v.q.peek()
	if t == nil {
		return false
	}
	v.now = t.when
	v.events++
	v.q.fire(t)
	return true
}

// Run runs events until none is pending.
func (v *Virtual) Run() {
	for v.Step() {
	}
}

// RunUntil runs every event due at or before t, then sets the time to t (if it is
// later than now).
func (v *Virtual) RunUntil(t Time) {
	for {
		next := v.q.peek()
		if next == nil || next.when > t {
			break
		}
		v.Step()
	}
	if t > v.now {
		v.now = t
	}
}

// RunFor runs RunUntil(Now()+d).
func (v *Virtual) RunFor(d time.Duration) { v.RunUntil(v.now.Add(d)) }

// Synchronous reports whether loops a and b run on one goroutine in one event order
// (two loops of one Virtual, two of one Parallel partition, or one loop of any driver:
// nodes that share a Real loop, as a lab's nodes do), so that code on a may touch b's
// state directly instead of handing work over through a Task.
func Synchronous(a, b Loop) bool {
	if a == b {
		return true
	}
	if pa, ok := a.(*parallelLoop); ok {
		pb, ok := b.(*parallelLoop)
		return ok && pa.part == pb.part
	}
	va, ok := a.(*virtualLoop)
	vb, ok2 := b.(*virtualLoop)
	return ok && ok2 && va.v == vb.v
}

// Barriered reports whether a task that loop src's code posts to loop dst
// (Task.PostFrom) runs only while src's loop is stopped, and src's loop runs only
// while the task is not running: two partitions of one Parallel, whose hand-overs run
// at the barrier between windows. What src's callbacks and the task share then needs
// no synchronization of its own: the barrier orders them. Real loops run at once.
func Barriered(src, dst Loop) bool {
	ps, ok1 := src.(*parallelLoop)
	pd, ok2 := dst.(*parallelLoop)
	return ok1 && ok2 && ps.clock == pd.clock && ps.part != pd.part
}

type virtualLoop struct {
	v    *Virtual
	name string
	rng  *rand.Rand
}

func (l *virtualLoop) Now() Time        { return l.v.now }
func (l *virtualLoop) Rand() *rand.Rand { return l.rng }
func (l *virtualLoop) String() string   { return l.name }

func (l *virtualLoop) NewTimer(fn func()) *Timer {
	return &Timer{fn: fn, index: -1, q: &l.v.q}
}

func (l *virtualLoop) NewTask(fn func()) *Task {
	t := &Task{fn: fn}
	timer := l.NewTimer(t.run)
	t.post = func(*Task) { timer.Reset(l.v.now) }
	return t
}
