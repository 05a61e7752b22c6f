package link

import (
	"fmt"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// Faults declares what goes wrong on a link, independently in each direction. The zero
// value is a perfect link. Probabilities are per frame and independent of each other.
type Faults struct {
	// Loss drops a frame.
	Loss float64
	// Duplicate delivers a frame twice, back to back.
	Duplicate float64
	// Corrupt flips one uniformly chosen bit of a frame.
	Corrupt float64
	// Reorder holds a frame back by ReorderDelay so the frames after it overtake it.
	Reorder float64
	// ReorderDelay is how long a reordered frame is held; 0 means 10 µs.
	ReorderDelay time.Duration
	// Jitter adds an extra delay drawn uniformly from [0, Jitter) to a frame with
	// probability JitterProb (1 when JitterProb is 0 and Jitter is set). Jitter never
	// reorders: a frame never arrives before the one sent ahead of it, as on a wire.
	Jitter     time.Duration
	JitterProb float64
	// Flap takes the link down on a schedule.
	Flap Flap
}

// Flap is a periodic outage: from Start on, the link is down for the first Down of
// every Period. The zero value never flaps.
type Flap struct {
	Start, Period, Down time.Duration
}

// down reports whether the schedule has the link down at t.
func (f Flap) down(t clock.Time) bool {
	if f.Period <= 0 || f.Down <= 0 || t.Duration() < f.Start {
		return false
	}
	return (t.Duration()-f.Start)%f.Period < f.Down
}

// Validate reports a probability outside [0, 1] or a negative duration.
func (f Faults) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", f.Loss}, {"duplicate", f.Duplicate}, {"corrupt", f.Corrupt},
		{"reorder", f.Reorder}, {"jitter probability", f.JitterProb}} {
		if !(p.v >= 0 && p.v <= 1) { // NaN fails both
			return fmt.Errorf("%s probability %v outside [0, 1]", p.name, p.v)
		}
	}
	if f.ReorderDelay < 0 || f.Jitter < 0 || f.Flap.Start < 0 || f.Flap.Period < 0 || f.Flap.Down < 0 {
		return fmt.Errorf("negative fault duration")
	}
	if f.Flap.Down > f.Flap.Period {
		return fmt.Errorf("flap down time %v longer than its period %v", f.Flap.Down, f.Flap.Period)
	}
	return nil
}

func (f Faults) any() bool {
	return f.Loss > 0 || f.Duplicate > 0 || f.Corrupt > 0 || f.Reorder > 0 || f.Jitter > 0 ||
		(f.Flap.Period > 0 && f.Flap.Down > 0)
}
