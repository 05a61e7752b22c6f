package qp

import (
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// TestRespQueueGrows: the response ring starts empty and grows as it fills, keeping
// the responses in order across its wrap-around, up to respCapacity and no further.
func TestRespQueueGrows(t *testing.T) {
	var r respQueue
	if len(r.items) != 0 {
		t.Fatalf("a new queue holds %d entries, want none", len(r.items))
	}
	next, want := roce.PSN(0), roce.PSN(0) // the next PSN to push, and to pop
	push := func() bool {
		if !r.push(response{kind: respAck, psn: next}) {
			return false
		}
		next++
		return true
	}
	pop := func() {
		if got := r.front().psn; got != want {
			t.Fatalf("popped PSN %d, want %d", got, want)
		}
		r.pop()
		want++
	}
	// Wrap the first ring: fill it, take 3 out, put 3 in.
	for range respSlack {
		push()
	}
	if len(r.items) != respSlack {
		t.Fatalf("%d entries after %d pushes, want %d", len(r.items), respSlack, respSlack)
	}
	for range 3 {
		pop()
	}
	for range 3 {
		push()
	}
	// Grow it while wrapped, then fill it to capacity.
	for r.size < respCapacity {
		if !push() {
			t.Fatalf("push refused at %d of %d", r.size, respCapacity)
		}
	}
	if push() {
		t.Fatalf("push accepted past the capacity of %d", respCapacity)
	}
	if !r.full() || len(r.items) != respCapacity {
		t.Fatalf("full %v with %d entries, want full with %d", r.full(), len(r.items), respCapacity)
	}
	for r.size > 0 {
		pop()
	}
	if want != next {
		t.Fatalf("popped up to PSN %d, pushed up to %d", want, next)
	}
}
