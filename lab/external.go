package lab

import (
	"sync"

	"go.uber.org/zap"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/network"
)

// wire joins an external host's TAP to its fabric link, frame for frame, with nothing
// in between: no soft-RNIC, no ARP answering. It is the node at the host's end of the
// link, on its own loop: frames from the fabric go to the TAP (hostWriter); frames from
// the TAP are serialized at the link's rate, as a NIC would put them on the wire.
type wire struct {
	ext  *network.External
	dev  Device
	log  *zap.Logger
	task *clock.Task

	// From the TAP reader to the loop.
	mu      sync.Mutex
	in      []*link.Frame
	dropped uint64

	// Loop state.
	busy clock.Time
	out  []*link.Frame
}

// maxWireBacklog bounds the frames read from the TAP but not yet sent, as a NIC ring.
// It holds a whole unacknowledged burst of the external host (rxe's ib_send_bw -c UC
// sends 12,800 frames, and nothing resends what is lost) while the lab's loop is
// descheduled on a loaded machine: at 1024, send_bw-uc-server-ipv6 lost 2,076 frames.
const maxWireBacklog = 16384

func newWire(x *network.External, dev Device, log *zap.Logger) *wire {
	w := &wire{ext: x, dev: dev, log: log}
	w.task = x.Loop.NewTask(w.send)
	x.Link.Attach(x.Loop, &hostWriter{dev: dev, log: log})
	return w
}

// read is the TAP → fabric goroutine.
func (w *wire) read() {
	readHost(w.dev, w.log, func(frames [][]byte) {
		w.mu.Lock()
		for _, b := range frames {
			f := w.ext.Pool.Get()
			if len(w.in) >= maxWireBacklog || f.SetBytes(b) != nil {
				f.Release()
				if w.dropped++; w.dropped == 1 || w.dropped%1000 == 0 {
					w.log.Warn("frames from the TAP dropped: backlog full or frame too long", zap.Uint64("dropped", w.dropped))
				}
				continue
			}
			w.in = append(w.in, f)
		}
		w.mu.Unlock()
		w.task.Post()
	})
}

// send runs on the loop: it stamps each frame with its departure at the link's rate and
// hands the batch to the link.
func (w *wire) send() {
	w.mu.Lock()
	w.out = append(w.out, w.in...)
	clear(w.in)
	w.in = w.in[:0]
	w.mu.Unlock()
	now, rate := w.ext.Loop.Now(), w.ext.Link.Rate()
	for _, f := range w.out {
		w.busy = max(w.busy, now).Add(link.Serialization(f.Len(), rate))
		f.Time = w.busy
	}
	if len(w.out) > 0 {
		w.ext.Link.Send(w.out)
	}
	clear(w.out)
	w.out = w.out[:0]
}
