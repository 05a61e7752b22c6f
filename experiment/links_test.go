package experiment

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
)

// TestReplayFiles: a small incast writes what a replay needs. topology.yaml reads back
// as the star it ran (4 senders, a receiver, s1); links.csv has every port at every
// rate sample, and its bottleneck rows are queue.csv's sample at the row's sampled_ns,
// the instant itself or at most one sample interval before; rates.csv gives every running flow its bytes in flight and HPCC++'s U.
func TestReplayFiles(t *testing.T) {
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize = 4, 100_000
	res := runOK(t, cfg)
	dir := t.TempDir()
	if err := res.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	yml, err := os.ReadFile(filepath.Join(dir, "topology.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.Parse(yml)
	if err != nil {
		t.Fatalf("topology.yaml does not parse: %v\n%s", err, yml)
	}
	if len(tp.Hosts) != 5 || len(tp.Switches) != 1 || tp.Switches[0].Name != "s1" || len(tp.Links) != 5 ||
		tp.Links[4].Endpoints != [2]string{"h5", "s1"} || tp.Links[4].Rate != cfg.LinkRate {
		t.Errorf("topology.yaml is not the 4:1 star:\n%s", yml)
	}

	instants := len(slices.Collect(res.DeliveredSamples()))
	links := readCSV(t, filepath.Join(dir, "links.csv"))
	if got, want := len(links)-1, 5*instants; got != want {
		t.Fatalf("links.csv has %d rows, want 5 ports × %d rate samples", got, instants)
	}
	queue := readCSV(t, filepath.Join(dir, "queue.csv"))[1:]
	busy := 0
	for _, row := range links[1:] {
		if row[1] != "s1:p4" {
			continue
		}
		at, _ := strconv.ParseInt(row[0], 10, 64)
		sampled, _ := strconv.ParseInt(row[2], 10, 64)
		if sampled > at || at-sampled > cfg.Sample.Nanoseconds() {
			t.Fatalf("links.csv row %v: sampled %d ns, not within %v before %d ns", row, sampled, cfg.Sample, at)
		}
		var q []string
		for _, s := range queue {
			if s[0] == row[2] {
				q = s
			}
		}
		if q == nil || q[1] != row[3] || q[2] != row[4] {
			t.Fatalf("links.csv's bottleneck at %d ns is %v; queue.csv's sample at %s ns %v", at, row, row[2], q)
		}
		if row[3] != "0" {
			busy++
		}
	}
	if busy == 0 {
		t.Error("links.csv never shows the bottleneck's queue")
	}

	rates := readCSV(t, filepath.Join(dir, "rates.csv"))
	if got := rates[0]; got[5] != "inflight_bytes" || got[6] != "hpcc_u" {
		t.Fatalf("rates.csv header %v", got)
	}
	withU, inflight := 0, 0
	for _, row := range rates[1:] {
		if row[6] != "" {
			if u, err := strconv.ParseFloat(row[6], 64); err != nil || u < 0 {
				t.Errorf("rates.csv row %v: U %q", row, row[6])
			}
			withU++
		}
		if row[5] != "0" {
			inflight++
		}
	}
	if withU == 0 || inflight == 0 {
		t.Errorf("rates.csv: %d rows with U, %d with bytes in flight, of %d", withU, inflight, len(rates)-1)
	}
}

// TestPortSeriesDense: a port's series kept as change points gives back, over the
// whole run and over any window, exactly the samples the switch took, and only the
// samples that differ from their predecessor take memory.
func TestPortSeriesDense(t *testing.T) {
	const every = 100
	rng := rand.New(rand.NewPCG(1, 2))
	var sw sampling
	p := newPortSeries(every, &sw, nil)
	var taken []QueueSample
	q, tx := 0, uint64(0)
	for i := range 1000 {
		changed := i == 0
		if rng.IntN(4) == 0 { // idle stretches repeat the sample before
			q = rng.IntN(3) * 1000
			tx += uint64(rng.IntN(2) * 1500)
			changed = true
		}
		s := fabric.Sample{Time: clock.Time(50 + i*every), QLen: q, TxBytes: tx}
		sw.tick(s.Time)
		if changed || rng.IntN(2) == 0 { // as SampleChanges reports, or more often
			p.record(s)
		}
		taken = append(taken, QueueSample{T: s.Time, Bytes: s.QLen, TxBytes: s.TxBytes})
	}
	if !slices.Equal(slices.Collect(p.all()), taken) {
		t.Fatal("the dense series differs from the samples taken")
	}
	if p.changes.len() >= len(taken)/2 {
		t.Errorf("%d change points for %d samples", p.changes.len(), len(taken))
	}
	for range 200 {
		from := clock.Time(rng.IntN(110_000))
		w := span{from: from, to: from + clock.Time(rng.IntN(50_000))}
		if got, want := slices.Collect(p.samples(w.from, w.to)), slices.Collect(queueOver(slices.Values(taken), w)); !slices.Equal(got, want) {
			t.Fatalf("window %v–%v: %d samples, want %d", w.from, w.to, len(got), len(want))
		}
	}
}

// TestLinkTable: links.csv's rows, derived from the ports' change points and each
// switch's latest sampling instant at every rate sample, are every sampled port's
// latest sample at each rate sample, as if copied then; switches sample on their own
// instants, and a switch not sampled yet has no rows.
func TestLinkTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const switches, perSwitch = 3, 4
	series := make([]portSeries, switches*perSwitch)
	sampled := make([]sampling, switches)
	var l linkTable
	for i := range series {
		series[i] = newPortSeries(100, &sampled[i/perSwitch], nil)
		l.add(fmt.Sprintf("s%d:p%d", i/perSwitch+1, i%perSwitch), i/perSwitch, &series[i])
	}
	latest := make([]*LinkSample, len(series))
	var want []LinkSample
	for step := range 3000 {
		now := clock.Time(step * 10)
		if sw := step % 10; sw < switches && now >= clock.Time(sw*300) { // switch sw samples every 100 ns from sw·300
			sampled[sw].tick(now)
			for j := range perSwitch {
				i := sw*perSwitch + j
				q, tx := rng.IntN(2)*1000, uint64(step/(1+rng.IntN(3))*100)
				if latest[i] == nil || q != latest[i].Bytes || tx != latest[i].TxBytes { // as SampleChanges reports
					series[i].record(fabric.Sample{Time: now, QLen: q, TxBytes: tx})
				}
				latest[i] = &LinkSample{Port: l.ports[i].name, Sampled: now, Bytes: q, TxBytes: tx}
			}
		}
		if step%37 == 0 { // a rate sample
			l.record(now)
			for _, s := range latest {
				if s != nil {
					r := *s
					r.T = now
					want = append(want, r)
				}
			}
		}
	}
	var got []LinkSample
	l.each(func(s LinkSample) { got = append(got, s) })
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []LinkSample) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestEachPortQueue: port_queues.csv's rows, merged from the ports' change points as
// they are read, are every port's queue where it changed from the port's sample
// before, in time order and, at one instant, in port order — what appending each
// port's changes and sorting them all stably by time gave. Ports are sampled at
// different instants (two switches) and many samples change only the bytes sent.
func TestEachPortQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const ports = 6
	series := make([]portSeries, ports)
	info := &MixInfo{}
	perPort := make([][]PortQueueSample, ports)
	var sampled sampling
	for i := range series {
		series[i] = newPortSeries(100, &sampled, nil)
		info.ports = append(info.ports, &series[i])
	}
	q := make([]int, ports)
	tx := make([]uint64, ports)
	for step := range 3000 {
		now := clock.Time(step * 50)
		for i := range series {
			if (now+clock.Time(i/3*50))%100 != 0 { // ports 0–2 sample on even steps, 3–5 on odd ones
				continue
			}
			switch rng.IntN(4) {
			case 0:
				q[i] = rng.IntN(3) * 1000
			case 1:
				tx[i] += 1500
			}
			if !series[i].seen || q[i] != series[i].latest.Bytes {
				perPort[i] = append(perPort[i], PortQueueSample{T: now, Port: i, Bytes: q[i]})
			}
			series[i].record(fabric.Sample{Time: now, QLen: q[i], TxBytes: tx[i]})
		}
	}
	var want []PortQueueSample
	for _, p := range perPort {
		want = append(want, p...)
	}
	slices.SortStableFunc(want, func(a, b PortQueueSample) int { return int(a.T - b.T) })
	var got []PortQueueSample
	info.EachPortQueue(func(s PortQueueSample) { got = append(got, s) })
	if !slices.Equal(got, want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
}

// TestRateLog: a virtual-time run's rate samples read back from their scratch file
// exactly as taken, after those of Result.Rates.
func TestRateLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	res := &Result{Rates: []RateSample{{T: 1, Flow: 2, Rate: 3}}}
	want := slices.Clone(res.Rates)
	for i := range 10_000 {
		s := RateSample{T: clock.Time(i * 25), Flow: rng.IntN(300), Rate: rng.Float64() * 1e11, Window: rng.NormFloat64(),
			Measured: rng.ExpFloat64(), InFlight: rng.Uint64(), HasU: i%3 == 0}
		if s.HasU {
			s.U = rng.Float64()
		}
		res.rates.add(s)
		want = append(want, s)
	}
	for range 2 { // reading does not consume
		var got []RateSample
		if err := res.EachRate(func(s RateSample) { got = append(got, s) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d samples, want %d", len(got), len(want))
		}
	}
}

// TestChangeLogSpills: a changeLog with a scratch file holds at most about
// spillChunk bytes in memory however long it grows, and walks back every change it
// was given, in order, from its spilled segments and its chunks; two logs spilling
// into one file at once (the parallel driver's ports, on their partitions' threads)
// keep their own.
func TestChangeLogSpills(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	spill := new(scratch)
	logs := []changeLog{{spill: spill}, {spill: spill}}
	var added [2][]QueueSample
	var q [2]QueueSample
	for range 200_000 {
		i := rng.IntN(2)
		q[i].T += clock.Time(1 + rng.IntN(200))
		q[i].Bytes = rng.IntN(1 << 20)
		q[i].TxBytes += uint64(rng.IntN(5000))
		added[i] = append(added[i], q[i])
	}
	var wg sync.WaitGroup // each log from its own goroutine, as partitions record
	for i := range logs {
		wg.Go(func() {
			for _, q := range added[i] {
				logs[i].add(q)
			}
		})
	}
	wg.Wait()
	if err := spill.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		l := &logs[i]
		held := 0
		for _, c := range l.chunks {
			held += cap(c)
		}
		if held > spillChunk || len(l.segments) == 0 {
			t.Errorf("log %d: %d bytes in memory in %d chunks, %d segments spilled; want at most %d bytes", i, held,
				len(l.chunks), len(l.segments), spillChunk)
		}
		var got []QueueSample
		for c := l.cursor(); c.ahead; c.step() {
			got = append(got, c.next)
		}
		if !slices.Equal(got, added[i]) {
			t.Errorf("log %d: walked %d changes, differing from the %d added", i, len(got), len(added[i]))
		}
	}
}

// TestVarintMatchesBinary holds varint to binary.Varint on every encoding of values
// around each length's bounds, on random values, and on cut-off and empty input.
func TestVarintMatchesBinary(t *testing.T) {
	var values []int64
	for shift := range 64 {
		for _, d := range []int64{-2, -1, 0, 1, 2} {
			values = append(values, 1<<shift+d, -(1<<shift)+d)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		values = append(values, int64(r.Uint64())>>r.IntN(64))
	}
	for _, v := range values {
		b := binary.AppendVarint(nil, v)
		for _, in := range [][]byte{b, append(b, 0x55), b[:len(b)-1], nil} {
			gv, gn := varint(in)
			wv, wn := binary.Varint(in)
			if gv != wv || gn != wn {
				t.Fatalf("varint(%x) = %d, %d; binary.Varint %d, %d", in, gv, gn, wv, wn)
			}
		}
	}
}
