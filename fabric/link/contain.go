package link

import "runtime/debug"

// FrameHandler is a node's per-frame entry point, as Contain drives it.
type FrameHandler interface {
	// HandleFrame takes one received frame (it keeps, forwards or releases it).
	HandleFrame(f *Frame)
	// HandlePanic hears that HandleFrame(f) panicked with v: f is dropped (not
	// released, since the handler may have kept a reference to it) and the handler
	// counts it. stack is the goroutine's stack at the panic.
	HandlePanic(f *Frame, v any, stack []byte)
}

// Contain runs h.HandleFrame on each frame in turn. A frame whose handling panics is
// dropped and reported to h.HandlePanic, and the batch goes on with the next frame:
// every node of a lab shares one process, so a frame that trips a bug must cost that
// frame, never the lab. Without a panic it costs one open-coded defer per batch.
func Contain(frames []*Frame, h FrameHandler) {
	for len(frames) > 0 {
		frames = frames[containFrom(frames, h):]
	}
}

// containFrom handles frames until one panics and returns how many it consumed,
// the panicking one included.
func containFrom(frames []*Frame, h FrameHandler) (done int) {
	defer func() {
		if v := recover(); v != nil {
			h.HandlePanic(frames[done], v, debug.Stack())
			done++
		}
	}()
	for ; done < len(frames); done++ {
		h.HandleFrame(frames[done])
	}
	return done
}
