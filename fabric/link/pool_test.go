package link

import "testing"

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
	b.Release()
	a.Release()
	c := pl.Get()
	if c != a {
		t.Fatal("Get did not hand back the frame released last")
	}
	if c.Len() != 0 || c.Headroom() != Headroom || c.Time != 0 || c.InPort != 0 || c.Priority != 0 || c.Intact || c.Unsignalled {
		t.Fatalf("reused frame not reset: len %d, headroom %d, metadata %v %v %v %v %v",
			c.Len(), c.Headroom(), c.Time, c.InPort, c.Priority, c.Intact, c.Unsignalled)
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
