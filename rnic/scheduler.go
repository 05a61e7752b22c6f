package rnic

import (
	"fmt"
	"math"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// The scheduler decides what the port sends next, each time the wire becomes free:
//
//  1. control frames the device made itself (ARP/NDP answers, CNPs, telemetry
//     responses), in order;
//  2. QP responses (ACKs, NAKs, READ responses, atomic ACKs): they release the peer's
//     window, so they never wait behind data;
//  3. a telemetry-request probe of a ModeHPCCProbe flow that is due;
//  4. one request packet of a QP that has one and that congestion control admits —
//     its bytes in flight are below its window and its pacer (one packet per
//     size/rate) allows it now — chosen by the device's arbitration among such QPs.
//
// It is work-conserving: a QP held back by its pacer or window does not hold the
// others, and when nobody may send the scheduler sleeps until the earliest pacing
// deadline (a window opens only with an ACK, which kicks it).
//
// Arbitration (Config.Arbitration) shares the port among the QPs congestion control
// admits; congestion control shapes each share from below:
//
//   - ArbitrationRR (the default): packet-by-packet round robin; every QP with data
//     gets an equal share of packets.
//   - ArbitrationDWRR: deficit weighted round robin (Shreedhar & Varghese, "Efficient
//     fair queueing using deficit round robin", 1995). The QPs form a ring; a QP's
//     turn adds its quantum, QPInitAttr.Weight × FrameSize(port MTU) bytes, to its
//     deficit counter, and it sends frames while the counter is positive, each frame's
//     wire length (telemetry included) taken off it. A frame's length is known only
//     once it is built, so the counter may end a turn below zero by less than one
//     frame, and that debt carries into the next turn (the fq_codel form of DRR); over
//     many turns each backlogged QP gets bytes in proportion to its weight. A QP with
//     nothing to send loses its turn and its counter is reset to zero, as DRR resets
//     the deficit of an empty queue. A QP held back by its pacer or window loses the
//     rest of its turn but keeps its counter (it is still backlogged) and is not
//     granted a quantum until it can send, so it neither blocks the others nor saves
//     up a burst.
type scheduler struct {
	d       *Device
	timer   *clock.Timer
	ctrl    []*link.Frame
	rr      int  // round robin: where the next search starts; DWRR: the QP whose turn it is
	granted bool // DWRR: the QP at rr has had its quantum for this turn
	dwrr    bool
	unit    int // DWRR: the quantum of weight 1, in bytes
	pumping bool
	again   bool       // kicked while completion handlers ran: run again when they are done
	now     clock.Time // the loop's time when the current pass (fill) began
	// edge is the earliest start, in the current pass, of a request that admitted held
	// back for its window ahead of the loop's time; held is the edge the timer was
	// last armed for (clock.Never: none).
	edge, held clock.Time
}

// Arbitration is how the scheduler shares the port among the QPs that may send.
type Arbitration uint8

// The arbitrations.
const (
	// ArbitrationRR is packet-by-packet round robin (the zero value).
	ArbitrationRR Arbitration = iota
	// ArbitrationDWRR is deficit weighted round robin by QPInitAttr.Weight.
	ArbitrationDWRR
)

// String returns the arbitration's name as flags and topology files spell it.
func (a Arbitration) String() string {
	switch a {
	case ArbitrationRR:
		return "rr"
	case ArbitrationDWRR:
		return "dwrr"
	}
	return fmt.Sprintf("Arbitration(%d)", uint8(a))
}

// MaxWeight bounds QPInitAttr.Weight.
const MaxWeight = 1 << 16

func (s *scheduler) init(d *Device) {
	s.d = d
	s.timer = d.loop.NewTimer(s.pump)
	s.dwrr = d.cfg.Arbitration == ArbitrationDWRR
	s.unit = d.maxFrameSize()
	s.held = clock.Never
}

// maxFrameSize is the largest frame a QP builds at the port's MTU, telemetry aside:
// DWRR's quantum of weight 1.
func (d *Device) maxFrameSize() int {
	return qp.FrameSize(roce.MTUForLinkMTU(d.cfg.Link.MTU()))
}

// control queues a frame the device built itself.
func (s *scheduler) control(f *link.Frame) {
	s.ctrl = append(s.ctrl, f)
	s.kick()
}

// kick runs the scheduler now unless it is already running (it is re-entered from
// the Rx pipeline and verbs calls it invokes). While completion handlers run (the
// device announcing CQ events), it only notes the kick, and the scheduler runs once
// when they are done (pump's loop, settle): a handler that re-posts many WRs then
// hands their frames to the link in one batch instead of one batch per WR. The
// timer, armed for now, is the safety net should nobody settle.
func (s *scheduler) kick() {
	switch {
	case s.pumping:
	case s.d.notifying:
		if !s.again {
			s.again = true
			s.timer.Reset(s.d.loop.Now())
		}
	default:
		s.pump()
	}
}

// settle announces the CQ events the current event produced, then runs the
// scheduler if a completion handler kicked it. Called from a handler (a post), it
// leaves that to whoever is announcing.
func (s *scheduler) settle() {
	s.d.notify()
	if s.again && !s.d.notifying && !s.pumping {
		s.pump()
	}
}

// pump sends frames while the wire is free (or frees up within the lookahead), arms
// the timer for the next opportunity and announces the CQ events; it runs again if
// their handlers posted work.
func (s *scheduler) pump() {
	for {
		s.again = false
		s.pumping = true
		s.fill()
		s.pumping = false
		s.d.notify() // after pumping: a handler's posts must be able to kick the scheduler
		if !s.again {
			return
		}
	}
}

// fill is one pass of pump.
func (s *scheduler) fill() {
	d := s.d
	p := &d.port
	now := d.loop.Now()
	s.now = now
	horizon := now.Add(d.cfg.TxLookahead)
	wake := clock.Never
	// at is the earliest start the pass considers: now (or, for what a received batch
	// made sendable, the batch's arrival: see Device.receiving), then a paced QP's
	// deadline.
	// A deadline within the lookahead is served in this pass at that very time, and
	// the timer is armed a lookahead before a later one: a loop that wakes late (real
	// time) then still sends at the pacing rate, instead of restarting the pacer from
	// its late wake-up and losing that lateness on every paced frame.
	at := now
	if d.receiving {
		at = d.rxNow
	}
	// A request held at its window's edge goes at its own start once the loop's time
	// has reached it, even if the timer serving it fired late (real time): as the
	// replies to a received batch are timed from its arrival, the lateness is not
	// taken out of the flow's rate.
	if s.held <= now {
		at = min(at, s.held)
	}
	s.edge, s.held = clock.Never, clock.Never
	for {
		start := max(at, p.busyUntil)
		if start > horizon {
			if s.mayHaveWork(start) {
				wake = start.Add(-d.cfg.TxLookahead)
			}
			break
		}
		f, next := s.next(start)
		if f == nil {
			if next <= horizon {
				at = next
				continue
			}
			if next != clock.Never {
				wake = next.Add(-d.cfg.TxLookahead)
			}
			break
		}
		p.transmit(f, start)
	}
	p.flush()
	if s.edge <= wake {
		wake, s.held = s.edge, s.edge // at the start itself, not a lookahead before
	}
	switch {
	case wake == clock.Never:
		s.timer.Stop()
	case !s.timer.Pending() || s.timer.When() != wake:
		s.timer.Reset(max(wake, now))
	}
}

// mayHaveWork reports whether next(start) may find a frame to send, without building
// one: false only when nothing is queued to go but requests that their QPs'
// congestion windows hold back, which only an arrival (an ACK, a telemetry response,
// a retransmission timer) or a post can release, and each of those kicks the
// scheduler. The wire's freeing then need not wake it: such a wake-up found nothing
// to send (on a 16:1 incast a fifth of all events). It does not look at pacers: a
// pacer's next departure is timed when the scheduler runs (retime), and timed earlier
// it could change.
func (s *scheduler) mayHaveWork(start clock.Time) bool {
	if len(s.ctrl) > 0 {
		return true
	}
	for _, x := range s.d.active {
		switch inflight := x.q.InFlightBytes(); {
		case x.q.HasResponse():
			return true
		case x.cc.prober != nil && x.cc.prober.ProbeDue(int64(start), inflight > 0):
			return true
		case x.q.HasRequest() && float64(inflight) < x.cc.window:
			return true
		}
	}
	return false
}

// next returns the frame to send at start, or nil and the earliest time a paced QP may
// send (clock.Never if none is waiting on its pacer).
func (s *scheduler) next(start clock.Time) (*link.Frame, clock.Time) {
	d := s.d
	if len(s.ctrl) > 0 {
		f := s.ctrl[0]
		copy(s.ctrl, s.ctrl[1:])
		s.ctrl[len(s.ctrl)-1] = nil
		s.ctrl = s.ctrl[:len(s.ctrl)-1]
		return f, 0
	}
	for _, x := range d.active {
		if x.q.HasResponse() {
			if f := d.buildResponse(x); f != nil {
				return f, 0
			}
		}
	}
	for _, x := range d.active {
		if pr := x.cc.prober; pr != nil && pr.ProbeDue(int64(start), x.q.InFlightBytes() > 0) {
			if f := d.buildProbe(x, start); f != nil {
				return f, 0
			}
		}
	}
	if s.dwrr {
		return s.nextDWRR(start)
	}
	return s.nextRR(start)
}

// admitted reports whether x may send a request at start: the device holds no
// requests (HoldRequests) and congestion control lets it; if only the hold or its
// pacer keeps it back, wake is lowered to when that ends.
func admitted(x *QP, start clock.Time, wake *clock.Time) bool {
	if until := x.dev.holdUntil; until > start && held(x) {
		*wake = min(*wake, until)
		return false
	}
	x.retime(start)
	if float64(x.q.InFlightBytes()) >= x.cc.window {
		return false
	}
	// Only a window-limited flow sends before now, when a received batch is timed from
	// its arrival (fill): its rate is W/RTT, and the loop's lateness lengthened every
	// round trip. A flow only its pacer limits (DCQCN, none) lost nothing to it, and
	// sending into the past bunched its frames at the switch (a real-time 10 Gb/s
	// DCQCN 8:1 incast fell from 96 to 32–60 % of the link).
	if now := x.dev.sched.now; start < now && math.IsInf(x.cc.window, 1) {
		*wake = min(*wake, now)
		return false
	}
	if x.nextSend > start {
		*wake = min(*wake, x.nextSend)
		return false
	}
	// A request handed to the link ahead of the loop's time (the transmit lookahead)
	// is admitted before the ACKs and the telemetry that arrive until it leaves. Under
	// the window's usual slack, sending while any of it is left, it then overshoots by
	// up to a packet that congestion control cannot take back: at 1 Gb/s a 2:1
	// incast's windows are about three packets, and a probe-per-RTT HPCC incast lost
	// 3.4 points of the link to it (docs/rnic.md). Ahead of the loop's time the window
	// must hold the whole packet; otherwise the request waits for its start, when it is
	// admitted as without lookahead.
	if s := &x.dev.sched; start > s.now && float64(x.q.InFlightBytes()+uint64(x.q.MaxPayload())) > x.cc.window {
		s.edge = min(s.edge, start)
		return false
	}
	return true
}

// paced moves x's pacer past the frame f it sends at start.
func paced(x *QP, f *link.Frame, start clock.Time) {
	rate := x.cc.currentRate(int64(start))
	x.pacedLen, x.pacedRate = f.Len(), rate
	if !math.IsInf(rate, 1) {
		x.nextSend = max(x.nextSend, start).Add(pacingGap(f.Len(), rate))
	}
}

// retime re-times x's next departure when congestion control has changed its rate
// since the pacer timed it: the last frame's gap at the new rate replaces its gap at
// the old one, as a NIC's rate limiter (and the HPCC simulator's RdmaHw::ChangeRate)
// does, so a flow does not keep a stale gap until its next packet. The departure never
// moves before now. It reports whether the departure moved earlier, when the
// scheduler's wake-up is late. An HPCC update calls it as it applies the new rate;
// the scheduler calls it before each admission check, which covers rates that change
// on timers (DCQCN's increases) and with CNPs.
func (x *QP) retime(now clock.Time) bool {
	rate := x.cc.currentRate(int64(now))
	old := x.pacedRate
	if rate == old {
		return false
	}
	x.pacedRate = rate
	if x.pacedLen == 0 || math.IsInf(old, 1) {
		return false // no departure was timed at the old rate
	}
	var gap time.Duration
	if !math.IsInf(rate, 1) {
		gap = pacingGap(x.pacedLen, rate)
	}
	next := max(now, x.nextSend.Add(gap-pacingGap(x.pacedLen, old)))
	earlier := next < x.nextSend
	x.nextSend = next
	return earlier
}

// nextRR is step 4 under packet-by-packet round robin.
func (s *scheduler) nextRR(start clock.Time) (*link.Frame, clock.Time) {
	d := s.d
	wake := clock.Never
	n := len(d.active)
	for i := range n {
		k := (s.rr + i) % n
		x := d.active[k]
		if !x.q.HasRequest() || !admitted(x, start, &wake) {
			continue
		}
		f := d.buildRequest(x, start)
		if f == nil {
			continue
		}
		s.rr = k + 1
		paced(x, f, start)
		return f, 0
	}
	return nil, wake
}

// nextDWRR is step 4 under deficit weighted round robin.
func (s *scheduler) nextDWRR(start clock.Time) (*link.Frame, clock.Time) {
	d := s.d
	wake := clock.Never
	n := len(d.active)
	if s.rr >= n {
		s.rr, s.granted = 0, false
	}
	// Two laps: the QP whose turn it is may have spent its quantum, and every other
	// QP that may send reaches a positive deficit with the quantum of its own turn.
	for range 2 * n {
		x := d.active[s.rr]
		switch {
		case !x.q.HasRequest():
			x.deficit = 0
		case !admitted(x, start, &wake):
		default:
			if !s.granted {
				x.deficit += x.quantum
				s.granted = true
			}
			if x.deficit <= 0 {
				break
			}
			f := d.buildRequest(x, start)
			if f == nil {
				x.deficit = 0 // nothing to send after all
				break
			}
			x.deficit -= f.Len()
			paced(x, f, start)
			if x.deficit <= 0 {
				s.turn()
			}
			return f, 0
		}
		s.turn()
	}
	return nil, wake
}

// turn ends the turn of the QP at rr.
func (s *scheduler) turn() {
	s.rr++
	if s.rr >= len(s.d.active) {
		s.rr = 0
	}
	s.granted = false
}
