package clock

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Parallel is the partitioned discrete-event driver: Virtual's semantics spread over
// several OS threads. Each loop belongs to a partition (a pod of a fat tree, say);
// each partition has its own event queue and time, and the partitions advance
// together in windows no longer than the lookahead, the least delay of a link
// between two partitions (conservative synchronization with synchronous windows):
// an event at t in one partition reaches another no earlier than t + lookahead, so
// within a window every partition can run its events without hearing from the others.
//
// A round (Round):
//
//  1. At the barrier W (every partition has run every event before W; all clocks
//     read W), the coordinator's timers due run: loops that belong to no partition
//     (PartitionOf returns -1) live here and may touch any partition's state, since
//     nothing else runs. Then the tasks other partitions posted during the last
//     window (PostFrom: a link's hand-over) run, partition by partition in index
//     order, each partition's in the order the tasks were created.
//  2. The window ends at H = min(earliest event + lookahead, the coordinator's next
//     timer): every partition runs its events before H, on up to Threads threads.
//
// Nothing in a round depends on which thread ran a partition or when: the same seed
// gives the same events in the same order whatever Threads is. The order of events
// due at the same instant differs from Virtual's (a hand-over from another partition
// runs at the start of the window), so a run under Parallel is reproducible but not
// Virtual's run, bit for bit.
//
// Rules for the code it runs: a loop's callbacks touch only their partition's state;
// they reach another partition only through Task.PostFrom (a link end, which hands
// frames over in a lock-free ring); Task.Post and Timer.Reset address the caller's own
// partition or, from a coordinator callback, any partition.
type Parallel struct {
	opts   ParallelOptions
	parts  []*partition
	coord  partition // the coordinator's loops and timers: they run at barriers
	loops  uint64
	now    Time // the last barrier
	rounds uint64
	closed bool

	// The workers' window: end is published by advancing window; busy counts the
	// workers still in it; next is the next partition one takes.
	workers  int
	end      Time
	window   atomic.Uint64
	busy     atomic.Int32
	next     atomic.Int32
	stopping atomic.Bool
}

// ParallelOptions configures Parallel.
type ParallelOptions struct {
	// Seed seeds the loops' random sources, as NewVirtual's.
	Seed uint64
	// Partitions is how many partitions there are (at least 1).
	Partitions int
	// PartitionOf places the loop of a node by the name NewLoop gets: 0 to
	// Partitions-1, or -1 for the coordinator.
	PartitionOf func(name string) int
	// Lookahead is the least delay between an event in one partition and its effect
	// in another (positive).
	Lookahead time.Duration
	// Threads is how many OS threads run the partitions' windows (at least 1).
	Threads int
}

// partition is one partition's queue and time. Its inbox collects the tasks other
// partitions post during a window.
type partition struct {
	q      queue
	now    Time
	events uint64
	tasks  uint64 // tasks created for this partition's loops: their order in the inbox

	mu    sync.Mutex
	inbox []*Task
	spare []*Task
}

// NewParallel returns a partitioned clock at time 0.
func NewParallel(opts ParallelOptions) (*Parallel, error) {
	switch {
	case opts.Partitions < 1:
		return nil, fmt.Errorf("clock: %d partitions: want at least 1", opts.Partitions)
	case opts.PartitionOf == nil:
		return nil, fmt.Errorf("clock: no PartitionOf")
	case opts.Lookahead <= 0:
		return nil, fmt.Errorf("clock: lookahead %v: want a positive delay between partitions", opts.Lookahead)
	case opts.Threads < 1:
		return nil, fmt.Errorf("clock: %d threads: want at least 1", opts.Threads)
	}
	p := &Parallel{opts: opts}
	for range opts.Partitions {
		p.parts = append(p.parts, &partition{})
	}
	return p, nil
}

// Now returns the time of the last barrier.
func (p *Parallel) Now() Time { return p.now }

// Events returns how many callbacks have run, the coordinator's included.
func (p *Parallel) Events() uint64 {
	n := p.coord.events
	for _, pt := range p.parts {
		n += pt.events
	}
	return n
}

// Rounds returns how many rounds (windows) have run.
func (p *Parallel) Rounds() uint64 { return p.rounds }

// NewLoop implements Clock: the loop joins the partition PartitionOf names. It panics
// on a partition out of range, a setup error.
func (p *Parallel) NewLoop(name string) Loop {
	p.loops++
	pt := &p.coord
	if i := p.opts.PartitionOf(name); i >= 0 {
		if i >= len(p.parts) {
			panic(fmt.Sprintf("clock: loop %s placed in partition %d of %d", name, i, len(p.parts)))
		}
		pt = p.parts[i]
	}
	return &parallelLoop{clock: p, part: pt, name: name, rng: rand.New(rand.NewPCG(p.opts.Seed, p.loops))}
}

// Round runs one round (see Parallel) and reports whether anything was left to run.
func (p *Parallel) Round() bool {
	if p.closed {
		return false
	}
	p.coord.runInbox()
	p.runCoordinator()
	for _, pt := range p.parts {
		pt.runInbox()
	}
	end, ok := p.windowEnd()
	if !ok {
		return false
	}
	p.rounds++
	p.runWindow(end)
	p.now = end
	p.coord.now = end
	for _, pt := range p.parts {
		pt.now = end
	}
	return true
}

// windowEnd is where the next window ends, and false when nothing is pending.
func (p *Parallel) windowEnd() (Time, bool) {
	earliest := Never
	for _, pt := range p.parts {
		if t := pt.q.peek(); t != nil {
			earliest = min(earliest, t.when)
		}
		pt.mu.Lock()
		if len(pt.inbox) > 0 {
			// Posted by a task of an earlier partition this barrier: its frames were
			// sent now and arrive a lookahead later at the earliest.
			earliest = min(earliest, p.now)
		}
		pt.mu.Unlock()
	}
	coord := Never
	if t := p.coord.q.peek(); t != nil {
		coord = t.when
	}
	if earliest == Never && coord == Never {
		return 0, false
	}
	end := coord
	if earliest != Never {
		end = min(end, earliest.Add(p.opts.Lookahead))
	}
	// A timer armed in the past runs at the next window, as under Virtual; the
	// barrier never moves back.
	return max(end, p.now), true
}

// runCoordinator runs the coordinator's timers due at the barrier.
func (p *Parallel) runCoordinator() {
	c := &p.coord
	for t := c.q.peek(); t != nil && t.when <= p.now; t = c.q.peek() {
		c.events++
		c.q.fire(t)
	}
}

// runInbox runs, in creation order, the tasks other partitions posted to pt.
func (pt *partition) runInbox() {
	pt.mu.Lock()
	tasks := pt.inbox
	pt.inbox = pt.spare[:0]
	pt.mu.Unlock()
	slices.SortFunc(tasks, func(a, b *Task) int { return cmp.Compare(a.order, b.order) })
	for i, t := range tasks {
		tasks[i] = nil
		pt.events++
		t.run()
	}
	pt.spare = tasks[:0]
}

// runEvents runs pt's events before end.
func (pt *partition) runEvents(end Time) {
	for t := pt.q.peek(); t != nil && t.when < end; t = pt.q.peek() {
		pt.now = t.when
		pt.events++
		pt.q.fire(t)
	}
}

// runWindow runs every partition's events before end, on up to Threads threads. The
// workers spin between windows rather than sleep: a window is hundreds of
// microseconds of work, and waking a sleeping thread took tens of them.
func (p *Parallel) runWindow(end Time) {
	if p.opts.Threads == 1 || len(p.parts) == 1 {
		for _, pt := range p.parts {
			pt.runEvents(end)
		}
		return
	}
	if p.workers == 0 {
		p.workers = min(p.opts.Threads, len(p.parts)) - 1
		for range p.workers {
			go p.worker()
		}
	}
	p.end = end
	p.next.Store(0)
	p.busy.Store(int32(p.workers))
	p.window.Add(1)
	p.work(end)
	for p.busy.Load() != 0 {
		runtime.Gosched()
	}
}

// worker runs partitions in each window until Close.
func (p *Parallel) worker() {
	var seen uint64
	for {
		w := p.window.Load()
		for spins := 0; w == seen; spins++ {
			if spins%64 == 63 {
				runtime.Gosched() // more threads than cores: let the others run
			}
			w = p.window.Load()
		}
		seen = w
		if p.stopping.Load() {
			return
		}
		p.work(p.end)
		p.busy.Add(-1)
	}
}

// work takes partitions until none is left in this window.
func (p *Parallel) work(end Time) {
	for {
		i := int(p.next.Add(1)) - 1
		if i >= len(p.parts) {
			return
		}
		p.parts[i].runEvents(end)
	}
}

// Close stops the worker threads. The clock runs nothing afterwards.
func (p *Parallel) Close() {
	if p.closed {
		return
	}
	p.closed = true
	p.stopping.Store(true)
	p.window.Add(1)
}

type parallelLoop struct {
	clock *Parallel
	part  *partition
	name  string
	rng   *rand.Rand
}

func (l *parallelLoop) Now() Time        { return l.part.now }
func (l *parallelLoop) Rand() *rand.Rand { return l.rng }
func (l *parallelLoop) String() string   { return l.name }

func (l *parallelLoop) NewTimer(fn func()) *Timer {
	return &Timer{fn: fn, index: -1, q: &l.part.q}
}

func (l *parallelLoop) NewTask(fn func()) *Task {
	pt := l.part
	pt.tasks++
	t := &Task{fn: fn, order: pt.tasks}
	timer := l.NewTimer(t.run)
	t.post = func(*Task) { timer.Reset(pt.now) }
	t.postFrom = func(t *Task, src Loop) {
		if s, ok := src.(*parallelLoop); ok && s.part == pt {
			timer.Reset(pt.now)
			return
		}
		pt.mu.Lock()
		pt.inbox = append(pt.inbox, t)
		pt.mu.Unlock()
	}
	return t
}
