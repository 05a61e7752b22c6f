package fabric

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// BenchmarkIncast16 simulates a 16:1 incast at 100 Gb/s with PFC in virtual time on one
// goroutine; an op is one frame sent. A packet-hop is one frame crossing one link
// (sender → switch → receiver: two per frame delivered).
func BenchmarkIncast16(b *testing.B) {
	const senders = 16
	v := clock.NewVirtual(1)
	sw, hosts := star(v, senders, 100e9, 100e9, time.Microsecond, Config{ID: 1,
		Buffer: 1 << 20, SharedBuffer: true,
		ECN: ECN{Enabled: true, KMin: 100 << 10, KMax: 400 << 10, PMax: 0.2},
		PFC: PFC{Lossless: 1 << 3, XOff: 32 << 10, XOn: 16 << 10, Headroom: 64 << 10}})
	per := b.N/senders + 1
	for i := range senders {
		hosts[i].start(senders, per, clock.Time(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	v.Run()
	elapsed := time.Since(start)
	b.StopTimer()
	hops := 0
	for _, p := range sw.Ports() {
		hops += int(p.Stats().RxFrames)
	}
	hops += hosts[senders].rxFrames
	if hosts[senders].rxFrames != senders*per {
		b.Fatalf("delivered %d of %d", hosts[senders].rxFrames, senders*per)
	}
	b.ReportMetric(float64(hops)/elapsed.Seconds()/1e6, "Mhops/s")
	b.ReportMetric(float64(v.Events())/elapsed.Seconds()/1e6, "Mevents/s")
}
