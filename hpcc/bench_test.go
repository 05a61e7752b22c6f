package hpcc

import (
	"testing"
	"time"
)

// ackTrace returns n ACKs' worth of 5-hop telemetry of a flow at ~60% utilization with
// a small queue on the third hop, so NewAck runs its full per-hop computation.
func ackTrace(n int) [][]Hop {
	trace := make([][]Hop, n)
	for i := range trace {
		hops := make([]Hop, 5)
		for j := range hops {
			ts := uint64(i) * 800
			hops[j] = Hop{TS: ts, TxBytes: ts * 15 / 2, QLen: uint64(i%7) * 1000 * uint64(j%3), Rate: 100e9,
				SwitchID: uint32(j), PortID: 1}
		}
		trace[i] = hops
	}
	return trace
}

func newBenchSender(tb testing.TB) *Sender {
	s, err := NewSender(DraftParams(100e9, 5*time.Microsecond, 16))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkNewAck5Hops measures one per-ACK HPCC++ update with 5 hops of telemetry.
func BenchmarkNewAck5Hops(b *testing.B) {
	trace := ackTrace(1024)
	s := newBenchSender(b)
	b.ReportAllocs()
	var seq uint64
	for i := 0; b.Loop(); i++ {
		seq += 1000
		s.NewAck(seq, seq+60000, trace[i%len(trace)])
	}
}

// TestNewAckAllocs holds NewAck to zero allocations once the path length is known.
func TestNewAckAllocs(t *testing.T) {
	trace := ackTrace(64)
	s := newBenchSender(t)
	s.NewAck(0, 60000, trace[0])
	i := 1
	allocs := testing.AllocsPerRun(1000, func() {
		s.NewAck(uint64(i)*1000, uint64(i)*1000+60000, trace[i%len(trace)])
		i++
	})
	if allocs != 0 {
		t.Errorf("NewAck allocates %v times per call, want 0", allocs)
	}
}
