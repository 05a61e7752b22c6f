package fabric

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// TestSampling samples the bottleneck port of the 2:1 feed every microsecond: queue
// length and tx bytes follow the model.
func TestSampling(t *testing.T) {
	v := clock.NewVirtual(1)
	sw, hosts := star(v, 1, 200e9, 100e9, 0, Config{})
	var series Series
	stop := sw.Sample(time.Microsecond, series.Record)
	hosts[0].start(1, 1000, 1) // 1 ns late: no event coincides with a sample
	v.RunUntil(clock.Time(50 * time.Microsecond))
	stop()
	v.Run()
	const first = 41 // ns: the first frame's arrival
	checked := 0
	for _, s := range series.Samples {
		if s.Port != 1 || s.Time < first || s.Time >= first+40*1000 {
			continue
		}
		// At time T the frames arrived are those with first+40j ≤ T; departed
		// (started) those with first+80k ≤ T.
		arrived := int((s.Time-first)/40) + 1
		started := int((s.Time-first)/80) + 1
		if s.QLen != (arrived-started)*1000 || s.TxBytes != uint64(started*1000) {
			t.Fatalf("at %v: qlen %d tx %d, want %d %d", s.Time, s.QLen, s.TxBytes, (arrived-started)*1000, started*1000)
		}
		checked++
	}
	if checked < 30 {
		t.Fatalf("only %d samples checked", checked)
	}
}

// TestSamplingSomePorts: a sampler given ports records those only, every interval.
func TestSamplingSomePorts(t *testing.T) {
	v := clock.NewVirtual(1)
	sw, _ := star(v, 1, 200e9, 100e9, 0, Config{})
	var series Series
	stop := sw.Sample(time.Microsecond, series.Record, 1, 99)
	v.RunUntil(clock.Time(10 * time.Microsecond))
	stop()
	if len(series.Samples) != 11 {
		t.Fatalf("%d samples in 10 µs at 1 µs, want 11", len(series.Samples))
	}
	for i, s := range series.Samples {
		if s.Port != 1 || s.Time != clock.Time(i)*clock.Time(time.Microsecond) {
			t.Errorf("sample %d: port %d at %v", i, s.Port, s.Time)
		}
	}
}
