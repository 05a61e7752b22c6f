package lab

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// The bounds of op "record": a sample costs each node's loop a timer and a read of
// its counters, so the interval has a floor; the rows a recorder keeps between two
// drains and the time it runs undrained are bounded, so that a sampler that went away
// (a killed `rocelab experiment --lab`) costs the lab a bounded amount of memory and
// then nothing.
const (
	MinRecordEvery = 10 * time.Microsecond
	MaxRecordEvery = 10 * time.Second
	// MaxRecorded is the rows a recorder keeps until a drain takes them; later rows
	// are counted as dropped.
	MaxRecorded = 1 << 16
	// recordIdle stops a recorder nobody drained for this long.
	recordIdle = MaxHold
	// maxPending bounds the rows still waiting for a node's read (a node whose loop
	// stalls); the oldest are dropped beyond it.
	maxPending = 64
)

// recorder samples what op "counters" reads, every interval, on each node's own loop:
// a timer per node reads that node's counters at each multiple of the interval of the
// lab's clock, and the reads of one instant make one row, timed by its switches' reads.
// A sampler outside the lab polling every millisecond gets its answers late and
// irregularly on a busy machine (its own process, the control socket and every loop
// between wait for a core: 4–29 ms apart in a 1 Gb/s lab whose loop ran its timers
// 1–12 µs late); a node's timer is only as late as its loop.
type recorder struct {
	every   time.Duration
	nodes   int
	stopped atomic.Bool

	mu      sync.Mutex
	pending []*pendingRow // by sample index, ascending
	rows    []Counters
	dropped uint64
	drained clock.Time // the lab clock's time at the last drain (or the start)
	lastNs  int64      // the time of the last complete row
}

type pendingRow struct {
	k   int64
	c   Counters
	got int
}

// add records one node's read for sample k, at clock time at; a switch's read (timed)
// times the row, as it does op "counters": the rates a sampler computes are the
// switch ports', over the times the switch read them.
func (r *recorder) add(k int64, at clock.Time, timed bool, fill func(*Counters)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for i < len(r.pending) && r.pending[i].k < k {
		i++
	}
	if i == len(r.pending) || r.pending[i].k != k {
		p := &pendingRow{k: k, c: newCounters()}
		r.pending = append(r.pending, nil)
		copy(r.pending[i+1:], r.pending[i:])
		r.pending[i] = p
	}
	p := r.pending[i]
	fill(&p.c)
	if timed {
		p.c.TimeNs = max(p.c.TimeNs, int64(at))
	}
	if p.got++; p.got == r.nodes {
		r.pending = append(r.pending[:i], r.pending[i+1:]...)
		r.complete(p.c)
	}
	for len(r.pending) > maxPending {
		r.pending = r.pending[1:]
		r.dropped++
	}
}

// complete keeps a row every node has read. A loop behind its sampling instants
// reads several at its own time, which stays where it is while the loop catches up
// (clock.Loop.Now): rows of one time are one reading, and a sampler that divides by
// the time between rows must not get two. The latest stands in for the last row if
// that is not drained yet, and is left out if it is. (A lab without switches times
// no row: its rows are all kept.)
func (r *recorder) complete(c Counters) {
	if c.TimeNs != 0 && c.TimeNs <= r.lastNs {
		if n := len(r.rows); n > 0 && r.rows[n-1].TimeNs == c.TimeNs {
			r.rows[n-1] = c
		}
		return
	}
	r.lastNs = c.TimeNs
	if len(r.rows) < MaxRecorded {
		r.rows = append(r.rows, c)
	} else {
		r.dropped++
	}
}

// drain returns the complete rows recorded since the last drain and the rows dropped.
func (r *recorder) drain(now clock.Time) ([]Counters, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rows, dropped := r.rows, r.dropped
	r.rows, r.dropped, r.drained = nil, 0, now
	return rows, dropped
}

// idle reports whether nobody drained r for recordIdle by now.
func (r *recorder) idle(now clock.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.drained) > recordIdle
}

// Record starts recording the counters every interval on the nodes' loops, replacing
// a recorder already running, or stops it (every 0) and returns what it recorded
// since the last drain.
func (l *Lab) Record(every time.Duration) ([]Counters, uint64, error) {
	if every != 0 && (every < MinRecordEvery || every > MaxRecordEvery) {
		return nil, 0, fmt.Errorf("record every %v: want 0 (stop) or %v to %v", every, MinRecordEvery, MaxRecordEvery)
	}
	l.recMu.Lock()
	defer l.recMu.Unlock()
	var rows []Counters
	var dropped uint64
	if old := l.rec; old != nil {
		old.stopped.Store(true)
		rows, dropped = old.drain(l.clk.Now())
		l.rec = nil
	}
	if every == 0 {
		return rows, dropped, nil
	}
	r := &recorder{every: every, nodes: len(l.Network.Hosts) + len(l.Network.Switches), drained: l.clk.Now()}
	first := int64(l.clk.Now()/clock.Time(every)) + 1
	for _, h := range l.Network.Hosts {
		l.recordOn(r, h.Loop, h.Device.Do, first, false, func(c *Counters) {
			st := h.Device.Stats()
			c.Hosts[h.Name], c.Received[h.Name] = st.TxDataBytes, st.RxDataBytes
		})
	}
	for _, s := range l.Network.Switches {
		l.recordOn(r, s.Loop, l.inboxes[s.Name].Do, first, true, func(c *Counters) { c.Switches[s.Name] = portCounters(s) })
	}
	l.rec = r
	return nil, 0, nil
}

// Recorded returns the rows the running recorder has recorded since the last drain.
func (l *Lab) Recorded() ([]Counters, uint64, error) {
	l.recMu.Lock()
	r := l.rec
	l.recMu.Unlock()
	if r == nil || r.stopped.Load() {
		return nil, 0, fmt.Errorf("recorded: nothing is recording (op record with every_ns starts it)")
	}
	rows, dropped := r.drain(l.clk.Now())
	return rows, dropped, nil
}

// recordOn arms a timer on loop (through do, which runs on it) that reads a node's
// counters at sample first and every r.every after, until r stops or idles; timed
// reads time their rows.
func (l *Lab) recordOn(r *recorder, loop clock.Loop, do func(func()), first int64, timed bool, read func(*Counters)) {
	do(func() {
		k := first
		var t *clock.Timer
		t = loop.NewTimer(func() {
			now := loop.Now()
			if r.stopped.Load() {
				return
			}
			if r.idle(now) {
				r.stopped.Store(true)
				return
			}
			r.add(k, now, timed, read)
			k++
			t.Reset(clock.Time(k) * clock.Time(r.every))
		})
		t.Reset(clock.Time(first) * clock.Time(r.every))
	})
}
