package clock

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// timerOps is what a callback in TestQueueMatchesSlow does to the timers: the queue
// under test through Virtual, or slowTimers.
type timerOps interface {
	now() Time
	reset(id int, at Time)
	stop(id int) bool
	pending(id int) bool
}

// slowTimers is the reference: every pending timer in a slice, the earliest (deadline,
// then the order it was armed in) found by a scan.
type slowTimers struct {
	t     Time
	seq   uint64
	armed []bool
	when  []Time
	order []uint64
	fire  func(id int)
}

func (s *slowTimers) now() Time           { return s.t }
func (s *slowTimers) pending(id int) bool { return s.armed[id] }

func (s *slowTimers) reset(id int, at Time) {
	s.seq++
	s.armed[id], s.when[id], s.order[id] = true, at, s.seq
}

func (s *slowTimers) stop(id int) bool {
	was := s.armed[id]
	s.armed[id] = false
	return was
}

func (s *slowTimers) step() bool {
	next := -1
	for id, a := range s.armed {
		if a && (next < 0 || s.when[id] < s.when[next] || s.when[id] == s.when[next] && s.order[id] < s.order[next]) {
			next = id
		}
	}
	if next < 0 {
		return false
	}
	s.armed[next] = false
	s.t = s.when[next]
	s.fire(next)
	return true
}

// virtualTimers drives the same callbacks through Virtual.
type virtualTimers struct {
	v      *Virtual
	timers []*Timer
}

func (vt *virtualTimers) now() Time             { return vt.v.Now() }
func (vt *virtualTimers) reset(id int, at Time) { vt.timers[id].Reset(at) }
func (vt *virtualTimers) stop(id int) bool      { return vt.timers[id].Stop() }
func (vt *virtualTimers) pending(id int) bool   { return vt.timers[id].Pending() }

// randomCallback is timer id's callback: a few random operations on random timers,
// itself among them (re-armed, stopped, stopped and re-armed), some deadlines at the
// same instant and some before it, each operation's result appended to the trace.
func randomCallback(ops timerOps, r *rand.Rand, n, id int, trace *[]string) {
	*trace = append(*trace, fmt.Sprintf("%v: %d fires, pending %v", ops.now(), id, ops.pending(id)))
	for range 1 + r.IntN(3) {
		other := r.IntN(n)
		if r.IntN(3) == 0 {
			other = id
		}
		switch r.IntN(5) {
		case 0:
			*trace = append(*trace, fmt.Sprintf("stop %d: %v", other, ops.stop(other)))
		default:
			at := ops.now() + Time(r.IntN(60)-5)
			ops.reset(other, at)
			*trace = append(*trace, fmt.Sprintf("reset %d to %v, pending %v", other, at, ops.pending(other)))
		}
	}
}

// TestQueueMatchesSlow runs random timers whose callbacks re-arm and stop each other
// and themselves through Virtual and through a scan of every timer, and compares what
// fired when and what every operation returned.
func TestQueueMatchesSlow(t *testing.T) {
	for seed := range uint64(50) {
		const n, events = 40, 3000
		run := func(ops timerOps, arm func(id int, fn func()), step func() bool) []string {
			r := rand.New(rand.NewPCG(seed, 1))
			var trace []string
			for id := range n {
				arm(id, func() { randomCallback(ops, r, n, id, &trace) })
			}
			for id := range n {
				ops.reset(id, Time(r.IntN(20)))
			}
			for i := 0; i < events && step(); i++ {
			}
			return trace
		}
		v := NewVirtual(1)
		vt := &virtualTimers{v: v, timers: make([]*Timer, n)}
		l := v.NewLoop("l")
		got := run(vt, func(id int, fn func()) { vt.timers[id] = l.NewTimer(fn) }, v.Step)

		fns := make([]func(), n)
		slow := &slowTimers{armed: make([]bool, n), when: make([]Time, n), order: make([]uint64, n)}
		slow.fire = func(id int) { fns[id]() }
		want := run(slow, func(id int, fn func()) { fns[id] = fn }, slow.step)

		if fired := len(slices.DeleteFunc(slices.Clone(want), func(s string) bool { return !strings.Contains(s, "fires") })); fired < events/2 {
			t.Fatalf("seed %d: %d timers fired: the timers died out", seed, fired)
		}
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("seed %d, step %d: %q, want %q", seed, i, got[i], want[i])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d steps, want %d", seed, len(got), len(want))
		}
	}
}
