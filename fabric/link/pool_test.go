package link

import (
	"testing"
	"unsafe"
)

// TestSerialPool: a serial pool hands back the frame released last, reset as a new
// one (full headroom, no metadata), holds no more frames than were in use at once,
// and in steady state allocates nothing.
func TestSerialPool(t *testing.T) {
	pl := NewSerialPool(1518)
	a, b := pl.Get(), pl.Get()
	if a == b {
		t.Fatal("two frames in use at once are the same frame")
	}
	if _, err := a.SetLen(100); err != nil {
		t.Fatal(err)
	}
	a.Time, a.InPort, a.Priority, a.Intact, a.Unsignalled = 7, 3, 5, true, true
	a.IPLen, a.TTL = 86, 64
	b.Release()
	a.Release()
	c := pl.Get()
	if c != a {
		t.Fatal("Get did not hand back the frame released last")
	}
	if c.Len() != 0 || c.Headroom() != Headroom || c.Time != 0 || c.InPort != 0 || c.Priority != 0 || c.Intact || c.Unsignalled || c.IPLen != 0 || c.TTL != 0 {
		t.Fatalf("reused frame not reset: len %d, headroom %d, metadata %v %v %v %v %v %v %v",
			c.Len(), c.Headroom(), c.Time, c.InPort, c.Priority, c.Intact, c.Unsignalled, c.IPLen, c.TTL)
	}
	if d := pl.Get(); d != b {
		t.Fatal("the second Get did not reuse the other released frame")
	}
	c.Release()
	if n := len(pl.free); n != 1 {
		t.Fatalf("%d frames kept after two in use and one released, want 1", n)
	}
	allocs := testing.AllocsPerRun(100, func() {
		f := pl.Get()
		g := f.Clone()
		g.Release()
		f.Release()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Get and Release in steady state", allocs)
	}
}

// TestDetached holds the block a frame carries beside its bytes: counted in Len but
// not in Bytes, its room DetachedMax bytes that no Grow reaches, copied by Clone,
// dropped by SetBytes and by the pool, and no other slice taken for it.
func TestDetached(t *testing.T) {
	pl := NewSerialPool(1000)
	f := pl.Get()
	if _, err := f.SetLen(100); err != nil {
		t.Fatal(err)
	}
	blk := f.Detached()
	if len(blk) != 0 || cap(blk) != DetachedMax {
		t.Fatalf("a fresh frame's block: %d bytes, room %d", len(blk), cap(blk))
	}
	blk = blk[:44]
	for i := range blk {
		blk[i] = byte(i)
	}
	f.SetDetached(blk)
	if f.Len() != 144 || len(f.Bytes()) != 100 || f.Headroom() != Headroom {
		t.Fatalf("Len %d, Bytes %d: want 144 and 100", f.Len(), len(f.Bytes()))
	}
	// Growing the frame at its head past the block's end goes to the tail instead;
	// up to the block's end, and at the tail, it leaves the block alone.
	gap, err := f.Grow(0, Headroom-20)
	if err != nil || f.Headroom() != Headroom {
		t.Fatalf("grown at the head into the block: headroom %d (%v)", f.Headroom(), err)
	}
	for i := range gap {
		gap[i] = 0xEE
	}
	gap, err = f.Grow(0, Headroom-44)
	if err != nil || f.Headroom() != 44 {
		t.Fatalf("grown at the head up to the block: headroom %d (%v)", f.Headroom(), err)
	}
	for i := range gap {
		gap[i] = 0xEE
	}
	gap, err = f.Grow(len(f.Bytes()), 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gap {
		gap[i] = 0xEE
	}
	if err := f.Shrink(0, 0); err != nil {
		t.Fatal(err)
	}
	c := f.Clone()
	for i, b := range c.Detached() {
		if b != byte(i) {
			t.Fatalf("clone's block byte %d = %#x (the original's after a Grow: %#x)", i, b, f.Detached()[i])
		}
	}
	if c.Len() != f.Len() {
		t.Fatalf("clone Len %d, original %d", c.Len(), f.Len())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("SetDetached took another frame's block")
			}
		}()
		c.SetDetached(f.Detached())
	}()
	if err := c.SetBytes([]byte{1, 2, 3}); err != nil || c.Len() != 3 || len(c.Detached()) != 0 {
		t.Fatalf("after SetBytes: Len %d, block %d bytes (%v)", c.Len(), len(c.Detached()), err)
	}
	f.SetDetached(f.Detached()[:0])
	if f.Len() != len(f.Bytes()) {
		t.Fatalf("block removed: Len %d, Bytes %d", f.Len(), len(f.Bytes()))
	}
	f.SetDetached(f.Detached()[:10])
	f.Release()
	if g := pl.Get(); len(g.Detached()) != 0 || g.Len() != 0 {
		t.Fatalf("a frame from the pool carries a %d-byte block", len(g.Detached()))
	}
}

// A Frame is one cache line: every node touches its frames' metadata, and on a large
// simulation each touch is a miss.
func TestFrameSize(t *testing.T) {
	if n := unsafe.Sizeof(Frame{}); n > 64 {
		t.Errorf("a Frame is %d bytes, more than a 64-byte cache line", n)
	}
}
