package clock

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestVirtualOrderAndTies(t *testing.T) {
	v := NewVirtual(1)
	a, b := v.NewLoop("a"), v.NewLoop("b")
	var got []string
	at := func(l Loop, when Time, name string) {
		l.NewTimer(func() {
			if l.Now() != when {
				t.Errorf("%s ran at %v, want %v", name, l.Now(), when)
			}
			got = append(got, name)
		}).Reset(when)
	}
	at(a, 30, "a30")
	at(b, 10, "b10")
	at(a, 20, "a20-first")
	at(b, 20, "b20-second")
	at(a, 20, "a20-third")
	v.Run()
	want := []string{"b10", "a20-first", "b20-second", "a20-third", "a30"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if v.Now() != 30 || v.Events() != 5 {
		t.Fatalf("now %v events %d", v.Now(), v.Events())
	}
}

func TestVirtualResetStop(t *testing.T) {
	v := NewVirtual(1)
	l := v.NewLoop("l")
	fired := 0
	tm := l.NewTimer(func() { fired++ })
	tm.Reset(100)
	tm.Reset(50) // replaces, does not duplicate
	if !tm.Pending() || tm.When() != 50 {
		t.Fatalf("pending %v when %v", tm.Pending(), tm.When())
	}
	v.RunUntil(49)
	if fired != 0 || v.Now() != 49 {
		t.Fatalf("fired %d now %v", fired, v.Now())
	}
	v.RunUntil(50)
	if fired != 1 || tm.Pending() {
		t.Fatalf("fired %d pending %v", fired, tm.Pending())
	}
	tm.Reset(60)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop must report pending once")
	}
	v.Run()
	if fired != 1 {
		t.Fatalf("stopped timer fired")
	}
}

func TestVirtualTaskCoalesces(t *testing.T) {
	v := NewVirtual(1)
	l := v.NewLoop("l")
	runs := 0
	var task *Task
	task = l.NewTask(func() {
		runs++
		if runs == 1 {
			task.Post() // a post while running schedules exactly one more run
			task.Post()
		}
	})
	l.NewTimer(func() { task.Post(); task.Post(); task.Post() }).Reset(7)
	v.Run()
	if runs != 2 || v.Now() != 7 {
		t.Fatalf("runs %d at %v, want 2 at 7", runs, v.Now())
	}
}

func TestVirtualRandDeterministic(t *testing.T) {
	draw := func() []uint64 {
		v := NewVirtual(42)
		a, b := v.NewLoop("a"), v.NewLoop("b")
		return []uint64{a.Rand().Uint64(), b.Rand().Uint64(), a.Rand().Uint64()}
	}
	x, y := draw(), draw()
	if !slices.Equal(x, y) || x[0] == x[1] {
		t.Fatalf("draws %v %v", x, y)
	}
}

// TestRealSerializesTasksAndTimers checks ordering only; timing belongs in benchmarks.
func TestRealSerializesTasksAndTimers(t *testing.T) {
	r := NewReal(RealOptions{Seed: 1})
	l := r.NewLoop("l")
	const posts = 1000
	count := 0 // touched only by the loop
	done := make(chan []Time, 1)
	var fired []Time
	var timers []*Timer
	for i := range 3 {
		timers = append(timers, l.NewTimer(func() {
			fired = append(fired, Time(i))
			if len(fired) == 3 {
				done <- fired
			}
		}))
	}
	task := l.NewTask(func() { count++ })
	start := l.NewTask(func() {
		now := l.Now()
		timers[2].Reset(now.Add(300 * time.Microsecond))
		timers[0].Reset(now.Add(100 * time.Microsecond))
		timers[1].Reset(now.Add(200 * time.Microsecond))
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range posts {
		task.Post()
	}
	start.Post()
	got := <-done
	if !slices.Equal(got, []Time{0, 1, 2}) {
		t.Fatalf("timers fired in order %v", got)
	}
	check := make(chan int)
	last := l.NewTask(func() { check <- count })
	last.Post()
	if n := <-check; n < 1 || n > posts {
		t.Fatalf("task ran %d times for %d posts", n, posts)
	}
}

// TestInbox: calls run on the loop in order, a call made from a running call runs in
// the same drain's successor, and nothing runs before the clock does.
func TestInbox(t *testing.T) {
	v := NewVirtual(1)
	b := NewInbox(v.NewLoop("n"))
	var got []int
	for i := range 3 {
		b.Do(func() {
			got = append(got, i)
			if i == 1 {
				b.Do(func() { got = append(got, 10) })
			}
		})
	}
	if len(got) != 0 {
		t.Fatal("an inbox call ran before the clock")
	}
	v.Run()
	if fmt.Sprint(got) != "[0 1 2 10]" {
		t.Errorf("ran %v, want [0 1 2 10]", got)
	}
}

// TestRealLateness: a timer due while another's callback holds the loop for 3 ms runs
// at least 2.9 ms late, and Lateness counts it so.
// Only lower bounds on lateness are asserted: how much later the kernel wakes the loop
// is the machine's business.
func TestRealLateness(t *testing.T) {
	r := NewReal(RealOptions{Seed: 1})
	l := r.NewLoop("busy")
	done := make(chan struct{})
	second := l.NewTimer(func() { close(done) })
	first := l.NewTimer(func() {
		for start := time.Now(); time.Since(start) < 3*time.Millisecond; {
		}
	})
	start := l.NewTask(func() {
		now := l.Now()
		first.Reset(now.Add(100 * time.Microsecond))
		second.Reset(now.Add(200 * time.Microsecond))
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start.Post()
	<-done
	got := r.Lateness()
	if len(got) != 1 || got[0].Loop != "busy" || got[0].Timers() != 2 {
		t.Fatalf("Lateness() = %+v, want the loop busy with 2 timers", got)
	}
	// The second timer ran at least 2.9 ms late: in the bucket [2.048, 4.096) ms or a
	// later one.
	if q := got[0].Quantile(1); q < 4*time.Millisecond {
		t.Errorf("the timer due during a 3 ms callback counted less than %v late: %+v", q, got[0])
	}
}

// TestRealBehindStillRunsTasks: a loop that has fallen behind, whose timer is overdue
// again each time it returns, still runs a task posted meanwhile once its time has
// caught up with the task's (it runs the overdue timers at their own times first, as
// Virtual would) or fallen MaxLag behind. Before passes, a pass ran timers until none
// was due, and the task waited until the loop caught up (here: never, until the timer
// stopped re-arming).
func TestRealBehindStillRunsTasks(t *testing.T) {
	const lag = 300 * time.Microsecond
	r := NewReal(RealOptions{Seed: 1, MaxLag: lag})
	l := r.NewLoop("behind")
	const callbacks = 200
	// fired is read by the test goroutine as it posts the task: the callback the post
	// happened during. (Asked of the loop by a task beforehand, it included the test
	// goroutine's wake-up after the answer, which took up to milliseconds under the
	// race detector: the test failed on the scheduler of goroutines, not on the loop.)
	var fired atomic.Int32
	taskAt := int32(-1) // the callbacks run before the task: touched only by the loop
	done := make(chan struct{})
	var busy *Timer
	busy = l.NewTimer(func() {
		n := fired.Add(1)
		// 100 µs of work, and re-armed in the past: due again at every return.
		for start := time.Now(); time.Since(start) < 100*time.Microsecond; {
		}
		if n == callbacks {
			close(done)
			return
		}
		busy.Reset(l.Now().Add(-50 * time.Microsecond))
	})
	task := l.NewTask(func() { taskAt = fired.Load() })
	start := l.NewTask(func() { busy.Reset(l.Now()) })
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start.Post()
	// Post the task once the loop is busy: from the fifth callback on.
	for fired.Load() < 5 {
		runtime.Gosched()
	}
	posted := fired.Load()
	task.Post()
	<-done
	check := make(chan int32)
	l.NewTask(func() { check <- taskAt }).Post()
	// The task was posted during callback posted or just after it. The timer's time
	// stays where the loop is behind until it is MaxLag behind real time (3 callbacks),
	// re-armed 50 µs before it, then past the pass's start; the pass ends and the task
	// runs. A starving loop runs it only once the timer stops. (Two callbacks of slack.)
	if at := <-check; at < 0 || at > posted+int32(lag/(100*time.Microsecond))+3 {
		t.Fatalf("a task posted at callback %d of an overdue timer ran after callback %d of %d: starved", posted, at, callbacks)
	}
}

func TestLatenessQuantile(t *testing.T) {
	var x Lateness
	if x.Quantile(0.5) != 0 {
		t.Errorf("an idle loop's median lateness is %v, want 0", x.Quantile(0.5))
	}
	x.Buckets[0], x.Buckets[3], x.Buckets[LateBuckets-1] = 90, 9, 1 // < 1 µs, 4–8 µs, the rest
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Microsecond}, {0.9, time.Microsecond}, {0.95, 8 * time.Microsecond}, {0.99, 8 * time.Microsecond},
		{1, time.Duration(Never)}} {
		if got := x.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	for _, c := range []struct {
		late Time
		want int
	}{{0, 0}, {999, 0}, {1000, 1}, {1999, 1}, {2000, 2}, {4000, 3}, {Time(time.Second), LateBuckets - 1}} {
		if got := lateBucket(c.late); got != c.want {
			t.Errorf("lateBucket(%v) = %d, want %d", c.late, got, c.want)
		}
	}
}

// TestRealBehindRunsEventsAtTheirTimes: a Real loop held up by a timer's callback
// runs the timers that fell due meanwhile at their own times, in order, and a task
// posted meanwhile at the earliest overdue timer's time, before it (as Virtual would);
// further behind than MaxLag, at real time minus MaxLag. The hold-up is a busy wait,
// so the loop is at least that late whatever the machine does; the first loop's
// MaxLag is a second, beyond any scheduling delay.
func TestRealBehindRunsEventsAtTheirTimes(t *testing.T) {
	for _, c := range []struct {
		lag      time.Duration
		atTheirs bool
	}{{time.Second, true}, {100 * time.Microsecond, false}} {
		r := NewReal(RealOptions{Seed: 1, MaxLag: c.lag})
		l := r.NewLoop("held")
		type ran struct {
			name      string
			when, now Time
		}
		var got []ran
		done := make(chan struct{})
		var a, b *Timer
		a = l.NewTimer(func() { got = append(got, ran{"a", a.When(), l.Now()}) })
		b = l.NewTimer(func() { got = append(got, ran{"b", b.When(), l.Now()}); close(done) })
		task := l.NewTask(func() { got = append(got, ran{"task", a.When(), l.Now()}) })
		hold := l.NewTimer(func() {
			now := l.Now()
			a.Reset(now.Add(100 * time.Microsecond))
			b.Reset(now.Add(200 * time.Microsecond))
			task.Post()
			for start := time.Now(); time.Since(start) < time.Millisecond; {
			}
		})
		start := l.NewTask(func() { hold.Reset(l.Now()) })
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		start.Post()
		<-done
		r.Close()
		if len(got) != 3 || got[0].name != "task" || got[1].name != "a" || got[2].name != "b" {
			t.Fatalf("MaxLag %v: ran %+v, want the task, then a, then b", c.lag, got)
		}
		for i, g := range got {
			if i > 0 && g.now < got[i-1].now {
				t.Errorf("MaxLag %v: %s ran at %v, after %s at %v: the loop's time went back", c.lag, g.name, g.now, got[i-1].name, got[i-1].now)
			}
			switch late := g.now - g.when; {
			case c.atTheirs && late != 0:
				t.Errorf("MaxLag %v: %s ran at %v, due at %v: want its own time", c.lag, g.name, g.now, g.when)
			case !c.atTheirs && late < Time(time.Millisecond-200*time.Microsecond-c.lag):
				t.Errorf("MaxLag %v: %s ran at %v, due at %v, after a 1 ms hold-up: want within %v of real time", c.lag, g.name, g.now, g.when, c.lag)
			}
		}
	}
}
