package perftest

import "time"

// durState is perftest's DurationStates.
type durState int

const (
	stateStart      durState = iota // the leading margin: not measured
	stateSample                     // counted
	stateStopSample                 // the trailing margin: not measured
	stateEnd                        // the loops stop
)

// durationClock is perftest's -D state machine. perftest moves it with SIGALRM
// (catch_alarm); here the loops look at the clock where perftest looks at the state.
// A run of Duration seconds has Margin seconds at either end that are not measured.
type durationClock struct {
	duration, margin time.Duration
	now              func() uint64

	state   durState
	started bool
	next    time.Time // when the state changes next

	sampleStart, sampleEnd uint64 // perftest's tposted[0] and tcompleted[0] for -D
}

func newDurationClock(cfg Config, now func() uint64) *durationClock {
	return &durationClock{duration: time.Duration(cfg.Duration) * time.Second, margin: time.Duration(cfg.Margin) * time.Second, now: now}
}

// begin starts the run: perftest arms its alarm when a loop starts, or a receiver's
// at its first completion.
func (d *durationClock) begin() {
	d.started = true
	d.state = stateStart
	if d.margin > 0 {
		d.next = time.Now().Add(d.margin)
		return
	}
	d.advance(time.Now())
}

// advance is catch_alarm: one step of the state machine at t.
func (d *durationClock) advance(t time.Time) {
	switch d.state {
	case stateStart:
		d.state = stateSample
		d.sampleStart = d.now()
		d.next = t.Add(d.duration - 2*d.margin)
	case stateSample:
		d.state = stateStopSample
		d.sampleEnd = d.now()
		if d.margin > 0 {
			d.next = t.Add(d.margin)
			return
		}
		d.advance(t)
	case stateStopSample:
		d.state = stateEnd
	}
}

// current returns the state, moving it on when its time has come. Before begin it is
// stateStart, as perftest's is.
func (d *durationClock) current() durState {
	if !d.started {
		return stateStart
	}
	for d.state != stateEnd {
		t := time.Now()
		if t.Before(d.next) {
			break
		}
		d.advance(t)
	}
	return d.state
}

// window is the sample window in nanoseconds.
func (d *durationClock) window() uint64 { return d.sampleEnd - d.sampleStart }
