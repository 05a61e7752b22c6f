package fabric

import (
	"math/rand/v2"
	"testing"

	"github.com/rocelab/rocelab/internal/clock"
)

// remove deletes m's entry, to make a switch learn an address again.
func (t *fib) remove(m [6]byte) {
	if i := denseIndex(m); i >= 0 {
		if i < len(t.dense) {
			t.dense[i] = 0
		}
		return
	}
	delete(t.other, macKey(m))
}

// TestFIBMatchesMap drives the FIB and a plain map with the same random sets,
// removals and lookups, over rocelab's host addresses (kept by host number),
// addresses of the same prefix past maxDense, and arbitrary ones, and checks that
// every lookup agrees.
func TestFIBMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() [6]byte {
		var m [6]byte
		switch rng.IntN(3) {
		case 0: // a host number, dense
			n := rng.IntN(2000)
			m = [6]byte{0x02, 0, 0, byte(n >> 16), byte(n >> 8), byte(n)}
		case 1: // the prefix, past the dense range
			n := maxDense + rng.IntN(2000)
			m = [6]byte{0x02, 0, 0, byte(n >> 16), byte(n >> 8), byte(n)}
		default:
			for i := range m {
				m[i] = byte(rng.IntN(4))
			}
		}
		return m
	}
	var f fib
	ref := map[[6]byte]uint32{}
	for range 200_000 {
		m := addr()
		switch rng.IntN(4) {
		case 0:
			r := uint32(rng.IntN(50))
			f.set(m, r)
			ref[m] = r
		case 1:
			f.remove(m)
			delete(ref, m)
		default:
			got, ok := f.get(m)
			want, wantOK := ref[m]
			if ok != wantOK || got != want {
				t.Fatalf("get(% x) = %d, %v; want %d, %v", m, got, ok, want, wantOK)
			}
		}
	}
	if len(f.dense) > maxDense {
		t.Errorf("dense table of %d entries, at most %d", len(f.dense), maxDense)
	}
}

// TestLearningIsBounded: a host sending from ever new source addresses makes the
// switch learn at most maxLearned of them; the others' frames are flooded, and
// addresses learned before stay learned.
func TestLearningIsBounded(t *testing.T) {
	v := clock.NewVirtual(1)
	sw, _ := star(v, 2, 100e9, 100e9, 0, Config{})
	for i := range maxLearned + 1000 {
		sw.fib.learn([6]byte{0x06, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}, 0)
	}
	if sw.fib.learned != maxLearned || len(sw.fib.other) != maxLearned {
		t.Errorf("learned %d addresses (%d in the table), want at most %d", sw.fib.learned, len(sw.fib.other), maxLearned)
	}
	if _, ok := sw.fib.get([6]byte{0x06, 0, 0, 0, 0, 5}); !ok {
		t.Error("an address learned before the table filled was lost")
	}
	for i := range 3 { // star's two senders and its receiver
		if _, ok := sw.fib.get(hostMAC(i)); !ok {
			t.Errorf("host %d's static route was lost", i)
		}
	}
}
