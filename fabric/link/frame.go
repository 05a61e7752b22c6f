// Package link is what both ends of a fabric link share: pooled frames, the Endpoint a
// node (switch port or soft-RNIC) attaches to, and the in-process link that carries
// frames between two endpoints with propagation delay and faults.
//
// A node sees only Endpoint and Receiver, so the two ends of a link need not share a
// process: a tunnel to another lab process implements the same Endpoint.
package link

import (
	"errors"
	"sync"

	"github.com/rocelab/rocelab/internal/clock"
)

// Buffer contract. Every pooled frame has at least Headroom bytes free before its data
// and Tailroom bytes free after a frame of its pool's maximum size, so a telemetry codec can
// insert headers and per-hop records in place (Grow) without copying the packet to a new
// buffer. A frame never grows beyond its buffer: Grow fails with ErrNoRoom instead.
const (
	// Headroom is the free space before a fresh frame's first byte: room for a
	// switch to open each hop's telemetry by moving the headers in front of it
	// rather than the payload behind it (eight INT-MD hops of 48 bytes, a NIC's
	// Remaining Hop Count, and the request's 16), or for a Detached block.
	Headroom = 400
	// MaxFrame is the largest frame size a pool supports: a 9000-byte jumbo MTU plus
	// an Ethernet header with one VLAN tag.
	MaxFrame = 9000 + 18
	// Tailroom is the free space after a frame of its pool's maximum size.
	Tailroom = 256
	// DetachedMax is the most telemetry a frame carries beside its bytes (Detached):
	// a soft-RNIC's INT-MD block, 16 bytes of headers and at most eight hops (its
	// Remaining Hop Count) of 48 bytes, or the HPCC hop block with its rate table.
	// The block is kept at the start of the buffer, in the headroom.
	DetachedMax = Headroom
)

// ErrNoRoom reports that a frame's buffer cannot hold the requested growth.
var ErrNoRoom = errors.New("link: frame buffer has no room to grow")

// Frame is one Ethernet frame (destination MAC through payload, without FCS) in a pooled
// buffer, with the metadata the node holding it needs. A frame has one owner at a time:
// whoever Sends it, Releases it or hands it to a Receiver gives it up.
type Frame struct {
	buf      []byte
	off, end int32 // not int: the Frame fits a cache line
	pool     *Pool

	// Time is model time. A sender sets it to the moment the frame's last bit left;
	// the link delivers it set to the moment the last bit arrived. In between, the
	// node holding the frame may use it as it likes (a switch stores the enqueue time).
	Time clock.Time
	// InPort is the index of the port the frame arrived on, set by the receiving node.
	InPort uint16
	// Priority is the 802.1p priority (0–7) the receiving node classified it into.
	Priority uint8
	// Intact says that the frame's bytes under its RoCE ICRC, once any telemetry a
	// switch added is stripped, are still those its sender computed the ICRC over:
	// a soft-RNIC of this process built it, and it crossed only links of this
	// process. The receiving soft-RNIC then need not check the ICRC, which cost a
	// 10 Gb/s lab's loop 8 % of its time. Whoever changes such a byte clears it (the
	// corrupt fault does); frames from a pool, SetBytes and a TAP start without it.
	Intact bool
	// Unsignalled is set by a switch that received the frame when its telemetry
	// stamper found no request signal in it (fabric.SignalStamper): the egress port
	// need not read the frame again to find that out when it leaves, by then long out
	// of the caches. Frames from a pool and clones' originals start without it.
	Unsignalled bool
	// IPLen and TTL are the total length and TTL (hop limit) of the frame's IP
	// packet, set by a switch that received the frame and whose stamper saw the
	// request signal in it (fabric.SignalStamper), for that stamper at dequeue:
	// the block of a frame that carries its telemetry beside it (Detached) gets
	// its hop without the headers being read again, long out of the caches (2–3 %
	// of a fat tree's CPU). IPLen 0: not set. The switch changes neither field's
	// header; frames from a pool start without them.
	IPLen uint16
	TTL   uint8

	// buf[:nDetached] is the telemetry block the frame carries beside its bytes
	// (Detached): in the headroom, a few cache lines before the headers, where it
	// costs no memory (room of its own, after the buffer or in the Frame, added 400
	// bytes to every frame in flight, and the 320-host fat tree's whole run measured
	// slower with it).
	nDetached uint16
}

// Bytes returns the frame's contents. The slice aliases the buffer and is invalidated
// by Grow, Shrink and SetLen. It does not hold the Detached block.
func (f *Frame) Bytes() []byte { return f.buf[f.off:f.end] }

// Len returns the frame's length on the wire in bytes: its contents and its Detached
// block.
func (f *Frame) Len() int { return int(f.end-f.off) + int(f.nDetached) }

// Detached returns the telemetry block the frame carries beside its contents, empty
// for most frames. A payload-free simulation (rnic.Config.PayloadFree), where nothing
// but the telemetry codec reads a block, keeps it there instead of between the UDP
// header and the BTH (telemetry.Detacher): its bytes count in Len, so the wire, the
// queues and the counters see the frame the block would make, but no hop moves the
// frame's headers to open or close it. Such a frame never leaves the process: a TAP,
// a capture or a tunnel gets the contents only. The slice aliases the start of the
// frame's buffer; its capacity, DetachedMax bytes, is the room for a block, which
// Grow leaves alone.
func (f *Frame) Detached() []byte { return f.buf[:f.nDetached:DetachedMax] }

// SetDetached makes the detached block b, a slice of the frame's Detached's
// capacity (b[:0] removes it).
func (f *Frame) SetDetached(b []byte) {
	if cap(b) != DetachedMax || &b[:1][0] != &f.buf[0] {
		panic("link: SetDetached of a block that is not the frame's")
	}
	f.nDetached = uint16(len(b))
}

// Headroom returns the free bytes before the frame.
func (f *Frame) Headroom() int { return int(f.off) }

// Tailroom returns the free bytes after the frame.
func (f *Frame) Tailroom() int { return len(f.buf) - int(f.end) }

// SetLen sets the frame length, keeping its start, and returns the contents. Bytes
// exposed by growing are not cleared. It fails if the buffer is too small.
func (f *Frame) SetLen(n int) ([]byte, error) {
	if n < 0 || int(f.off)+n > len(f.buf) {
		return nil, ErrNoRoom
	}
	f.end = f.off + int32(n)
	return f.Bytes(), nil
}

// SetBytes replaces the contents with a copy of b, and drops the Detached block.
func (f *Frame) SetBytes(b []byte) error {
	dst, err := f.SetLen(len(b))
	if err != nil {
		return err
	}
	copy(dst, b)
	f.Intact, f.IPLen = false, 0
	f.nDetached = 0
	return nil
}

// Grow opens n bytes at offset off (0 ≤ off ≤ len(Bytes())), moving the shorter side of the
// frame into its headroom or tailroom, and returns the gap (not cleared). Bytes before
// off keep their order and so do bytes after it; slices from Bytes are invalidated.
func (f *Frame) Grow(off, n int) ([]byte, error) {
	start, end := int(f.off), int(f.end)
	size := end - start
	if off < 0 || off > size || n < 0 {
		return nil, errors.New("link: Grow outside the frame")
	}
	headFits, tailFits := start-n >= int(f.nDetached), f.Tailroom() >= n
	switch {
	case headFits && (off <= size-off || !tailFits):
		copy(f.buf[start-n:], f.buf[start:start+off])
		start -= n
		f.off = int32(start)
	case tailFits:
		copy(f.buf[start+off+n:], f.buf[start+off:end])
		f.end += int32(n)
	default:
		return nil, ErrNoRoom
	}
	return f.buf[start+off : start+off+n], nil
}

// Shrink removes n bytes at offset off by moving the bytes before them forward.
func (f *Frame) Shrink(off, n int) error {
	start := int(f.off)
	if off < 0 || n < 0 || off+n > int(f.end)-start {
		return errors.New("link: Shrink outside the frame")
	}
	copy(f.buf[start+n:], f.buf[start:start+off])
	f.off += int32(n)
	return nil
}

// Editor edits one frame at a time for code written for byte slices (the telemetry
// codecs: roce/telemetry's Opener and Closer): Open and Close open and close a gap
// by moving the frame's shorter side (Grow, Shrink), so that a header inserted or
// removed a few dozen bytes into a frame moves the headers in front of it rather
// than the payload behind it. They are bound once, so using them allocates nothing.
type Editor struct {
	frame *Frame
	// Open opens n zero bytes at off in the frame being edited and returns its
	// contents (b is the caller's view of them, unused), with their capacity running
	// to the end of the buffer; ErrNoRoom when neither side has room.
	Open func(b []byte, off, n int) ([]byte, error)
	// Close removes n bytes at off from the frame being edited (off+n within it) and
	// returns its contents.
	Close func(b []byte, off, n int) []byte
}

// NewEditor returns an editor of no frame yet.
func NewEditor() *Editor {
	e := &Editor{}
	e.Open, e.Close = e.open, e.close
	return e
}

// Edit makes f the frame Open and Close edit.
func (e *Editor) Edit(f *Frame) { e.frame = f }

func (e *Editor) open(_ []byte, off, n int) ([]byte, error) {
	gap, err := e.frame.Grow(off, n)
	if err != nil {
		return e.frame.Bytes(), err
	}
	clear(gap)
	return e.frame.Bytes(), nil
}

func (e *Editor) close(_ []byte, off, n int) []byte {
	e.frame.Shrink(off, n) // only bounds the caller checked can fail, and then nothing moves
	return e.frame.Bytes()
}

// Clone returns a copy of f, contents and metadata, from f's pool.
func (f *Frame) Clone() *Frame {
	c := f.pool.Get()
	c.SetBytes(f.Bytes())
	c.nDetached = f.nDetached
	copy(c.buf, f.Detached())
	c.Time, c.InPort, c.Priority, c.Intact, c.Unsignalled = f.Time, f.InPort, f.Priority, f.Intact, f.Unsignalled
	c.IPLen, c.TTL = f.IPLen, f.TTL
	return c
}

// Release returns the frame to its pool. The caller must not touch it afterwards.
func (f *Frame) Release() { f.pool.put(f) }

// Pool hands out frames of one buffer size. In steady state Get allocates nothing.
//
// A pool from NewPool is safe for concurrent use: frames are released by whichever node
// consumes them, often on another thread than the one that allocated them. A pool
// from NewSerialPool is not: every Get and Release of its frames must come from one
// goroutine at a time, as when every node runs on one loop. It keeps released frames
// in a plain list instead of a sync.Pool, whose release publishes the frame with an
// atomic write to a line other threads share: 11 % of a 10 Gb/s real-time loop
// (docs/rnic.md).
type Pool struct {
	shared sync.Pool
	free   []*Frame // a serial pool's released frames, the last released first out
	serial bool
	size   int
}

// NewPool returns an empty pool, safe for concurrent use, of frames that hold
// maxFrame bytes (at most MaxFrame) with full headroom and tailroom: size it for the
// largest MTU of the links it feeds, plus 18 bytes of Ethernet and VLAN header.
func NewPool(maxFrame int) *Pool {
	pl := &Pool{size: Headroom + min(maxFrame, MaxFrame) + Tailroom}
	pl.shared.New = func() any { return pl.newFrame() }
	return pl
}

// NewSerialPool returns an empty pool like NewPool's for frames that one goroutine at
// a time gets and releases. It holds at most as many frames as were in use at once.
func NewSerialPool(maxFrame int) *Pool {
	return &Pool{serial: true, size: Headroom + min(maxFrame, MaxFrame) + Tailroom}
}

func (pl *Pool) newFrame() *Frame { return &Frame{buf: make([]byte, pl.size), pool: pl} }

// Get returns an empty frame with Headroom bytes of headroom and zero metadata.
func (pl *Pool) Get() *Frame {
	var f *Frame
	if !pl.serial {
		f = pl.shared.Get().(*Frame)
	} else if n := len(pl.free); n > 0 {
		f = pl.free[n-1]
		pl.free = pl.free[:n-1]
	} else {
		f = pl.newFrame()
	}
	f.off, f.end, f.nDetached = Headroom, Headroom, 0
	f.Time, f.InPort, f.Priority, f.Intact, f.Unsignalled = 0, 0, 0, false, false
	f.IPLen, f.TTL = 0, 0
	return f
}

func (pl *Pool) put(f *Frame) {
	if pl.serial {
		pl.free = append(pl.free, f)
		return
	}
	pl.shared.Put(f)
}

// Forget sets a batch of references to nil, so that the array behind it keeps nothing
// alive once the batch is handed on. A batch holds one frame more often than not (a
// virtual-time link delivers each frame at its own instant), and clear, which calls
// into the runtime for pointers (memclrHasPointers and its write-barrier check), cost
// 2–3 % of a fat tree's instructions where the one store costs nothing.
func Forget[T any](b []*T) {
	if len(b) == 1 {
		b[0] = nil
		return
	}
	clear(b)
}
