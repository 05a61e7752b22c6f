package fabric

import (
	"fmt"
	"math"
	"math/bits"
	"runtime/debug"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
)

// Port is one port of a switch: the receiver of its link's frames and the egress model
// that transmits onto it. Its egress is a model advanced to the time of each event:
// every departure time, queue length and byte count is computed from the line rate,
// so they are exact whatever the timers' precision.
type Port struct {
	sw    *Switch
	ep    link.Endpoint
	index uint16
	mac   MAC
	rate  uint64
	timer *clock.Timer

	queues    [8]fifo
	backlog   uint8 // bit q set: queues[q] holds frames
	qbytes    [8]int
	bytes     int        // queued on the port, all priorities
	busyUntil clock.Time // when the frame on the wire finishes
	modelTime clock.Time // the egress model has been advanced to here
	txBytes   uint64     // transmitted since the start
	paused    [8]clock.Time
	// queueArea is ∫ bytes dt in byte·ns up to queueAt (QueueArea).
	queueArea uint64
	queueAt   clock.Time

	// PFC state towards the upstream behind this port.
	xoffSent [8]bool
	xoffAt   [8]clock.Time

	out   []*link.Frame
	dirty bool
	stats PortStats
}

// QueueStats counts one priority queue of a port.
type QueueStats struct {
	QLen     int    `json:"qlen_bytes"` // bytes queued now
	TxFrames uint64 `json:"tx_frames"`
	TxBytes  uint64 `json:"tx_bytes"`
	Drops    uint64 `json:"drops"`
	ECNMarks uint64 `json:"ecn_marks"`
	Pauses   uint64 `json:"pauses"`    // PFC frames from the peer that paused this priority
	PausedNs uint64 `json:"paused_ns"` // total pause time they requested
}

// PortStats counts one switch port.
type PortStats struct {
	RxFrames      uint64        `json:"rx_frames"`
	RxBytes       uint64        `json:"rx_bytes"`
	RxErrors      uint64        `json:"rx_errors"` // malformed frames and MAC control other than PFC, dropped
	Filtered      uint64        `json:"filtered"`  // frames whose destination is behind their ingress port
	TxFrames      uint64        `json:"tx_frames"`
	TxBytes       uint64        `json:"tx_bytes"`
	Drops         uint64        `json:"drops"`          // tail drops and PFC headroom overflows, all priorities
	HeadroomDrops uint64        `json:"headroom_drops"` // of which lossless frames beyond XOff+Headroom
	ECNMarks      uint64        `json:"ecn_marks"`
	Stamped       uint64        `json:"stamped"`      // frames that carried telemetry and got this hop
	StampErrors   uint64        `json:"stamp_errors"` // frames forwarded without this hop: the Stamper could not record it
	Panics        uint64        `json:"panics"`       // frames dropped because handling or stamping them panicked (a bug)
	PauseSent     uint64        `json:"pause_sent"`   // PFC frames sent upstream (XOFF and XON)
	PauseRcvd     uint64        `json:"pause_rcvd"`   // PFC frames received from the peer
	QLen          int           `json:"qlen_bytes"`   // bytes queued now
	Queues        [8]QueueStats `json:"queues"`       // per priority
}

// Index returns the port number.
func (p *Port) Index() uint16 { return p.index }

// Stats returns a snapshot of the port's counters.
func (p *Port) Stats() PortStats {
	s := p.stats
	s.QLen = p.bytes
	for i := range s.Queues {
		s.Queues[i].QLen = p.qbytes[i]
	}
	return s
}

// TxBytes returns the bytes transmitted so far (the counter telemetry reports).
func (p *Port) TxBytes() uint64 { return p.txBytes }

// QueueArea returns ∫ queue dt since the port started, in byte·ns, up to now: a
// sampler that reads it at two instants has the time-averaged queue between them,
// which sparse point samples only estimate (a lab's 1 ms samples of a 1 Gb/s port
// whose queue changes every 8 µs, DCQCN's cuts every 50 µs). It wraps after 2^64
// (differences stay right).
func (p *Port) QueueArea(now clock.Time) uint64 {
	if now <= p.queueAt {
		return p.queueArea
	}
	return p.queueArea + uint64(p.bytes)*uint64(now-p.queueAt)
}

// integrate brings queueArea up to t, before the queue changes at t. A real-time port
// that takes its empty model back to a late frame's arrival (enqueue) integrates
// nothing over the span it went back: the queue was empty.
func (p *Port) integrate(t clock.Time) {
	if t > p.queueAt {
		p.queueArea, p.queueAt = p.QueueArea(t), t
	}
}

// Receive implements link.Receiver.
func (p *Port) Receive(frames []*link.Frame) {
	link.Contain(frames, p)
	p.sw.flush()
}

// HandleFrame implements link.FrameHandler: steps 2–5 of the pipeline for one frame.
func (p *Port) HandleFrame(f *link.Frame) { p.sw.receive(p, f) }

// HandlePanic implements link.FrameHandler: the frame is dropped and counted.
func (p *Port) HandlePanic(_ *link.Frame, v any, stack []byte) {
	p.stats.Panics++
	p.sw.panicked(v, stack)
}

// wake runs when the egress timer fires: the next frame is due.
// wake is the port's timer: the wire is free for the next frame. The model advances to
// the time the timer was due, not to the loop's now: on the real-time clock a loop
// that wakes late has arrivals due between the two still to handle (their links'
// timers come next, in time order), and a model advanced to now would send without
// them and count them as queued later than they came. Each late wake-up then sends
// what was due by its own time and re-arms, so the port's model follows arrival
// order as in virtual time, where the two times are the same. (Advanced to now, a
// 1 Gb/s lab incast's probes were stamped with queues the time average did not have;
// HPCC, which reads U from them, held the link at 0.59–0.81 against 0.82–0.86 with
// this, same minutes, machine shared with another session.)
func (p *Port) wake() {
	p.advance(p.timer.When())
	p.arm()
	p.sw.flush()
}

func (p *Port) enqueue(f *link.Frame) {
	if f.Time < p.modelTime && p.bytes == 0 {
		// Real time only: the loop saw the frame after the model had moved past its
		// arrival (the loop woke late, or handled another port's frames first). An
		// empty port would have sent it on arrival, or once the wire was free: take
		// the model back to its arrival, so that the loop's lateness does not become
		// idle wire time. Nothing is queued, so no departure already made is undone;
		// a wire still busy at the arrival keeps the frame queued until busyUntil, as
		// in time order. (Taken to busyUntil and sent at once, the frame put the
		// model ahead of every later arrival, each of which then did the same: the
		// port's queue stayed hidden on its wire, at zero in samples, telemetry and
		// ECN marking. TestLateArrivalsStillQueue.)
		p.modelTime = f.Time
	}
	t := max(f.Time, p.modelTime)
	p.advance(t)
	if !p.admit(f, t) {
		p.arm() // the advance may have emptied the port: its timer goes with its frames
		return
	}
	prio := f.Priority
	n := f.Len()
	p.markActive()
	p.queues[prio].push(f)
	p.backlog |= 1 << prio
	p.qbytes[prio] += n
	p.integrate(t)
	p.bytes += n
	p.advance(t)
	p.arm()
}

// admit accounts for f in the buffer, or drops it.
func (p *Port) admit(f *link.Frame, t clock.Time) bool {
	s := p.sw
	n, prio := f.Len(), f.Priority
	if pfc := &s.cfg.PFC; pfc.Lossless>>prio&1 != 0 {
		held := &s.ingBuf[f.InPort][prio]
		if *held+n > pfc.XOff+pfc.Headroom {
			p.stats.HeadroomDrops++
			p.drop(f)
			return false
		}
		*held += n
		s.used += n
		if *held >= pfc.XOff {
			s.ports[f.InPort].sendPause(prio, t, true)
		}
		return true
	}
	if b := s.cfg.Buffer; b > 0 && ((s.cfg.SharedBuffer && s.used+n > b) || (!s.cfg.SharedBuffer && p.bytes+n > b)) {
		p.drop(f)
		return false
	}
	s.used += n
	return true
}

func (p *Port) drop(f *link.Frame) {
	p.stats.Drops++
	p.stats.Queues[f.Priority].Drops++
	f.Release()
}

// advance runs the egress model up to t: every frame whose transmission starts at or
// before t departs, at the exact time the line rate and pauses allow.
func (p *Port) advance(t clock.Time) {
	for p.bytes > 0 { // an empty port has nothing to start: most ports, most of the time
		free := max(p.busyUntil, p.modelTime)
		if free > t {
			break
		}
		prio, start, ok := p.next(free)
		if !ok || start > t {
			break
		}
		p.modelTime = start
		p.dequeue(prio, start)
	}
	p.modelTime = max(p.modelTime, t)
}

// next picks the queue to serve when the wire is free at free: the highest priority
// that has frames and is not paused, or else the paused one that resumes first.
func (p *Port) next(free clock.Time) (prio uint8, start clock.Time, ok bool) {
	start = clock.Never
	for m := p.backlog; m != 0; {
		q := uint8(bits.Len8(m) - 1) // the highest priority left
		m &^= 1 << q
		resume := p.paused[q]
		if resume <= free {
			return q, free, true
		}
		if resume < start {
			prio, start, ok = q, resume, true
		}
	}
	return prio, start, ok
}

// dequeue transmits the head of queue prio starting at start: ECN marking, stamping,
// serialization.
func (p *Port) dequeue(prio uint8, start clock.Time) {
	s := p.sw
	f := p.queues[prio].pop()
	if p.queues[prio].empty() {
		p.backlog &^= 1 << prio
	}
	n := f.Len()
	p.qbytes[prio] -= n
	p.integrate(start)
	p.bytes -= n
	s.used -= n
	if pfc := &s.cfg.PFC; pfc.Lossless>>prio&1 != 0 {
		held := &s.ingBuf[f.InPort][prio]
		*held -= n
		if in := s.ports[f.InPort]; in.xoffSent[prio] && *held <= pfc.XOn {
			in.sendPause(prio, start, false)
		}
	}
	q := &p.stats.Queues[prio]
	if s.cfg.ECN.Enabled && p.redMarks(p.qbytes[prio]) {
		if s.markHdr.Parse(f.Bytes()) == nil && setCE(f.Bytes(), &s.markHdr) {
			p.stats.ECNMarks++
			q.ECNMarks++
		}
	}
	if s.cfg.Stamper != nil && !f.Unsignalled {
		stamped, err := p.stamp(f, hpcc.Hop{
			TS:       uint64(start),
			QLen:     uint64(p.bytes),
			TxBytes:  p.txBytes,
			Rate:     p.rate,
			SwitchID: s.cfg.ID,
			PortID:   uint32(p.index),
		})
		// A frame whose hop cannot be recorded (malformed telemetry, plain RoCE that
		// happens to carry the signalling DSCP, a value the format cannot carry) goes
		// on without it, its format's error flag set where it has one: a frame is
		// never dropped for want of a stamp, and any host can send one.
		if err != nil {
			p.stats.StampErrors++
		} else if stamped {
			p.stats.Stamped++
		}
		n = f.Len()
	}
	p.transmit(f, start)
	q.TxFrames++
	q.TxBytes += uint64(n)
}

// stamp runs the Stamper on f, containing a panic as an error: the Stamper parses what
// a host sent, and a bug in one codec must cost that frame, not the lab.
func (p *Port) stamp(f *link.Frame, hop hpcc.Hop) (stamped bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.stats.Panics++
			p.sw.panicked(v, debug.Stack())
			stamped, err = false, fmt.Errorf("fabric: stamper panicked: %v", v)
		}
	}()
	return p.sw.cfg.Stamper.Stamp(f, hop)
}

// sampleAt advances the egress model to a sampling instant and returns the port's
// sample then, not at its last event. An empty port has nothing to send and no timer
// armed (every operation that empties it re-arms it), so only its model time moves:
// the sampler looks at a quiet port's counters and nothing else.
func (p *Port) sampleAt(now clock.Time) Sample {
	if p.bytes == 0 {
		p.modelTime = max(p.modelTime, now)
	} else {
		p.advance(now)
		p.arm()
	}
	return Sample{Time: now, Switch: p.sw.cfg.ID, Port: p.index, QLen: p.bytes, TxBytes: p.txBytes}
}

// markActive tells SampleChanges that the port's sample may have changed.
func (p *Port) markActive() { p.sw.active[p.index/64] |= 1 << (p.index % 64) }

// transmit puts f on the wire at start.
func (p *Port) transmit(f *link.Frame, start clock.Time) {
	n := f.Len()
	p.txBytes += uint64(n)
	p.markActive()
	p.busyUntil = start.Add(link.Serialization(n, p.rate))
	f.Time = p.busyUntil
	p.stats.TxFrames++
	p.stats.TxBytes += uint64(n)
	p.out = append(p.out, f)
	if !p.dirty {
		p.dirty = true
		p.sw.dirty = append(p.sw.dirty, p)
	}
}

// redMarks draws the RED marking decision for a queue of qlen bytes.
func (p *Port) redMarks(qlen int) bool {
	e := &p.sw.cfg.ECN
	switch {
	case qlen < e.KMin:
		return false
	case qlen >= e.KMax:
		return true
	}
	return p.sw.loop.Rand().Float64() < e.PMax*float64(qlen-e.KMin)/float64(e.KMax-e.KMin)
}

// sendPause sends a PFC frame for prio to the peer behind this port: XOFF (pause) or
// XON. An XOFF is re-sent once half its pause time has passed while the priority is
// still above XOn, so the upstream never resumes into a full buffer.
func (p *Port) sendPause(prio uint8, t clock.Time, pause bool) {
	pfc := &p.sw.cfg.PFC
	if pause && p.xoffSent[prio] && (pfc.DisableRefreshing || t.Sub(p.xoffAt[prio]) < pauseDuration(pfc.PauseQuanta, p.rate)/2) {
		return
	}
	if !pause && !p.xoffSent[prio] {
		return
	}
	p.xoffSent[prio], p.xoffAt[prio] = pause, t
	var quanta [8]uint16
	if pause {
		quanta[prio] = pfc.PauseQuanta
	}
	p.advance(t)
	f := p.sw.cfg.Pool.Get()
	b, _ := f.SetLen(60)
	putPFC(b, p.mac, 1<<prio, &quanta)
	p.stats.PauseSent++
	// A PFC frame goes out between data frames, ahead of anything queued.
	p.transmit(f, max(p.busyUntil, t))
	p.arm()
}

// pause applies a PFC frame the peer sent at t.
func (p *Port) pause(t clock.Time, enable uint8, quanta *[8]uint16) {
	p.advance(t)
	for prio := range 8 {
		if enable>>prio&1 == 0 {
			continue
		}
		p.paused[prio] = t.Add(pauseDuration(quanta[prio], p.rate))
		if quanta[prio] != 0 {
			p.stats.Queues[prio].Pauses++
			p.stats.Queues[prio].PausedNs += uint64(pauseDuration(quanta[prio], p.rate))
		}
	}
	p.advance(t)
	p.arm()
}

// pauseDuration converts PFC quanta (512 bit times each) to time at rate.
func pauseDuration(quanta uint16, rate uint64) time.Duration {
	return time.Duration(math.Ceil(float64(quanta) * 512 * 1e9 / float64(rate)))
}

// arm sets the egress timer to the next departure, if any frame is queued.
func (p *Port) arm() {
	if p.bytes == 0 {
		p.timer.Stop()
		return
	}
	_, start, ok := p.next(max(p.busyUntil, p.modelTime))
	if !ok {
		p.timer.Stop()
		return
	}
	if !p.timer.Pending() || p.timer.When() != start {
		p.timer.Reset(start)
	}
}

func (p *Port) flush() {
	p.ep.Send(p.out)
	link.Forget(p.out)
	p.out = p.out[:0]
	p.dirty = false
}

// fifo is a growable ring of frames.
type fifo struct {
	buf        []*link.Frame
	head, size int
}

func (q *fifo) empty() bool { return q.size == 0 }

// push appends f. The ring's length is a power of two (64, then doubled), so that
// an index wraps with a mask rather than a division.
func (q *fifo) push(f *link.Frame) {
	if q.size == len(q.buf) {
		grown := make([]*link.Frame, max(64, 2*len(q.buf)))
		for i := range q.size {
			grown[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = grown, 0
	}
	q.buf[(q.head+q.size)&(len(q.buf)-1)] = f
	q.size++
}

func (q *fifo) pop() *link.Frame {
	f := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.size--
	return f
}
