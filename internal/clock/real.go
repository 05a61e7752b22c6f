package clock

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSpin is how long before a deadline a Real loop stops sleeping in the kernel and
// spins instead. It covers the kernel's wake-up latency on the project's machines (see
// docs/architecture.md for the measurement); a larger value buys precision with CPU.
const DefaultSpin = 40 * time.Microsecond

// RealOptions configure a Real driver. The zero value is usable.
type RealOptions struct {
	// Seed seeds the loops' random sources (in creation order, as under Virtual).
	Seed uint64
	// Spin overrides DefaultSpin when positive.
	Spin time.Duration
	// GrowProcs makes Start raise GOMAXPROCS, if it is lower, to the number of loops
	// plus one. A loop sleeps in ppoll(2) on its locked thread, and Go leaves a thread
	// in a system call its P until sysmon retakes it (20 µs to 10 ms later): with fewer
	// Ps than loops, a loop that wakes up, and any other goroutine, can wait that long
	// for a P. On the project's 2-core machines, three loops under GOMAXPROCS=2 lose
	// 4–5× in throughput and get millisecond tails (see docs/verbs-service.md). The
	// threads then share the CPUs through the kernel's scheduler instead.
	GrowProcs bool
	// MaxLag overrides DefaultMaxLag when positive: how far a loop's time may fall
	// behind real time while the loop catches up (see Loop.Now under Real).
	MaxLag time.Duration
}

// DefaultMaxLag bounds how far a Real loop's time falls behind real time when the loop
// runs late. A loop that has fallen behind runs its overdue events at their own times,
// as Virtual does, so a stall of the loop's thread (the kernel's threads and Go's
// preemption took it for 0.03–2 ms on the project's 2-core machines, docs/rnic.md)
// delays the lab's events without changing them; a loop further behind than this
// runs at real time minus MaxLag, so a lab that lacks the CPU for its load slows
// down in model time as it does in real time, rather than drifting away from it.
const DefaultMaxLag = 2 * time.Millisecond

// Real is the real-time driver. Each loop runs on its own goroutine, locked to an OS
// thread whose timer slack is 1 ns; a loop sleeps in ppoll(2) on an eventfd until Spin
// before its next deadline and spins from there. Create loops and set up nodes, then
// Start; Close stops every loop.
type Real struct {
	epoch   time.Time
	seed    uint64
	spin    Time
	maxLag  Time
	loops   []*realLoop
	wg      sync.WaitGroup
	started bool
	grow    bool
}

// NewReal returns a real-time driver whose epoch is now.
func NewReal(opts RealOptions) *Real {
	spin := opts.Spin
	if spin <= 0 {
		spin = DefaultSpin
	}
	lag := opts.MaxLag
	if lag <= 0 {
		lag = DefaultMaxLag
	}
	return &Real{epoch: time.Now(), seed: opts.Seed, spin: Time(spin), maxLag: Time(lag), grow: opts.GrowProcs}
}

// Now returns the time since the driver's epoch (monotonic).
func (r *Real) Now() Time { return Time(time.Since(r.epoch)) }

// NewLoop implements Clock. It panics after Start: a lab's nodes exist before it runs.
func (r *Real) NewLoop(name string) Loop {
	if r.started {
		panic("clock: NewLoop after Start")
	}
	l := &realLoop{r: r, name: name, efd: -1,
		rng: rand.New(rand.NewPCG(r.seed, uint64(len(r.loops)+1)))}
	r.loops = append(r.loops, l)
	return l
}

// Start runs every loop. It fails if an eventfd cannot be created.
func (r *Real) Start() error {
	if r.started {
		return nil
	}
	r.started = true
	if want := len(r.loops) + 1; r.grow && runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	for _, l := range r.loops {
		if err := r.startLoop(l); err != nil {
			return err
		}
	}
	return nil
}

func (r *Real) startLoop(l *realLoop) error {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	l.efd = efd
	r.wg.Add(1)
	go l.run(&r.wg)
	return nil
}

// Close stops every loop after the callback it is running and waits for them.
func (r *Real) Close() {
	for _, l := range r.loops {
		l.stop.Store(true)
		l.kick()
	}
	r.wg.Wait()
	for _, l := range r.loops {
		if l.efd >= 0 {
			unix.Close(l.efd)
			l.efd = -1
		}
	}
}

type realLoop struct {
	r    *Real
	name string
	rng  *rand.Rand
	q    queue
	efd  int

	stop    atomic.Bool
	blocked atomic.Bool // the loop is (about to be) in ppoll: posters must kick

	// now is the loop's time (Now) once it runs, 0 before: written by the loop before
	// each callback (setTime), atomic only so that a stray reader elsewhere is not a race.
	now atomic.Int64

	mu      sync.Mutex
	inbox   []*Task // appended by any goroutine under mu
	pending atomic.Int32
	running []*Task // swapped with inbox by the loop

	// Loop-owned: watchers (see Watch) and the descriptors the loop sleeps on.
	watches []*watch
	pfds    []unix.PollFd

	// late counts the timers the loop ran by how late it ran them (see Lateness):
	// written by the loop, read by anyone.
	late    [LateBuckets]atomic.Uint64
	lateSum atomic.Int64 // ns
}

// LateBuckets is the number of lateness buckets: under 1 µs, then one per doubling
// (1–2 µs, 2–4 µs, …), the last holding everything from 2^(LateBuckets-2) µs up.
const LateBuckets = 16

// lateBucket is the bucket of a timer run d late.
func lateBucket(d Time) int {
	if d < 1000 {
		return 0
	}
	return min(bits.Len64(uint64(d/1000)), LateBuckets-1)
}

// LateBound is the upper bound of bucket i (the last bucket has none: Never).
func LateBound(i int) time.Duration {
	if i >= LateBuckets-1 {
		return time.Duration(Never)
	}
	return time.Duration(1000) << i
}

// Lateness is how late one loop ran its timers: how many it ran with each lateness
// (bucket i holds those run less than LateBound(i) after their time, and at least
// LateBound(i-1)). A loop that keeps up runs nearly all of them within a few
// microseconds (the kernel's wake-up, the spin); one the machine cannot keep up with
// runs them milliseconds late. Up to MaxLag late it still runs each at its own time
// (Loop.Now), and the lab's figures are those of a loop that kept up; beyond that its
// time jumps, and every time it reports — a frame's departure, a sample — is as late.
type Lateness struct {
	Loop    string
	Buckets [LateBuckets]uint64
	Sum     time.Duration // of every timer's lateness
	MaxLag  time.Duration // the loop's RealOptions.MaxLag (0: unknown)
}

// Add adds y's counts to x's (several loops as one, or one loop's two spans).
// The sum's MaxLag is the least of theirs.
func (x *Lateness) Add(y Lateness) {
	for i := range x.Buckets {
		x.Buckets[i] += y.Buckets[i]
	}
	x.Sum += y.Sum
	if x.MaxLag == 0 || (y.MaxLag != 0 && y.MaxLag < x.MaxLag) {
		x.MaxLag = y.MaxLag
	}
}

// Since is what x counted after earlier, a reading of the same loop.
func (x Lateness) Since(earlier Lateness) Lateness {
	for i := range x.Buckets {
		x.Buckets[i] -= min(earlier.Buckets[i], x.Buckets[i])
	}
	x.Sum -= min(earlier.Sum, x.Sum)
	return x
}

// Timers is how many timers the loop has run.
func (x Lateness) Timers() uint64 {
	var n uint64
	for _, c := range x.Buckets {
		n += c
	}
	return n
}

// Quantile is the upper bound of the bucket holding the q-quantile of the lateness
// (0 < q ≤ 1): "q of the timers ran less than this late". It is 0 when the loop has
// run none, and Never's duration for the last bucket.
func (x Lateness) Quantile(q float64) time.Duration {
	n := x.Timers()
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range x.Buckets {
		if seen += c; seen >= want {
			return LateBound(i)
		}
	}
	return LateBound(LateBuckets - 1)
}

// QuantileUS is Quantile in µs, for reports: the last bucket, which has no upper
// bound, is given by where it starts (LateBound(LateBuckets-2)).
func (x Lateness) QuantileUS(q float64) float64 {
	return float64(min(x.Quantile(q), LateBound(LateBuckets-2)) / time.Microsecond)
}

// Lateness reports each loop's timer lateness since Start, in creation order. It may
// be called from any goroutine.
func (r *Real) Lateness() []Lateness {
	out := make([]Lateness, len(r.loops))
	for i, l := range r.loops {
		out[i].Loop, out[i].MaxLag = l.name, time.Duration(r.maxLag)
		for b := range l.late {
			out[i].Buckets[b] = l.late[b].Load()
		}
		out[i].Sum = time.Duration(l.lateSum.Load())
	}
	return out
}

// Now is the loop's time: real time while the loop keeps up; when it runs late, the
// time of the event it is running (a timer's own deadline; a task's or a watcher's the
// earliest overdue timer's, which it precedes), as under Virtual, but never more than
// the driver's MaxLag behind real time. It never goes back, and it does not move
// during a callback. Before the loop runs (setup code) it is real time.
func (l *realLoop) Now() Time {
	if t := l.now.Load(); t != 0 {
		return Time(t)
	}
	return l.r.Now()
}

// setTime moves the loop's time to real time, held back to limit (the event about to
// run) but not further than MaxLag behind real time, and never back.
func (l *realLoop) setTime(real, limit Time) {
	t := max(min(real, limit), real-l.r.maxLag, Time(l.now.Load()), 1)
	l.now.Store(int64(t))
}

// setTaskTime sets the loop's time for tasks and watchers: they run before the
// timers already due, so at the earliest of those when the loop is late.
func (l *realLoop) setTaskTime() {
	limit := Never
	if t := l.q.peek(); t != nil {
		limit = t.when
	}
	l.setTime(l.r.Now(), limit)
}

func (l *realLoop) Rand() *rand.Rand { return l.rng }
func (l *realLoop) String() string   { return l.name }

func (l *realLoop) NewTimer(fn func()) *Timer {
	return &Timer{fn: fn, index: -1, q: &l.q}
}

func (l *realLoop) NewTask(fn func()) *Task {
	return &Task{fn: fn, post: l.post}
}

// post queues t. The critical section is one append per batch handed over, never per
// packet: tasks coalesce.
func (l *realLoop) post(t *Task) {
	l.mu.Lock()
	l.inbox = append(l.inbox, t)
	l.mu.Unlock()
	l.pending.Add(1)
	if l.blocked.Load() {
		l.kick()
	}
}

func (l *realLoop) kick() {
	if l.efd < 0 {
		return
	}
	var one = [8]byte{1}
	unix.Write(l.efd, one[:])
}

func (l *realLoop) run(wg *sync.WaitGroup) {
	defer wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Without this the kernel may defer our wake-up by the default 50 µs slack.
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	for !l.stop.Load() {
		// Watchers before tasks: a task may carry a frame that an out-of-process
		// producer's earlier work must precede (an app posts a receive, tells its peer
		// over TCP, and the peer's SEND arrives here as a link task); polling first
		// makes that work visible before the frame is handled.
		l.pollWatches()
		l.runTasks()
		// A pass runs the timers due when it starts, then goes back to the watchers
		// and tasks. A loop that has fallen behind always has another timer due by the
		// time one returns: running until none is due starved them for as long as the
		// loop stayed behind (a lab's counters query waited 52 ms at 10 Gb/s, and the
		// apps' posts waited with it).
		horizon := l.r.Now()
		for t := l.q.peek(); t != nil && t.when <= horizon; t = l.q.peek() {
			real := l.r.Now() // read per timer: its lateness includes the callbacks before it
			late := max(real-t.when, 0)
			l.late[lateBucket(late)].Add(1)
			l.lateSum.Add(int64(late))
			l.setTime(real, t.when)
			l.q.fire(t)
		}
		l.wait()
	}
}

func (l *realLoop) runTasks() {
	if l.pending.Load() == 0 {
		return
	}
	l.mu.Lock()
	l.inbox, l.running = l.running[:0], l.inbox
	l.mu.Unlock()
	l.pending.Add(-int32(len(l.running)))
	l.setTaskTime()
	for i, t := range l.running {
		l.running[i] = nil
		t.run()
	}
}

// wait returns when the next timer is due, a task was posted, a watcher found work or
// the loop must stop.
func (l *realLoop) wait() {
	deadline := Never
	if t := l.q.peek(); t != nil {
		deadline = t.when
	}
	var ts unix.Timespec
	if len(l.pfds) == 0 {
		l.rebuildFDs()
	}
	l.pfds[0].Fd = int32(l.efd)
	for {
		if l.pending.Load() != 0 || l.stop.Load() {
			return
		}
		remaining := deadline - l.r.Now()
		if remaining <= 0 {
			return
		}
		if remaining <= l.r.spin {
			if len(l.watches) > 0 && l.pollWatches() {
				return // the work may have armed an earlier timer
			}
			continue // spin: the kernel cannot wake us this precisely
		}
		l.blocked.Store(true)
		l.sleepWatches(true)
		if l.pending.Load() == 0 && !l.stop.Load() && !l.pollWatches() {
			timeout := &ts
			if deadline == Never {
				timeout = nil
			} else {
				ts = unix.NsecToTimespec(int64(remaining - l.r.spin))
			}
			if n, _ := unix.Ppoll(l.pfds, timeout, nil); n > 0 {
				if l.pfds[0].Revents != 0 {
					var buf [8]byte
					unix.Read(l.efd, buf[:])
					l.pfds[0].Revents = 0
				}
				l.drainWatches()
			}
		}
		l.blocked.Store(false)
		l.sleepWatches(false)
		if len(l.watches) > 0 {
			return // poll the watchers (and everything else) from the top of the loop
		}
	}
}
