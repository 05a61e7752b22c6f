package tunnel

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// Tunnel is this part's end of a link whose other end runs in another part. It
// implements link.Endpoint: the node attached to it sees a link like any other.
//
// Sending (on the node's loop):
//
//  1. Send hands the frames to an in-process link end (tx) with the link's rate, MTU,
//     faults and queue but no delay: the same code as an in-process link's, so the
//     faults and their counters are the declared ones.
//  2. At each frame's departure time (its Time, and any jitter or reordering the
//     faults added) the far end of tx hands it to the wire: a VXLAN datagram whose
//     trailer says when the frame arrives in the link's model (departure plus the
//     declared delay), on the sender's wall clock.
//
// Receiving (the part's reader, then the node's loop):
//
//  3. The part's reader checks the datagram's VNI and source and passes it here; the
//     frame's arrival time is converted to this part's clock (Part.toLocal) and the
//     frame is released at that moment through a second in-process end (rx) — or at
//     once if the underlay delivered it later than the model's arrival, which Stats
//     counts (Late, LateNs): the underlay's own delay then shows in the link's.
//
// Taking the tunnel down (the other part is gone) is a cable pull: frames sent are
// dropped and counted in link.Stats.Down.
type Tunnel struct {
	VNI   uint32
	Peer  string // the other part's machine
	delay time.Duration
	part  *Part

	tx, txWire *link.End // the node's sending end; its far end, which hands frames to the wire
	rxIn, rx   *link.End // frames from the wire enter at rxIn; rx is the node's receiving end
	loop       clock.Loop
	inbox      *clock.Inbox

	// On the node's loop.
	seq uint32

	mu      sync.Mutex // the reader's handoff
	pending []*link.Frame

	stats Stats
}

// Stats counts a tunnel's underlay side; link.Stats (Endpoint.Stats) counts the model's.
type Stats struct {
	Sent       atomic.Uint64 // datagrams written to the underlay
	SendErrors atomic.Uint64 // datagrams the underlay refused (no route, buffer full)
	Received   atomic.Uint64 // datagrams accepted from the peer
	// UnderlayLost counts the sequence numbers that never arrived; UnderlayReordered
	// those that arrived after a later one.
	UnderlayLost      atomic.Uint64
	UnderlayReordered atomic.Uint64
	// Late counts the frames the underlay delivered after their arrival in the link's
	// model; LateNs sums by how much (the underlay's delay beyond the declared one).
	Late   atomic.Uint64
	LateNs atomic.Uint64
	// expect is the next sequence number expected (reader goroutine only).
	expect uint32
	seen   bool
}

var _ link.Endpoint = (*Tunnel)(nil)

// newTunnel returns the end of link cfg (VNI vni) towards peer.
func newTunnel(p *Part, vni uint32, peer string, cfg link.Config) (*Tunnel, error) {
	wire := cfg
	wire.Delay = 0
	tx, txWire, err := link.New(wire)
	if err != nil {
		return nil, err
	}
	rxIn, rx, err := link.New(link.Config{Rate: cfg.Rate, MTU: cfg.MTU})
	if err != nil {
		return nil, err
	}
	tx.SetUp(false) // until the peer is authenticated: a cable not yet plugged in
	return &Tunnel{VNI: vni, Peer: peer, delay: cfg.Delay, part: p, tx: tx, txWire: txWire, rxIn: rxIn, rx: rx}, nil
}

// Attach implements link.Endpoint.
func (t *Tunnel) Attach(loop clock.Loop, rx link.Receiver) {
	t.loop = loop
	t.inbox = clock.NewInbox(loop)
	t.tx.Attach(loop, discard{})
	t.txWire.Attach(loop, wireWriter{t})
	t.rxIn.Attach(loop, discard{})
	t.rx.Attach(loop, rx)
}

// Send implements link.Endpoint.
func (t *Tunnel) Send(frames []*link.Frame) { t.tx.Send(frames) }

// Rate implements link.Endpoint.
func (t *Tunnel) Rate() uint64 { return t.tx.Rate() }

// MTU implements link.Endpoint.
func (t *Tunnel) MTU() int { return t.tx.MTU() }

// Stats implements link.Endpoint: the model's counters of what this end sent.
func (t *Tunnel) Stats() *link.Stats { return t.tx.Stats() }

// Underlay returns the tunnel's underlay counters.
func (t *Tunnel) Underlay() *Stats { return &t.stats }

// Delay is the link's declared one-way delay.
func (t *Tunnel) Delay() time.Duration { return t.delay }

// setUp plugs the cable in or pulls it, from any goroutine.
func (t *Tunnel) setUp(up bool) {
	if t.inbox != nil {
		t.inbox.Do(func() { t.tx.SetUp(up) })
	}
}

type discard struct{}

func (discard) Receive(frames []*link.Frame) {
	for _, f := range frames {
		f.Release()
	}
}

// wireWriter puts the frames tx delivers, at their departure, on the underlay.
type wireWriter struct{ t *Tunnel }

func (w wireWriter) Receive(frames []*link.Frame) {
	t := w.t
	to, ok := t.part.peerAddr(t.Peer)
	for _, f := range frames {
		t.seq++
		if !ok {
			t.stats.SendErrors.Add(1)
			f.Release()
			continue
		}
		arrival := t.part.toWall(f.Time.Add(t.delay))
		b := Append(t.part.out.buffer(), t.VNI, t.seq, arrival, f.Bytes())
		f.Release()
		t.part.out.enqueue(b, to, &t.stats)
	}
}

// received takes a datagram the part's reader accepted for this tunnel (the reader's
// goroutine): the frame is copied into a pooled frame and handed to the node's loop.
func (t *Tunnel) received(d Datagram, pool *link.Pool) {
	st := &t.stats
	st.Received.Add(1)
	switch gap := d.Seq - st.expect; {
	case !st.seen || gap == 0:
	case gap < 1<<31:
		st.UnderlayLost.Add(uint64(gap))
	default: // behind: it arrived after a later one, which counted it lost
		st.UnderlayReordered.Add(1)
		st.UnderlayLost.Add(^uint64(0))
		return
	}
	st.seen, st.expect = true, d.Seq+1
	f := pool.Get()
	if f.SetBytes(d.Frame) != nil {
		f.Release()
		return
	}
	f.Time = t.part.toLocal(t.Peer, d.Arrival)
	t.mu.Lock()
	first := len(t.pending) == 0
	t.pending = append(t.pending, f)
	t.mu.Unlock()
	if first {
		t.inbox.Do(t.deliver)
	}
}

// deliver runs on the node's loop: frames enter rx at their model arrival, or now if
// the underlay brought them later than that.
func (t *Tunnel) deliver() {
	t.mu.Lock()
	batch := t.pending
	t.pending = nil
	t.mu.Unlock()
	now := t.loop.Now()
	for _, f := range batch {
		if f.Time < now {
			t.stats.Late.Add(1)
			t.stats.LateNs.Add(uint64(now - f.Time))
			f.Time = now
		}
	}
	t.rxIn.Send(batch)
}
