package experiment

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/internal/clock"
)

// TestIncastRealTime runs a small incast under the real-time driver, in-process, at
// 10 Gb/s: every byte arrives, and the queue never exceeds what the senders' windows
// allow in flight, N·W_init·(MTU+overhead)/MTU + N packets — a bound that holds
// whatever the goroutines' scheduling delays, since a window caps the bytes in flight.
func TestIncastRealTime(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("real-time run: not under -short or the race detector, which slow the loops below real time")
	}
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize, cfg.LinkRate = 4, 200_000, 10e9
	cfg.TxLookahead = 20 * time.Microsecond
	r := clock.NewReal(clock.RealOptions{Seed: 1})
	st, err := buildStar(r, cfg.Senders+1, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	flows, _ := makeFlows(&cfg, st)
	var left atomic.Int32
	left.Store(int32(len(flows)))
	done := make(chan struct{})
	for _, f := range flows {
		if err := f.connect(st.hosts[f.Src], st.hosts[f.Dst], cfg.MTU, func(*flow) {
			if left.Add(-1) == 0 {
				close(done)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	var peak int
	bottleneck := uint16(cfg.Senders)
	stop := st.sw.Sample(10*time.Microsecond, func(s fabric.Sample) {
		if s.Port == bottleneck {
			peak = max(peak, s.QLen)
		}
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		st.hosts[f.Src].Do(func() {
			if err := f.post(); err != nil {
				f.Failed = err.Error()
			}
		})
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Error("flows did not finish within 20 s")
	}
	r.Close()
	stop()
	for _, f := range flows {
		if f.Failed != "" {
			t.Errorf("flow %d: %s", f.ID, f.Failed)
		} else if err := f.verify(); err != nil {
			t.Error(err)
		}
	}
	wInit := float64(cfg.LinkRate) * cfg.baseRTT().Seconds() / 8
	frame := float64(int(cfg.MTU) + frameOverhead(cfg.Telemetry))
	bound := int(float64(cfg.Senders) * (wInit*frame/float64(cfg.MTU) + frame))
	t.Logf("peak queue %d bytes, window bound %d", peak, bound)
	if peak > bound {
		t.Errorf("peak queue %d bytes exceeds the windows' bound %d", peak, bound)
	}
}
