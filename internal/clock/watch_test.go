package clock

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// counterWatcher consumes a counter another goroutine (standing for another process)
// advances, following Watch's protocol.
type counterWatcher struct {
	produced atomic.Uint64 // the producer's work
	awake    atomic.Uint32 // kept by Sleep, read by the producer
	consumed uint64        // loop-owned
	polls    atomic.Uint64
	done     chan uint64
	want     uint64
}

func (w *counterWatcher) Poll() bool {
	w.polls.Add(1)
	p := w.produced.Load()
	if p == w.consumed {
		return false
	}
	w.consumed = p
	if p == w.want {
		w.done <- p
	}
	return true
}

func (w *counterWatcher) Sleep(asleep bool) {
	if asleep {
		w.awake.Store(0)
	} else {
		w.awake.Store(1)
	}
}

// TestWatchNoLostWakeups: a producer that writes the eventfd only while the loop says it
// is asleep is never missed, whether the loop sleeps, spins or works.
func TestWatchNoLostWakeups(t *testing.T) {
	r := NewReal(RealOptions{Seed: 1})
	l := r.NewLoop("l")
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	const items = 2000
	w := &counterWatcher{done: make(chan uint64, 1), want: items}
	if _, err := Watch(l, efd, w); err != nil {
		t.Fatal(err)
	}
	// A timer that keeps re-arming, so the loop alternates sleeping and spinning.
	var tick *Timer
	tick = l.NewTimer(func() { tick.Reset(l.Now().Add(70 * time.Microsecond)) })
	tick.Reset(0)
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	one := [8]byte{1}
	writes := 0
	for i := range items {
		w.produced.Add(1)
		if w.awake.Load() == 0 {
			unix.Write(efd, one[:])
			writes++
		}
		if i%7 == 0 {
			time.Sleep(time.Duration(i%300) * time.Microsecond)
		}
	}
	select {
	case got := <-w.done:
		if got != items {
			t.Fatalf("consumed %d of %d", got, items)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("lost wake-up: %d of %d items seen after 10 s", w.produced.Load(), items)
	}
	t.Logf("%d items, %d eventfd writes, %d polls", items, writes, w.polls.Load())
}

// TestWatchIdleLoop: a loop with nothing to do sleeps until the eventfd is written;
// unwatching stops the polls.
func TestWatchIdleLoop(t *testing.T) {
	r := NewReal(RealOptions{Seed: 1})
	l := r.NewLoop("l")
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	w := &counterWatcher{done: make(chan uint64, 1), want: 1}
	unwatch, err := Watch(l, efd, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	deadline := time.Now().Add(5 * time.Second)
	for w.awake.Load() != 0 || w.polls.Load() == 0 { // wait until the loop sleeps
		if time.Now().After(deadline) {
			t.Fatal("loop never went to sleep")
		}
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(10 * time.Millisecond)
	before := w.polls.Load()
	time.Sleep(20 * time.Millisecond)
	if n := w.polls.Load() - before; n != 0 {
		t.Fatalf("an idle, sleeping loop polled %d times", n)
	}
	w.produced.Add(1)
	one := [8]byte{1}
	unix.Write(efd, one[:])
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the eventfd did not wake the loop")
	}
	removed := make(chan struct{})
	l.NewTask(func() { unwatch(); close(removed) }).Post()
	<-removed
	before = w.polls.Load()
	unix.Write(efd, one[:])
	time.Sleep(20 * time.Millisecond)
	if n := w.polls.Load() - before; n != 0 {
		t.Fatalf("%d polls after unwatch", n)
	}
}

func TestWatchVirtual(t *testing.T) {
	v := NewVirtual(1)
	if _, err := Watch(v.NewLoop("l"), -1, &counterWatcher{}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Watch on a virtual loop: %v", err)
	}
}

func TestRealGrowProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := NewReal(RealOptions{GrowProcs: true})
	for _, n := range []string{"a", "b", "c"} {
		r.NewLoop(n)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := runtime.GOMAXPROCS(0); n != 4 {
		t.Fatalf("GOMAXPROCS %d after starting 3 loops with GrowProcs, want 4", n)
	}
}
