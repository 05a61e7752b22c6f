package capture

import (
	"io"
	"testing"
	"time"
)

// BenchmarkMonitorCapture: what one captured 1 KiB frame costs, the node's copy and
// the writer's pcapng together (the writer drains to io.Discard; the benchmark waits
// whenever half the backlog is queued, so it measures the writer's pace).
func BenchmarkMonitorCapture(b *testing.B) {
	_, m, _, _, _, pool := monitored(b)
	s, err := m.Start(io.Discard, time.Time{}, 0)
	if err != nil {
		b.Fatal(err)
	}
	fs := frames(pool, 16, 0, 1)
	for _, f := range fs {
		if _, err := f.SetLen(1024); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1024)
	b.ResetTimer()
	for i := 0; i < b.N; i += len(fs) {
		for s.queued.Load() > s.backlog/2 {
			time.Sleep(time.Millisecond)
		}
		s.record(fs, &outbound)
	}
	if err := s.Stop(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(s.Dropped()), "dropped")
}
