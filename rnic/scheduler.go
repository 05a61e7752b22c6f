package rnic

import (
	"math"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// The scheduler decides what the port sends next, each time the wire becomes free:
//
//  1. control frames the device made itself (ARP/NDP answers, CNPs, telemetry
//     responses), in order;
//  2. QP responses (ACKs, NAKs, READ responses, atomic ACKs): they release the peer's
//     window, so they never wait behind data;
//  3. a telemetry-request probe of a ModeHPCCProbe flow that is due;
//  4. one request packet of the next QP in round-robin order that has one and that
//     congestion control admits: its bytes in flight are below its window and its
//     pacer (one packet per size/rate) allows it now.
//
// It is work-conserving: a QP held back by its pacer or window does not hold the
// others, and when nobody may send the scheduler sleeps until the earliest pacing
// deadline (a window opens only with an ACK, which kicks it). Arbitration is
// packet-by-packet round robin: every QP with data gets an equal share of packets,
// and congestion control shapes each share.
type scheduler struct {
	d       *Device
	timer   *clock.Timer
	ctrl    []*link.Frame
	rr      int
	pumping bool
}

func (s *scheduler) init(d *Device) {
	s.d = d
	s.timer = d.loop.NewTimer(s.pump)
}

// control queues a frame the device built itself.
func (s *scheduler) control(f *link.Frame) {
	s.ctrl = append(s.ctrl, f)
	s.kick()
}

// kick runs the scheduler now unless it is already running (it is re-entered from
// the Rx pipeline and verbs calls it invokes).
func (s *scheduler) kick() {
	if !s.pumping {
		s.pump()
	}
}

// pump sends frames while the wire is free (or frees up within the lookahead), then
// arms the timer for the next opportunity.
func (s *scheduler) pump() {
	s.pumping = true
	d := s.d
	p := &d.port
	now := d.loop.Now()
	horizon := now.Add(d.cfg.TxLookahead)
	wake := clock.Never
	for {
		start := max(now, p.busyUntil)
		if start > horizon {
			wake = start.Add(-d.cfg.TxLookahead)
			break
		}
		f, next := s.next(start)
		if f == nil {
			wake = next
			break
		}
		p.transmit(f, start)
	}
	p.flush()
	switch {
	case wake == clock.Never:
		s.timer.Stop()
	case !s.timer.Pending() || s.timer.When() != wake:
		s.timer.Reset(max(wake, now))
	}
	s.pumping = false
	d.notify() // after pumping: a handler's posts must be able to kick the scheduler
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
	wake := clock.Never
	n := len(d.active)
	for i := range n {
		k := (s.rr + i) % n
		x := d.active[k]
		if !x.q.HasRequest() || float64(x.q.InFlightBytes()) >= x.cc.window {
			continue
		}
		if x.nextSend > start {
			wake = min(wake, x.nextSend)
			continue
		}
		f := d.buildRequest(x, start)
		if f == nil {
			continue
		}
		s.rr = k + 1
		if rate := x.cc.currentRate(int64(start)); !math.IsInf(rate, 1) {
			x.nextSend = max(x.nextSend, start).Add(pacingGap(f.Len(), rate))
		}
		return f, 0
	}
	return nil, wake
}
