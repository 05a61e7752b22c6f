package lab

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// TestMaxLag: a lab on one loop may fall the driver's default behind real time; on
// several, each runs at real time.
func TestMaxLag(t *testing.T) {
	for threads, want := range map[int]time.Duration{1: clock.DefaultMaxLag, 2: time.Nanosecond, 4: time.Nanosecond} {
		if got := maxLag(threads); got != want {
			t.Errorf("%d threads: max lag %v, want %v", threads, got, want)
		}
	}
}
