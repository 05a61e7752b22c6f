package lab

import (
	"errors"
	"os"
	"sync"

	"go.uber.org/zap"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/netns"
)

// wire joins an external host's TAP to its fabric link, frame for frame, with nothing
// in between: no soft-RNIC, no ARP answering. It is the node at the host's end of the
// link, on its own loop. Frames from the TAP are serialized at the link's rate, as a
// NIC would put them on the wire.
type wire struct {
	ext  *External
	tap  *netns.TAP
	pool *link.Pool
	log  *zap.Logger

	// From the TAP reader to the loop.
	mu      sync.Mutex
	in      []*link.Frame
	dropped uint64
	task    *clock.Task

	// Loop state.
	busy        clock.Time
	out         []*link.Frame
	scratch     [][]byte
	writeErrors uint64
}

// maxWireBacklog bounds the frames read from the TAP but not yet sent, as a NIC ring.
const maxWireBacklog = 1024

func newWire(x *External, tap *netns.TAP, log *zap.Logger) *wire {
	w := &wire{ext: x, tap: tap, pool: x.Pool, log: log}
	w.task = x.Loop.NewTask(w.send)
	x.Link.Attach(x.Loop, w)
	return w
}

// Receive implements link.Receiver: fabric → TAP, on the loop.
func (w *wire) Receive(frames []*link.Frame) {
	w.scratch = w.scratch[:0]
	for _, f := range frames {
		w.scratch = append(w.scratch, f.Bytes())
	}
	if n, err := w.tap.Write(0, w.scratch); err != nil {
		w.writeErrors++
		if w.writeErrors == 1 || w.writeErrors%1000 == 0 {
			w.log.Warn("TAP write", zap.Int("written", n), zap.Error(err), zap.Uint64("errors", w.writeErrors))
		}
	}
	for _, f := range frames {
		f.Release()
	}
}

// read is the TAP → fabric goroutine.
func (w *wire) read() {
	bufs := make([][]byte, relayBatch)
	for i := range bufs {
		bufs[i] = make([]byte, link.MaxFrame)
	}
	sizes := make([]int, relayBatch)
	for {
		n, err := w.tap.Read(0, bufs, sizes)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Warn("TAP read", zap.Error(err))
			}
			return
		}
		w.mu.Lock()
		for i := range n {
			f := w.pool.Get()
			if len(w.in) >= maxWireBacklog || f.SetBytes(bufs[i][:sizes[i]]) != nil {
				f.Release()
				w.dropped++
				continue
			}
			w.in = append(w.in, f)
		}
		w.mu.Unlock()
		w.task.Post()
	}
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
