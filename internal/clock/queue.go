package clock

// queue is a binary min-heap of timers ordered by (deadline, insertion sequence). It is
// not safe for concurrent use: Virtual has one for all loops, Real one per loop.
type queue struct {
	heap []*Timer
	seq  uint64
	// firing is the timer whose callback fire is running: it stays at the root,
	// unscheduled (index -1), until the callback returns or re-arms it.
	firing *Timer
}

func (q *queue) schedule(t *Timer, at Time) {
	t.when = at
	q.seq++
	t.seq = q.seq
	if t == q.firing {
		// Re-armed by its own callback, as most timers are: one move down from the
		// root instead of a removal and an insertion.
		q.firing = nil
		t.index = 0
		q.down(0)
		return
	}
	if t.index >= 0 {
		q.fix(t.index)
		return
	}
	t.index = len(q.heap)
	q.heap = append(q.heap, t)
	q.up(t.index)
}

func (q *queue) remove(t *Timer) {
	i := t.index
	last := len(q.heap) - 1
	if i != last {
		q.heap[i] = q.heap[last] // fix sets its index
	}
	q.heap[last] = nil
	q.heap = q.heap[:last]
	t.index = -1
	if i != last {
		q.fix(i)
	}
}

// peek returns the earliest timer or nil.
func (q *queue) peek() *Timer {
	if len(q.heap) == 0 {
		return nil
	}
	return q.heap[0]
}

// fire runs the callback of t, the earliest timer, and unschedules it unless the
// callback re-arms it. While the callback runs t is not pending (Stop returns false)
// but holds the root, which no other timer takes from it (up stops below it), so the
// order of the others is as if it had been removed first.
func (q *queue) fire(t *Timer) {
	t.index = -1
	q.firing = t
	t.fn()
	if q.firing == t {
		q.firing = nil
		t.index = 0
		q.remove(t)
	}
}

// before reports whether a fires before b: the earlier deadline, or the same one
// scheduled first.
func before(a, b *Timer) bool {
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (q *queue) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

// up and down move the timer at i through a hole: each timer it passes moves once,
// and the timer itself is written once, where it stops.
func (q *queue) up(i int) {
	h := q.heap
	t := h[i]
	top := 0
	if q.firing != nil {
		top = 2 // the root's children: the firing timer keeps the root
	}
	for i > top {
		p := (i - 1) / 2
		if !before(t, h[p]) {
			break
		}
		h[i] = h[p]
		h[i].index = i
		i = p
	}
	h[i] = t
	t.index = i
}

func (q *queue) down(i int) bool {
	h := q.heap
	start, t, n := i, h[i], len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && before(h[r], h[l]) {
			m = r
		}
		if !before(h[m], t) {
			break
		}
		h[i] = h[m]
		h[i].index = i
		i = m
	}
	h[i] = t
	t.index = i
	return i > start
}
