package clock

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// mailbox is a one-sender, one-receiver hand-over between two nodes, as a link end is:
// the sender appends under a lock and posts the receiver's drain task from its own
// loop; the receiver keeps what is not due yet in time order and delivers each
// message at its time.
type mailbox struct {
	mu      sync.Mutex
	in      []gossip
	drain   *Task
	timer   *Timer
	pending []gossip
	to      *gossipNode
}

type gossip struct {
	due  Time
	hops int
	tag  uint64
}

// gossipNode is one node of the gossip network: each message it receives is logged
// and, while it has hops left, sent on to a node its random source picks, over a
// mailbox whose delay is the lookahead plus a random part (zero between nodes of one
// partition, whose messages may then tie).
type gossipNode struct {
	id    int
	loop  Loop
	out   []*mailbox // to every node, itself included
	part  []int      // every node's partition
	look  time.Duration
	log   []string
	late  int
	sends int
}

func (m *mailbox) send(from Loop, g gossip) {
	m.mu.Lock()
	m.in = append(m.in, g)
	m.mu.Unlock()
	m.drain.PostFrom(from)
}

func (m *mailbox) drainIn() {
	m.mu.Lock()
	in := m.in
	m.in = nil
	m.mu.Unlock()
	for _, g := range in {
		i := len(m.pending)
		for i > 0 && m.pending[i-1].due > g.due {
			i--
		}
		m.pending = slices.Insert(m.pending, i, g)
	}
	m.deliver()
}

func (m *mailbox) deliver() {
	now := m.to.loop.Now()
	for len(m.pending) > 0 && m.pending[0].due <= now {
		g := m.pending[0]
		m.pending = m.pending[1:]
		m.to.receive(g)
	}
	if len(m.pending) > 0 {
		m.timer.Reset(m.pending[0].due)
	}
}

func (n *gossipNode) receive(g gossip) {
	now := n.loop.Now()
	if now != g.due {
		n.late++
	}
	n.log = append(n.log, fmt.Sprintf("%d:%d:%d", now, g.tag, g.hops))
	if g.hops == 0 {
		return
	}
	rng := n.loop.Rand()
	to := rng.IntN(len(n.out))
	// Delays in steps of 100 ns: messages from several nodes often arrive together,
	// and their order is then the order the hand-overs ran in.
	delay := time.Duration(100 * rng.IntN(3))
	if n.part[to] != n.part[n.id] {
		delay += n.look
	}
	n.sends++
	n.out[to].send(n.loop, gossip{due: now.Add(delay), hops: g.hops - 1, tag: g.tag*31 + uint64(n.id)})
}

// gossipStarts messages start at each node and take gossipHops hops each.
const gossipStarts, gossipHops = 8, 40

// runGossip runs the gossip network of nodes in partitions on threads, with a
// coordinator timer every 5 µs that logs the total sent, and returns each node's log
// and the coordinator's.
func runGossip(t *testing.T, nodes, partitions, threads int) ([]string, int) {
	t.Helper()
	const look = 2 * time.Microsecond
	part := make([]int, nodes)
	for i := range part {
		part[i] = i % partitions
	}
	p, err := NewParallel(ParallelOptions{Seed: 7, Partitions: partitions, Lookahead: look, Threads: threads,
		PartitionOf: func(name string) int {
			var i int
			if _, err := fmt.Sscanf(name, "n%d", &i); err != nil {
				return -1
			}
			return part[i]
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ns := make([]*gossipNode, nodes)
	for i := range ns {
		ns[i] = &gossipNode{id: i, loop: p.NewLoop(fmt.Sprintf("n%d", i)), part: part, look: look}
	}
	for _, from := range ns {
		for _, to := range ns {
			m := &mailbox{to: to}
			m.drain = to.loop.NewTask(m.drainIn)
			m.timer = to.loop.NewTimer(m.deliver)
			from.out = append(from.out, m)
		}
	}
	// Each node starts messages of its own at times of its own.
	for _, n := range ns {
		start := n.loop.NewTimer(func() {
			for k := range gossipStarts {
				n.out[n.id].send(n.loop, gossip{due: n.loop.Now(), hops: gossipHops, tag: uint64(n.id*gossipStarts + k + 1)})
			}
		})
		start.Reset(Time(n.id * 100))
	}
	coord := p.NewLoop("coordinator")
	var coordLog []string
	var tick *Timer
	tick = coord.NewTimer(func() {
		sent := 0
		for _, n := range ns {
			sent += n.sends
		}
		coordLog = append(coordLog, fmt.Sprintf("%d:%d", coord.Now(), sent))
		if coord.Now() < Time(60*time.Microsecond) {
			tick.Reset(coord.Now().Add(5 * time.Microsecond))
		}
	})
	tick.Reset(0)
	rounds := 0
	for p.Round() {
		rounds++
	}
	var logs []string
	late := 0
	for _, n := range ns {
		logs = append(logs, strings.Join(n.log, " "))
		late += n.late
	}
	logs = append(logs, strings.Join(coordLog, " "))
	if late > 0 {
		t.Errorf("%d messages handled after their time: a window let a partition run ahead of its input", late)
	}
	return logs, rounds
}

// TestParallelSameRunOnAnyThreads: a gossip network across partitions gives the same
// events at the same times whatever the number of threads, delivers every message at
// its time (none handled late), and runs the coordinator between windows.
func TestParallelSameRunOnAnyThreads(t *testing.T) {
	ref, rounds := runGossip(t, 24, 4, 1)
	events := 0
	for _, l := range ref[:24] {
		events += strings.Count(l, ":") / 2
	}
	if want := 24 * gossipStarts * (gossipHops + 1); events != want {
		t.Fatalf("%d messages handled, want %d", events, want)
	}
	t.Logf("%d messages in %d rounds", events, rounds)
	for _, threads := range []int{2, 3, 8} {
		got, _ := runGossip(t, 24, 4, threads)
		for i := range ref {
			if got[i] != ref[i] {
				t.Fatalf("%d threads: node %d's log differs from one thread's:\n%.300s\n%.300s", threads, i, got[i], ref[i])
			}
		}
	}
}

// TestParallelCoordinatorSeesAWholeInstant: a coordinator timer at t runs after every
// event before t in every partition and before any at t.
func TestParallelCoordinatorSeesAWholeInstant(t *testing.T) {
	p, err := NewParallel(ParallelOptions{Partitions: 2, Lookahead: time.Microsecond, Threads: 2,
		PartitionOf: func(name string) int {
			if name == "c" {
				return -1
			}
			return int(name[1] - '0')
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ran [2][]Time
	for i := range 2 {
		l := p.NewLoop(fmt.Sprintf("p%d", i))
		for _, at := range []Time{999, 1000, 1001} {
			l.NewTimer(func() { ran[i] = append(ran[i], l.Now()) }).Reset(at)
		}
	}
	c := p.NewLoop("c")
	var seen [2]int
	c.NewTimer(func() {
		seen = [2]int{len(ran[0]), len(ran[1])}
		if c.Now() != 1000 {
			t.Errorf("coordinator ran at %v, want 1000", c.Now())
		}
	}).Reset(1000)
	for p.Round() {
	}
	if seen != [2]int{1, 1} {
		t.Errorf("the coordinator at 1000 saw %v events per partition, want the one at 999 each", seen)
	}
	if want := []Time{999, 1000, 1001}; !slices.Equal(ran[0], want) || !slices.Equal(ran[1], want) {
		t.Errorf("partitions ran %v and %v, want %v each", ran[0], ran[1], want)
	}
}

func TestParallelOptionsRefused(t *testing.T) {
	of := func(string) int { return 0 }
	for _, o := range []ParallelOptions{
		{Partitions: 0, PartitionOf: of, Lookahead: 1, Threads: 1},
		{Partitions: 1, Lookahead: 1, Threads: 1},
		{Partitions: 1, PartitionOf: of, Lookahead: 0, Threads: 1},
		{Partitions: 1, PartitionOf: of, Lookahead: 1, Threads: 0},
	} {
		if _, err := NewParallel(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
