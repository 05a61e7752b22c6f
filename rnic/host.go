package rnic

import (
	"sync"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// MaxHostBacklog bounds the host frames waiting for the wire: past it, frames the host's
// kernel sends are dropped (and counted in Stats.HostDropped), as a NIC's Tx ring
// overflows. The kernel's own stack (TCP) recovers from that; RoCE never queues here.
const MaxHostBacklog = 1024

// hostRelay is the kernel→fabric direction of the host's netdev: frames the host's
// kernel sent through its TAP, handed over from the lab's reader goroutine and sent by
// the scheduler as control frames (they are rare next to RoCE and must not starve).
// The fabric→kernel direction is Config.Host.
type hostRelay struct {
	mu      sync.Mutex
	in      []*link.Frame // filled by SendFromHost
	spare   []*link.Frame
	dropped uint64 // under mu
	task    *clock.Task
}

func (h *hostRelay) init(d *Device) {
	h.task = d.loop.NewTask(d.drainHost)
}

// SendFromHost copies frames the host's kernel transmitted (read from its netdev) and
// sends them on the port, after the control frames already queued and before QP
// traffic. It is safe from any goroutine, returns at once, and reports how many frames
// it accepted: the rest exceed MaxHostBacklog and are dropped. Frames longer than the
// device's pool can hold are dropped too.
func (d *Device) SendFromHost(frames [][]byte) (accepted int) {
	h := &d.host
	for _, b := range frames {
		f := d.cfg.Pool.Get()
		if f.SetBytes(b) != nil {
			f.Release()
			h.mu.Lock()
			h.dropped++
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		if len(h.in) >= MaxHostBacklog {
			h.dropped++
			h.mu.Unlock()
			f.Release()
			continue
		}
		h.in = append(h.in, f)
		h.mu.Unlock()
		accepted++
	}
	if accepted > 0 {
		h.task.Post()
	}
	return accepted
}

// drainHost moves the frames handed over by SendFromHost to the scheduler, on the loop.
func (d *Device) drainHost() {
	h := &d.host
	h.mu.Lock()
	in := h.in
	h.in = h.spare[:0]
	d.stats.HostDropped = h.dropped
	h.mu.Unlock()
	for i, f := range in {
		d.stats.HostFrames++
		d.sched.ctrl = append(d.sched.ctrl, f)
		in[i] = nil
	}
	h.spare = in[:0]
	d.sched.kick()
}
