package clock

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkVirtualEvents measures the discrete-event core: 64 loops, each re-arming its
// timer at a pseudo-random offset, as switch ports and pacers do.
func BenchmarkVirtualEvents(b *testing.B) {
	v := NewVirtual(1)
	remaining := b.N
	for i := range 64 {
		l := v.NewLoop("l")
		var tm *Timer
		step := Time(100 + i*7)
		tm = l.NewTimer(func() {
			if remaining--; remaining > 0 {
				tm.Reset(l.Now() + step)
			}
		})
		tm.Reset(step)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for remaining > 0 && v.Step() {
	}
	b.ReportMetric(float64(v.Events())/time.Since(start).Seconds()/1e6, "Mevents/s")
}

const timerInterval = 50 * time.Microsecond

// BenchmarkTimerError reports how late a timer fires when armed 50 µs ahead: the Real
// driver's loop, and time.Sleep as the baseline, in the same run.
func BenchmarkTimerError(b *testing.B) {
	b.Run("driver=real", func(b *testing.B) {
		r := NewReal(RealOptions{})
		l := r.NewLoop("bench")
		errs := make([]time.Duration, 0, b.N)
		done := make(chan struct{})
		var tm *Timer
		tm = l.NewTimer(func() {
			now := l.Now()
			errs = append(errs, now.Sub(tm.When()))
			if len(errs) == b.N {
				close(done)
				return
			}
			tm.Reset(now.Add(timerInterval))
		})
		l.NewTask(func() { tm.Reset(l.Now().Add(timerInterval)) }).Post()
		b.ResetTimer()
		if err := r.Start(); err != nil {
			b.Fatal(err)
		}
		<-done
		b.StopTimer()
		r.Close()
		reportPercentiles(b, errs)
	})
	b.Run("driver=time.Sleep", func(b *testing.B) {
		errs := make([]time.Duration, 0, b.N)
		for range b.N {
			start := time.Now()
			time.Sleep(timerInterval)
			errs = append(errs, time.Since(start)-timerInterval)
		}
		reportPercentiles(b, errs)
	})
}

func reportPercentiles(b *testing.B, errs []time.Duration) {
	slices.Sort(errs)
	at := func(p float64) float64 { return float64(errs[int(p*float64(len(errs)-1))]) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
