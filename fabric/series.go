package fabric

import (
	"math/bits"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// Sample is one port's queue and transmitted bytes at one instant: what a time series
// needs, small enough to take for every port every microsecond (Port.Stats has the
// rest).
type Sample struct {
	Time    clock.Time
	Switch  uint32
	Port    uint16
	QLen    int    // bytes queued
	TxBytes uint64 // bytes transmitted so far
}

// Series collects samples in memory.
type Series struct {
	Samples []Sample
}

// Record appends s.
func (r *Series) Record(s Sample) { r.Samples = append(r.Samples, s) }

// Sample calls record with every port's queue and bytes sent now and every interval after, on the
// switch's loop, until stop is called. Under the Virtual clock a running sampler always
// has an event pending: run the clock with RunUntil or RunFor, or stop the sampler.
//
// With ports given, only those are sampled (an index beyond the switch's ports is
// ignored).
func (s *Switch) Sample(interval time.Duration, record func(Sample), ports ...uint16) (stop func()) {
	watched := s.ports
	if len(ports) > 0 {
		watched = nil
		for _, i := range ports {
			if int(i) < len(s.ports) {
				watched = append(watched, s.ports[i])
			}
		}
	}
	return s.sample(interval, func(now clock.Time) {
		for _, p := range watched {
			record(p.sampleAt(now))
		}
	})
}

// SampleChanges is Sample of every port for a recorder that keeps change points: at
// each instant it calls tick with the instant, then record, in port order, only for
// the ports whose queue or bytes sent differ from their previous sample (every port
// at the first instant). On a large fabric most ports are quiet most microseconds,
// and visiting each of them at every instant was most of the sampler's cost, so it
// visits only the ports that queued or sent a frame since it last found them empty
// (Switch.active): an empty port that did neither has the sample it had. A switch
// runs one SampleChanges at a time.
func (s *Switch) SampleChanges(interval time.Duration, tick func(clock.Time), record func(Sample)) (stop func()) {
	type last struct {
		qlen int
		tx   uint64
	}
	prev := make([]last, len(s.ports))
	for _, p := range s.ports {
		p.markActive()
	}
	first := true
	return s.sample(interval, func(now clock.Time) {
		tick(now)
		for w, word := range s.active {
			for ; word != 0; word &= word - 1 {
				i := w*64 + bits.TrailingZeros64(word)
				p := s.ports[i]
				smp := p.sampleAt(now)
				if smp.QLen == 0 {
					s.active[w] &^= 1 << (i % 64)
				}
				if l := &prev[i]; first || smp.QLen != l.qlen || smp.TxBytes != l.tx {
					l.qlen, l.tx = smp.QLen, smp.TxBytes
					record(smp)
				}
			}
		}
		first = false
	})
}

// sample runs take at now and every interval after, on the switch's loop, until stop
// is called, and flushes what the ports it advanced sent.
func (s *Switch) sample(interval time.Duration, take func(now clock.Time)) (stop func()) {
	var t *clock.Timer
	t = s.loop.NewTimer(func() {
		// The time the sample was due, not the loop's now: on the real-time clock a late
		// loop has arrivals due in between still to handle, and advancing a port to now
		// would send without them (Port.wake). In virtual time the two are the same.
		now := t.When()
		take(now)
		s.flush()
		// A loop that fell more than an interval behind resumes sampling at its now
		// instead of replaying every sample it missed.
		t.Reset(max(now.Add(interval), s.loop.Now()))
	})
	t.Reset(s.loop.Now())
	return func() { t.Stop() }
}
