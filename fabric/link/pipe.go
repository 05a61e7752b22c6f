package link

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// Config describes a link. Both directions share it.
type Config struct {
	// Rate is the line rate in bit/s.
	Rate uint64
	// Delay is the one-way propagation delay.
	Delay time.Duration
	// MTU is the largest IP packet carried; 0 means 1500.
	MTU int
	// Faults apply to each direction independently.
	Faults Faults
}

// New returns the two ends of an in-process link. Frames sent at one end arrive at the
// other Delay after their Time, with the configured faults applied by the sender's loop
// (using its random source, so runs under the Virtual clock are reproducible).
//
// Handoff is batched and lock-free: the sender appends frames to a single-producer,
// single-consumer ring and posts the receiver's drain task once per Send; the receiver
// moves them into its arrival-ordered queue and delivers each batch that is due. When
// the ring is full (the receiving loop has fallen behind), the sender keeps the frames
// in order and hands them over as the ring empties, instead of losing them.
func New(cfg Config) (a, b *End, err error) {
	if cfg.Rate == 0 {
		return nil, nil, fmt.Errorf("link: rate must be positive")
	}
	if cfg.Delay < 0 {
		return nil, nil, fmt.Errorf("link: negative delay %v", cfg.Delay)
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.MTU < 68 || cfg.MTU+18 > MaxFrame {
		return nil, nil, fmt.Errorf("link: MTU %d outside [68, %d]", cfg.MTU, MaxFrame-18)
	}
	if err := cfg.Faults.Validate(); err != nil {
		return nil, nil, fmt.Errorf("link: %w", err)
	}
	if cfg.Faults.ReorderDelay == 0 {
		cfg.Faults.ReorderDelay = 10 * time.Microsecond
	}
	a, b = &End{cfg: cfg, up: true}, &End{cfg: cfg, up: true}
	a.peer, b.peer = b, a
	return a, b, nil
}

// End is one end of an in-process link. It implements Endpoint.
type End struct {
	cfg  Config
	peer *End

	// Sender side, touched only by this end's loop.
	loop        clock.Loop
	up          bool
	lastArrival clock.Time
	stats       Stats
	// backlog holds, in order, the frames the far end's ring had no room for (its loop
	// has not drained: descheduled, or behind a burst handed over in one turn); flush
	// moves them on once the far end has drained, which it signals by posting flush
	// when blocked is set.
	backlog []*Frame
	flush   *clock.Task
	blocked atomic.Bool

	// Receiver side: ring (loops that run at once) or handed (two partitions of
	// the parallel driver) is the handoff from the peer's loop; the rest is touched
	// only by this end's loop, or by the peer's when the two loops are synchronous
	// (clock.Synchronous: one virtual clock, or one loop both ends' nodes share),
	// which then inserts arrivals directly and has neither.
	direct bool
	ring   *ring
	// barriered: the peer's loop and this end's are partitions of one parallel
	// driver (clock.Barriered), and the peer appends to handed, which this end
	// drains at the barrier between windows, when the peer's loop is stopped: the
	// barrier orders the two, and a window's frames need neither atomics nor a
	// bound (a frame held back would arrive a window late).
	barriered bool
	handed    []*Frame
	drain     *clock.Task
	rx        Receiver
	arrived   arrivals
	timer     *clock.Timer
	batch     []*Frame
	merge     *Merge // the ends whose late arrivals are handed over together with this one's
}

var _ Endpoint = (*End)(nil)

// Attach implements Endpoint.
func (e *End) Attach(loop clock.Loop, rx Receiver) {
	e.loop, e.rx = loop, rx
	e.drain = loop.NewTask(e.drainRing)
	e.timer = loop.NewTimer(e.deliver)
	e.flush = loop.NewTask(e.flushBacklog)
	if p := e.peer; p.loop != nil {
		e.direct = clock.Synchronous(loop, p.loop)
		p.direct = e.direct
		switch {
		case e.direct:
		case clock.Barriered(loop, p.loop) && clock.Barriered(p.loop, loop):
			e.barriered, p.barriered = true, true
		default:
			e.ring, p.ring = newRing(), newRing()
		}
	}
}

// Rate implements Endpoint.
func (e *End) Rate() uint64 { return e.cfg.Rate }

// MTU implements Endpoint.
func (e *End) MTU() int { return e.cfg.MTU }

// Delay returns the propagation delay.
func (e *End) Delay() time.Duration { return e.cfg.Delay }

// Stats implements Endpoint.
func (e *End) Stats() *Stats { return &e.stats }

// SetUp brings this direction of the link administratively up or down; frames sent
// while it is down are dropped and counted in Stats.Down. Call from the attached loop.
func (e *End) SetUp(up bool) { e.up = up }

// Send implements Endpoint.
func (e *End) Send(frames []*Frame) {
	far := e.peer
	f := &e.cfg.Faults
	faulty := f.any()
	for _, fr := range frames {
		e.stats.Frames++
		e.stats.Bytes += uint64(fr.Len())
		if fr.Len() > e.cfg.MTU+18 {
			e.stats.Oversize++
			fr.Release()
			continue
		}
		if !e.up || (faulty && f.Flap.down(fr.Time)) {
			e.stats.Down++
			fr.Release()
			continue
		}
		arrival := fr.Time.Add(e.cfg.Delay)
		if !faulty {
			e.push(far, fr, arrival)
			continue
		}
		rng := e.loop.Rand()
		if f.Loss > 0 && rng.Float64() < f.Loss {
			e.stats.Lost++
			fr.Release()
			continue
		}
		if f.Corrupt > 0 && rng.Float64() < f.Corrupt {
			e.stats.Corrupted++
			b := fr.Bytes()
			bit := rng.IntN(len(b) * 8)
			b[bit/8] ^= 0x80 >> (bit % 8)
			fr.Intact = false
		}
		if f.Jitter > 0 && (f.JitterProb == 0 || rng.Float64() < f.JitterProb) {
			e.stats.Jittered++
			arrival = arrival.Add(time.Duration(rng.Int64N(int64(f.Jitter))))
		}
		reordered := f.Reorder > 0 && rng.Float64() < f.Reorder
		if reordered {
			// Held back: it must not raise lastArrival, or the frames after it
			// could not overtake it.
			e.stats.Reordered++
			e.pushAt(far, fr, arrival.Add(f.ReorderDelay))
		} else {
			e.push(far, fr, arrival)
		}
		if f.Duplicate > 0 && rng.Float64() < f.Duplicate {
			e.stats.Duplicated++
			e.push(far, fr.Clone(), arrival)
		}
	}
	if e.direct {
		far.arm()
	} else {
		far.drain.PostFrom(e.loop)
	}
}

// push queues fr for the far end, no earlier than the frame sent before it.
func (e *End) push(far *End, fr *Frame, arrival clock.Time) {
	if arrival < e.lastArrival {
		arrival = e.lastArrival
	}
	e.lastArrival = arrival
	e.pushAt(far, fr, arrival)
}

func (e *End) pushAt(far *End, fr *Frame, arrival clock.Time) {
	fr.Time = arrival
	switch {
	case e.direct:
		far.arrived.insert(fr)
		return
	case far.barriered:
		far.handed = append(far.handed, fr)
		return
	}
	if len(e.backlog) == 0 && far.ring.push(fr) {
		return
	}
	if len(e.backlog) == maxBacklog {
		// The far loop has drained nothing for a full ring and a full backlog: it is
		// stuck. Dropping keeps the sender's memory bounded; Delivered falls short of
		// Frames by these.
		fr.Release()
		return
	}
	e.backlog = append(e.backlog, fr)
	e.flush.Post()
}

// maxBacklog bounds the frames a link end holds back for a far loop that does not
// drain (about 50 ms of 10 Gb/s in full-size frames).
const maxBacklog = 1 << 16

// flushBacklog runs on the sender's loop: it hands the backlog over as far as the
// far end's ring has room. blocked is set before the ring is tried, so a drain that
// empties the ring after a failed push finds it set and posts flush again.
func (e *End) flushBacklog() {
	far := e.peer
	e.blocked.Store(true)
	n := 0
	for n < len(e.backlog) && far.ring.push(e.backlog[n]) {
		n++
	}
	rest := copy(e.backlog, e.backlog[n:])
	clear(e.backlog[rest:])
	e.backlog = e.backlog[:rest]
	if rest == 0 {
		e.blocked.Store(false)
	}
	if n > 0 {
		far.drain.PostFrom(e.loop)
	}
}

// drainRing runs on this end's loop: it moves handed-over frames into arrival order.
func (e *End) drainRing() {
	if e.barriered {
		for _, fr := range e.handed {
			e.arrived.insert(fr)
		}
		Forget(e.handed)
		e.handed = e.handed[:0]
		e.deliver()
		return
	}
	for fr := e.ring.pop(); fr != nil; fr = e.ring.pop() {
		e.arrived.insert(fr)
	}
	if e.peer.blocked.Load() {
		e.peer.flush.PostFrom(e.loop) // room for the frames the sender holds back
	}
	e.deliver()
}

// deliver hands every frame that has arrived to the receiver, as one batch, and arms
// the timer for the next arrival. A late end in a Merge hands over the frames of every
// end in it instead, in arrival order.
func (e *End) deliver() {
	now := e.loop.Now()
	if m := e.merge; m != nil {
		if fr := e.arrived.head(); fr != nil && fr.Time < now {
			m.deliver(now)
			return
		}
	}
	e.batch = e.batch[:0]
	for fr := e.arrived.head(); fr != nil && fr.Time <= now; fr = e.arrived.head() {
		e.batch = append(e.batch, e.arrived.pop())
	}
	if len(e.batch) > 0 {
		e.peer.stats.Delivered += uint64(len(e.batch))
		e.rx.Receive(e.batch)
		Forget(e.batch)
	}
	e.arm()
}

// Merge is a set of ends attached to one loop, typically a switch's, whose frames a
// late loop hands over in arrival order across them, a frame at a time, rather than
// each end's arrivals as a batch.
//
// On the real-time clock an end's timer fires after its first frame arrived, and
// delivers every frame that has arrived by then. A switch that takes one link's
// batch and then another's runs its egress model to the first batch's last arrival
// before it sees the second link's earlier frames, which then queue behind a wire
// model that ran ahead of them: in a 10 Gb/s 8:1 incast on one loop, 29–36 % of the
// frames reached their port that way, 5–7 µs after the model had passed their
// arrival, a queue that time order does not have (docs/rnic.md). In virtual time an
// end's timer fires at its first arrival, which no other end's frames precede, and
// a Merge changes nothing.
type Merge struct {
	ends []*End
	one  [1]*Frame
}

// Add puts ep in the merge if it is an End attached to the loop of the ends already
// in it, and reports whether it did. Call it during setup, after Attach.
func (m *Merge) Add(ep Endpoint) bool {
	e, ok := ep.(*End)
	if !ok || e.loop == nil || e.merge != nil || (len(m.ends) > 0 && m.ends[0].loop != e.loop) {
		return false
	}
	e.merge = m
	m.ends = append(m.ends, e)
	return true
}

// deliver hands over every frame of the merge's ends that has arrived by now, the
// earliest first (on equal times, the end added first), and re-arms the ends.
func (m *Merge) deliver(now clock.Time) {
	for {
		var next *End
		var at clock.Time
		for _, e := range m.ends {
			if fr := e.arrived.head(); fr != nil && fr.Time <= now && (next == nil || fr.Time < at) {
				next, at = e, fr.Time
			}
		}
		if next == nil {
			break
		}
		m.one[0] = next.arrived.pop()
		next.peer.stats.Delivered++
		next.rx.Receive(m.one[:])
		m.one[0] = nil
	}
	for _, e := range m.ends {
		e.arm()
	}
}

// arm sets the timer for the next arrival, and has the processor fetch that frame's
// headers meanwhile: on a large simulation a frame is not touched between its send and
// its arrival thousands of events later, and the receiver's first read of its headers
// (roce.Locate) was a miss to memory at every hop, a sixth of the CPU.
func (e *End) arm() {
	if fr := e.arrived.head(); fr != nil {
		prefetch(&fr.buf[fr.off])
		if !e.timer.Pending() || e.timer.When() != fr.Time {
			e.timer.Reset(fr.Time)
		}
	} else {
		e.timer.Stop()
	}
}

// ring is a single-producer single-consumer queue of frames between two loops that
// run at once (Real). It has a fixed size: a loop can fall behind by milliseconds
// (4,096 frames are 3 ms of 10 Gb/s in 1 KB frames), and the sender's backlog holds
// what does not fit.
type ring struct {
	slots      []*Frame      // realTimeRing of them
	head, tail atomic.Uint64 // head: next to pop (consumer); tail: next to push (producer)
	// The rest of two cache lines (128 bytes, what the processor fetches together):
	// the rings of links that other threads fill and drain at the same time (a
	// real-time lab's loops) would otherwise share lines with this one. (The ring
	// held its slots inline, 32 KB, once.)
	_ [128 - 24 - 16]byte
}

const realTimeRing = 4096

func newRing() *ring { return &ring{slots: make([]*Frame, realTimeRing)} }

func (r *ring) push(f *Frame) bool {
	t, h := r.tail.Load(), r.head.Load()
	if t-h == uint64(len(r.slots)) {
		return false
	}
	r.slots[t&uint64(len(r.slots)-1)] = f
	r.tail.Store(t + 1)
	return true
}

func (r *ring) pop() *Frame {
	h := r.head.Load()
	if h == r.tail.Load() {
		return nil
	}
	i := h & uint64(len(r.slots)-1)
	f := r.slots[i]
	r.slots[i] = nil
	r.head.Store(h + 1)
	return f
}

// arrivals is a queue of frames ordered by arrival time, stable for equal times. Frames
// come almost always in order, so insertion from the back is O(1) in practice.
//
// Popped slots are reclaimed when the queue empties, or by moving the pending frames to
// the front once at least compactAfter slots, and half the slice, are popped: the
// slice then never grows beyond twice the most frames ever pending plus compactAfter,
// so a link that is never idle stops allocating once its deepest backlog has been seen
// (the copy is amortized over the pops that freed the slots).
type arrivals struct {
	q     []*Frame
	first int
}

// compactAfter is the fewest popped slots arrivals moves its pending frames over.
const compactAfter = 64

func (a *arrivals) insert(f *Frame) {
	if a.first > 0 && a.first == len(a.q) {
		a.q, a.first = a.q[:0], 0
	} else if a.first >= compactAfter && a.first*2 > len(a.q) {
		n := copy(a.q, a.q[a.first:])
		clear(a.q[n:])
		a.q, a.first = a.q[:n], 0
	}
	a.q = append(a.q, f)
	for i := len(a.q) - 1; i > a.first && a.q[i-1].Time > f.Time; i-- {
		a.q[i], a.q[i-1] = a.q[i-1], a.q[i]
	}
}

func (a *arrivals) head() *Frame {
	if a.first == len(a.q) {
		return nil
	}
	return a.q[a.first]
}

func (a *arrivals) pop() *Frame {
	f := a.q[a.first]
	a.q[a.first] = nil
	a.first++
	return f
}
