package verbs_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
)

// TestDoorbellNoLostWakeups posts WRITEs with random gaps, so that posts land while the
// device's loop works, spins before a deadline, is about to sleep and sleeps: each one
// must complete (a post that writes no eventfd because the loop said it was awake must
// still be seen).
func TestDoorbellNoLostWakeups(t *testing.T) {
	l := newLab(t)
	a, b := pair(t, l, 1<<16)
	wr := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, RKey: b.mr.RKey(), RemoteAddr: b.mr.Addr(),
		SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}}}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 400
	if testing.Short() {
		n = 100
	}
	for range n {
		if err := a.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		wantOK(t, poll(t, a.cq, 1))
		if gap := rng.IntN(4); gap > 0 {
			// Busy-wait: time.Sleep's ~1 ms granularity would always find the loop asleep.
			until := time.Now().Add(time.Duration(rng.IntN(120)) * time.Microsecond)
			for time.Now().Before(until) {
			}
		}
	}
}
