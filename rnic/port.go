package rnic

import (
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// port is the device's end of its link: it receives the link's frames and serializes
// the scheduler's frames at the line rate. Departure times are computed, as a switch
// port computes them, so they are exact whatever the timers' precision.
type port struct {
	d         *Device
	ep        link.Endpoint
	rate      uint64
	busyUntil clock.Time // the last frame handed over finishes here
	out       []*link.Frame
}

func (p *port) init(d *Device) {
	p.d, p.ep, p.rate = d, d.cfg.Link, d.cfg.Link.Rate()
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
	p.out = append(p.out, f)
	return p.busyUntil
}

// flush hands the queued frames to the link in one batch.
func (p *port) flush() {
	if len(p.out) == 0 {
		return
	}
	p.ep.Send(p.out)
	clear(p.out)
	p.out = p.out[:0]
}
