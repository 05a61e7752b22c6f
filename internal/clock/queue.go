package clock

// queue is a binary min-heap of timers ordered by (deadline, insertion sequence). It is
// not safe for concurrent use: Virtual has one for all loops, Real one per loop.
type queue struct {
	heap []*Timer
	seq  uint64
}

func (q *queue) schedule(t *Timer, at Time) {
	t.when = at
	q.seq++
	t.seq = q.seq
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
		q.swap(i, last)
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

// pop removes and returns the earliest timer.
func (q *queue) pop() *Timer {
	t := q.heap[0]
	q.remove(t)
	return t
}

func (q *queue) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (q *queue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.heap[i].index = i
	q.heap[j].index = j
}

func (q *queue) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q *queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *queue) down(i int) bool {
	start := i
	n := len(q.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.swap(i, m)
		i = m
	}
	return i > start
}
