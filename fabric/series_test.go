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

// TestSampleChanges: a change sampler, running beside a full one on the same switch,
// ticks at every instant the full one samples and reports exactly the full one's
// samples that differ from the port's sample before (every port at the first
// instant): the full series is the change points repeated, and an idle port is
// reported once.
func TestSampleChanges(t *testing.T) {
	// At 100 Gb/s a frame is on the wire for less than a sampling interval; at 1 Gb/s
	// for eight, so a frame arrives at a port with an empty queue and a busy wire and
	// queues without being sent: a port the sampler last found empty must be visited
	// again for it.
	// With PFC the senders' ports, which carry nothing else, send pause frames without
	// queueing them.
	pfc := Config{PFC: PFC{Lossless: 1 << 3, XOff: 8 << 10, XOn: 4 << 10, Headroom: 32 << 10}}
	for _, c := range []struct {
		name string
		rate uint64
		cfg  Config
	}{{"100Gbps", 100e9, Config{}}, {"1Gbps", 1e9, Config{}}, {"PFC", 100e9, pfc}} {
		t.Run(c.name, func(t *testing.T) { testSampleChanges(t, c.rate, c.cfg) })
	}
}

func testSampleChanges(t *testing.T, rate uint64, cfg Config) {
	v := clock.NewVirtual(1)
	sw, hosts := star(v, 2, rate, rate, 0, cfg)
	var all, changes Series
	var ticks []clock.Time
	stopAll := sw.Sample(time.Microsecond, all.Record)
	stopChanges := sw.SampleChanges(time.Microsecond, func(now clock.Time) { ticks = append(ticks, now) }, changes.Record)
	// One sender alone (port 2 sends, its queue stays empty), then two (it queues),
	// then every port idle.
	hosts[0].start(2, 200, 1)
	hosts[1].start(2, 50, clock.Time(10*time.Microsecond))
	v.RunUntil(clock.Time(60 * time.Microsecond))
	stopAll()
	stopChanges()
	v.Run()
	ports := len(sw.Ports())
	var want []Sample
	prev := map[uint16]Sample{}
	for i, s := range all.Samples {
		if i%ports == 0 && (len(ticks) <= i/ports || ticks[i/ports] != s.Time) {
			t.Fatalf("no tick at %v", s.Time)
		}
		if p, ok := prev[s.Port]; !ok || p.QLen != s.QLen || p.TxBytes != s.TxBytes {
			want = append(want, s)
		}
		prev[s.Port] = s
	}
	if len(ticks) != len(all.Samples)/ports {
		t.Fatalf("%d ticks for %d instants", len(ticks), len(all.Samples)/ports)
	}
	if len(changes.Samples) != len(want) {
		t.Fatalf("%d changes reported, want %d", len(changes.Samples), len(want))
	}
	for i := range want {
		if changes.Samples[i] != want[i] {
			t.Fatalf("change %d: %+v, want %+v", i, changes.Samples[i], want[i])
		}
	}
	if len(want) >= len(all.Samples)/2 {
		t.Fatalf("%d of %d samples changed: the test needs idle ports", len(want), len(all.Samples))
	}
	if cfg.PFC.Lossless != 0 && sw.Ports()[0].Stats().PauseSent == 0 {
		t.Fatal("no pause frame sent")
	}
}
