package link

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// lateLoop runs every callback lag after it was due, as a real-time loop behind its
// work does: its Now is the virtual time plus lag.
type lateLoop struct {
	clock.Loop
	lag time.Duration
}

func (l lateLoop) Now() clock.Time { return l.Loop.Now().Add(l.lag) }

// arrivalLog records the arrival times a receiver is handed, in the order it is.
type arrivalLog struct{ times *[]clock.Time }

func (r arrivalLog) Receive(frames []*Frame) {
	for _, f := range frames {
		*r.times = append(*r.times, f.Time)
		f.Release()
	}
}

// TestMergeHandsOverInArrivalOrder: two links into one loop that runs 10 µs late, their
// frames interleaved in time. Each end on its own hands its receiver its batch, and
// the other link's earlier frames come after; in a Merge every frame comes in arrival
// order, each exactly once. On time (virtual time) the Merge changes nothing.
func TestMergeHandsOverInArrivalOrder(t *testing.T) {
	const n = 20
	run := func(lag time.Duration, merge bool) []clock.Time {
		v := clock.NewVirtual(1)
		pool := NewSerialPool(1518)
		var times []clock.Time
		dst := lateLoop{Loop: v.NewLoop("dst"), lag: lag}
		var m Merge
		for i := range 2 {
			a, b, err := New(Config{Rate: 100e9, Delay: time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			b.Attach(dst, arrivalLog{&times})
			if merge && !m.Add(b) {
				t.Fatal("Merge.Add refused an end attached to the loop of the others")
			}
			// Both links hand their frames over ahead of their times, as a scheduler with a
			// transmit lookahead does: link i's frame k leaves at 20 µs + k µs + i·0.5 µs.
			src := v.NewLoop("src")
			a.Attach(src, arrivalLog{new([]clock.Time)})
			src.NewTimer(func() {
				batch := make([]*Frame, n)
				for k := range batch {
					batch[k] = pool.Get()
					if _, err := batch[k].SetLen(64); err != nil {
						t.Fatal(err)
					}
					batch[k].Time = clock.Time(20_000 + k*1000 + i*500) // after both were sent
				}
				a.Send(batch)
			}).Reset(0)
		}
		v.Run()
		if len(times) != 2*n {
			t.Fatalf("lag %v, merge %v: %d frames handed over, want %d", lag, merge, len(times), 2*n)
		}
		return times
	}
	inOrder := func(times []clock.Time) bool {
		for i := 1; i < len(times); i++ {
			if times[i] < times[i-1] {
				return false
			}
		}
		return true
	}
	if times := run(10*time.Microsecond, false); inOrder(times) {
		t.Fatalf("without a Merge a late loop still got the two links' frames in arrival order: %v", times)
	}
	if times := run(10*time.Microsecond, true); !inOrder(times) {
		t.Errorf("a late Merge handed frames over out of arrival order: %v", times)
	}
	onTime, merged := run(0, false), run(0, true)
	for i := range onTime {
		if onTime[i] != merged[i] {
			t.Fatalf("on time, frame %d arrived at %v in a Merge, %v without", i, merged[i], onTime[i])
		}
	}
}

// TestMergeAddRefuses: only ends attached to the loop of the others join.
func TestMergeAddRefuses(t *testing.T) {
	v := clock.NewVirtual(1)
	var m Merge
	ends := make([]*End, 3)
	for i := range ends {
		_, b, err := New(Config{Rate: 1e9})
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = b
	}
	if m.Add(ends[0]) {
		t.Error("an end not yet attached joined")
	}
	one, other := v.NewLoop("one"), v.NewLoop("other")
	ends[0].Attach(one, arrivalLog{new([]clock.Time)})
	ends[1].Attach(other, arrivalLog{new([]clock.Time)})
	if !m.Add(ends[0]) {
		t.Fatal("the first attached end did not join")
	}
	if m.Add(ends[0]) {
		t.Error("an end joined twice")
	}
	if m.Add(ends[1]) {
		t.Error("an end on another loop joined")
	}
}
