package rnic

import (
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// port is the device's end of its link: it receives the link's frames and serializes
// the scheduler's frames at the line rate. Departure times are computed, as a switch
// port computes them, so they are exact whatever the timers' precision.
//
// A frame addressed to the port's own MAC (a QP's peer is a QP of this device: the
// neighbour lookup gives the own MAC for the own addresses) is looped back, as a NIC's
// loopback does: a bridge never sends a frame back out of the port it came in on, so
// the fabric could not deliver it. It is serialized like any other, and handed to
// the device's own Rx pipeline when its last bit would have left (docs/rnic.md,
// "Loopback: two QPs on one RNIC").
type port struct {
	d         *Device
	ep        link.Endpoint
	rate      uint64
	busyUntil clock.Time // the last frame handed over finishes here
	out       []*link.Frame

	// looped holds the frames transmit looped back, in Time order (busyUntil only
	// grows), until loopTimer delivers them at their Time; arrived is the batch being
	// delivered.
	looped    []*link.Frame
	arrived   []*link.Frame
	loopTimer *clock.Timer
}

func (p *port) init(d *Device) {
	p.d, p.ep, p.rate = d, d.cfg.Link, d.cfg.Link.Rate()
	p.loopTimer = d.loop.NewTimer(p.deliverLooped)
}

// Receive implements link.Receiver: the Rx pipeline, then whatever the frames made
// sendable (ACKs, responses, requests the window now admits).
func (p *port) Receive(frames []*link.Frame) {
	d := p.d
	d.rxNow = min(d.loop.Now(), frames[len(frames)-1].Time)
	d.receiving = true
	link.Contain(frames, p)
	d.sched.kick()
	d.sched.settle()
	d.receiving = false
}

// HandleFrame implements link.FrameHandler: the Rx pipeline for one frame.
func (p *port) HandleFrame(f *link.Frame) { p.d.receive(f) }

// HandlePanic implements link.FrameHandler: the frame is dropped and counted.
func (p *port) HandlePanic(_ *link.Frame, v any, stack []byte) {
	if p.d.stats.Panics++; p.d.stats.Panics == 1 && p.d.cfg.OnPanic != nil {
		p.d.cfg.OnPanic(v, stack)
	}
}

// transmit queues f to leave when the wire is free at or after start, and returns the
// time its last bit leaves.
func (p *port) transmit(f *link.Frame, start clock.Time) clock.Time {
	p.d.stats.TxFrames++
	p.d.stats.TxBytes += uint64(f.Len())
	p.busyUntil = max(start, p.busyUntil).Add(link.Serialization(f.Len(), p.rate))
	f.Time = p.busyUntil
	if p.ownFrame(f) {
		p.d.stats.LoopbackFrames++
		p.d.stats.LoopbackBytes += uint64(f.Len())
		p.looped = append(p.looped, f)
	} else {
		if p.d.localGroup(f.Bytes()) {
			// As the host's IP stack loops multicast back to rxe: the device's own
			// members of the group hear it too.
			p.d.stats.LoopbackFrames++
			p.d.stats.LoopbackBytes += uint64(f.Len())
			p.looped = append(p.looped, f.Clone())
		}
		p.out = append(p.out, f)
	}
	return p.busyUntil
}

// ownFrame reports whether f is addressed to the port's own MAC.
func (p *port) ownFrame(f *link.Frame) bool {
	b := f.Bytes()
	return len(b) >= 6 && [6]byte(b[:6]) == p.d.cfg.MAC
}

// deliverLooped hands the looped frames whose last bit has left to the device's Rx
// pipeline, as a link hands over arrivals: one batch, through Receive.
func (p *port) deliverLooped() {
	now := p.d.loop.Now()
	n := 0
	for n < len(p.looped) && p.looped[n].Time <= now {
		n++
	}
	// Taken out of the queue first: what the batch makes sendable may loop back too.
	p.arrived = append(p.arrived[:0], p.looped[:n]...)
	k := copy(p.looped, p.looped[n:])
	clear(p.looped[k:])
	p.looped = p.looped[:k]
	if k > 0 {
		p.loopTimer.Reset(p.looped[0].Time)
	}
	if n > 0 {
		p.Receive(p.arrived)
	}
	link.Forget(p.arrived)
}

// flush hands the queued frames to the link in one batch, and arms the delivery of
// the looped ones.
func (p *port) flush() {
	if len(p.looped) > 0 && !p.loopTimer.Pending() {
		p.loopTimer.Reset(p.looped[0].Time)
	}
	if len(p.out) == 0 {
		return
	}
	p.ep.Send(p.out)
	link.Forget(p.out)
	p.out = p.out[:0]
}
