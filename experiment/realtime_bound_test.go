package experiment

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/internal/clock"
)

// TestIncastQueueBoundRealTime runs a 4:1 incast under the real-time driver, in-process, at 1
// and 10 Gb/s, with real payload: every byte arrives intact, nothing is dropped, and the
// queue never exceeds what the senders' windows allow in flight,
// N·W_init·(MTU+overhead)/MTU + N packets.
//
// Nothing here depends on timer precision: the switch computes queue lengths and
// departures from the model, and a window caps the bytes in flight however late the
// goroutines run, so the assertions hold on a loaded machine. The time limit only
// catches hangs. The race detector slows the loops too far below real time, so `make
// unit` runs this test a second time without it (go test -run RealTime).
func TestIncastQueueBoundRealTime(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("real-time run: not under -short or the race detector, which slow the loops below real time")
	}
	for _, rate := range []uint64{1e9, 10e9} {
		t.Run(fmt.Sprintf("%dGbps", rate/1e9), func(t *testing.T) { queueBoundRealTime(t, rate) })
	}
}

func queueBoundRealTime(t *testing.T, rate uint64) {
	const limit = 60 * time.Second
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize, cfg.LinkRate = 4, 200_000, rate
	cfg.TxLookahead = 20 * time.Microsecond
	cfg.Verify = true // real payload, checked byte for byte, through loops on several threads
	r := clock.NewReal(clock.RealOptions{Seed: 1})
	st, err := buildStar(r, cfg.Senders+1, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	flows := makeFlows(&cfg)
	var left atomic.Int32
	left.Store(int32(len(flows)))
	done := make(chan struct{})
	for _, f := range flows {
		if err := f.connect(st.hosts[f.Src], st.hosts[f.Dst], &cfg, func(*flow) {
			if left.Add(-1) == 0 {
				close(done)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	var peak, samples int
	bottleneck := uint16(cfg.Senders)
	stop := st.sw.Sample(10*time.Microsecond, func(s fabric.Sample) {
		if s.Port == bottleneck {
			peak = max(peak, s.QLen)
			samples++
		}
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, f := range flows {
		st.hosts[f.Src].Do(func() {
			if err := f.post(); err != nil {
				f.Failed = err.Error()
			}
		})
	}
	select {
	case <-done:
	case <-time.After(limit):
		t.Errorf("flows did not finish within %v: hung", limit)
	}
	elapsed := time.Since(start)
	r.Close() // stops every loop: their state may be read from here on
	stop()
	for _, f := range flows {
		if f.Failed != "" {
			t.Errorf("flow %d: %s", f.ID, f.Failed)
		} else if err := f.verify(); err != nil {
			t.Error(err)
		}
	}
	for i, p := range st.sw.Ports() {
		if d := p.Stats().Drops; d != 0 {
			t.Errorf("switch port %d dropped %d frames", i, d)
		}
	}
	wInit := float64(cfg.LinkRate) * cfg.baseRTT().Seconds() / 8
	frame := float64(int(cfg.MTU) + frameOverhead(cfg.Telemetry))
	bound := int(float64(cfg.Senders) * (wInit*frame/float64(cfg.MTU) + frame))
	ideal := time.Duration(float64(cfg.Senders*cfg.FlowSize) * 8 / float64(cfg.LinkRate) * 1e9)
	t.Logf("%v for %v of data at line rate; peak queue %d bytes (%d samples), window bound %d",
		elapsed.Round(time.Microsecond), ideal, peak, samples, bound)
	if peak > bound {
		t.Errorf("peak queue %d bytes exceeds the windows' bound %d", peak, bound)
	}
}
