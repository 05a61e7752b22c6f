package link

import (
	"slices"
	"strings"
	"testing"
)

type panicky struct {
	handled []int
	dropped []int
	stack   string
}

func (p *panicky) HandleFrame(f *Frame) {
	if f.Len()%3 == 0 {
		var empty []byte
		_ = empty[f.Len()] // the class of bug a malformed frame trips: index out of range
	}
	p.handled = append(p.handled, f.Len())
}

func (p *panicky) HandlePanic(f *Frame, v any, stack []byte) {
	p.dropped = append(p.dropped, f.Len())
	p.stack = string(stack)
}

// TestContain: frames whose handling panics are dropped and reported with the stack;
// the frames around them are handled, in order.
func TestContain(t *testing.T) {
	pool := NewPool(1518)
	var frames []*Frame
	for _, n := range []int{60, 61, 62, 63, 64, 66, 67} {
		f := pool.Get()
		if err := f.SetBytes(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	var h panicky
	Contain(frames, &h)
	if got, want := h.handled, []int{61, 62, 64, 67}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
	if got, want := h.dropped, []int{60, 63, 66}; !slices.Equal(got, want) {
		t.Errorf("dropped %v, want %v", got, want)
	}
	if !strings.Contains(h.stack, "HandleFrame") {
		t.Errorf("stack does not show the handler:\n%s", h.stack)
	}
}
