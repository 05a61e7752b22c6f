package fabric

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
)

// recordingStamper stamps every RoCEv2 frame whose DSCP is dscp: it records the hop and,
// when grow is set, appends 8 bytes at the end (as a tail-stacked format would).
type recordingStamper struct {
	dscp uint8
	grow bool
	hops []hpcc.Hop
	hdr  Headers
}

func (r *recordingStamper) Stamp(f *link.Frame, hop hpcc.Hop) (bool, error) {
	if err := r.hdr.Parse(f.Bytes()); err != nil {
		return false, err
	}
	if r.hdr.DstPort != 4791 || r.hdr.DSCP != r.dscp {
		return false, nil
	}
	r.hops = append(r.hops, hop)
	if r.grow {
		gap, err := f.Grow(f.Len(), 8)
		if err != nil {
			return false, err
		}
		binary.BigEndian.PutUint64(gap, hop.TS)
	}
	return true, nil
}

// TestBottleneckQueueAndStamps feeds a 100 Gb/s port at 200 Gb/s: the queue must grow by
// exactly one frame per departure (the slope (200−100) Gb/s), then drain at line rate,
// and every stamped hop must equal the model's values.
func TestBottleneckQueueAndStamps(t *testing.T) {
	const n, size = 2000, 1000
	const delay = time.Microsecond
	v := clock.NewVirtual(1)
	st := &recordingStamper{dscp: 26}
	sw, hosts := star(v, 1, 200e9, 100e9, delay, Config{ID: 7, Stamper: st})
	var arrivals []clock.Time
	hosts[1].onRx = func(f *link.Frame) { arrivals = append(arrivals, f.Time) }
	hosts[0].start(1, n, 0)
	v.Run()

	ser := link.Serialization(size, 100e9) // 80 ns
	first := clock.Time(link.Serialization(size, 200e9) + delay)
	if len(st.hops) != n || len(arrivals) != n {
		t.Fatalf("stamped %d, delivered %d, want %d", len(st.hops), len(arrivals), n)
	}
	for k, hop := range st.hops {
		// Frame j arrives at first+40j ns. Frame k departs at first+80k; a frame
		// arriving at that very instant is not yet counted, so min(2k, n) have
		// arrived and k+1 have left.
		queued := min(2*k, n) - (k + 1)
		if k == 0 {
			queued = 0
		}
		want := hpcc.Hop{
			TS:       uint64(first.Add(time.Duration(k) * ser)),
			QLen:     uint64(queued * size),
			TxBytes:  uint64(k * size),
			Rate:     100e9,
			SwitchID: 7,
			PortID:   1,
		}
		if hop != want {
			t.Fatalf("hop %d = %+v, want %+v", k, hop, want)
		}
		if at := first.Add(time.Duration(k+1)*ser + delay); arrivals[k] != at {
			t.Fatalf("frame %d arrived at %v, want %v (line rate)", k, arrivals[k], at)
		}
	}
	// Slope while both ends run: +1000 B per 80 ns = 100 Gb/s of growth.
	mid := st.hops[n/2-1]
	slope := float64(mid.QLen-st.hops[1].QLen) * 8 / float64(mid.TS-st.hops[1].TS)
	t.Logf("queue growth %.3f Gb/s, peak %d B, drain at %v per frame", slope, mid.QLen, ser)
	if p := sw.Ports()[1].Stats(); p.TxFrames != n || p.Stamped != n || p.QLen != 0 || p.Drops != 0 {
		t.Fatalf("port stats %+v", p)
	}
}

// TestQueueArea: the port's ∫ queue dt (QueueArea) equals the integral of a simple
// reference — the queue rebuilt from the frames' arrival and departure times of
// TestBottleneckQueueAndStamps's 200-into-100 Gb/s run (frame j arrives at first+40j
// ns and departs at first+80j) — at the last departure and after it.
func TestQueueArea(t *testing.T) {
	const n, size = 2000, 1000
	const delay = time.Microsecond
	v := clock.NewVirtual(1)
	sw, hosts := star(v, 1, 200e9, 100e9, delay, Config{})
	hosts[0].start(1, n, 0)
	v.Run()

	first := clock.Time(link.Serialization(size, 200e9) + delay)
	type change struct {
		at    clock.Time
		bytes int
	}
	var changes []change
	for j := range n {
		changes = append(changes, change{first.Add(time.Duration(j) * 40), size}, change{first.Add(time.Duration(j) * 80), -size})
	}
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].at < changes[b].at })
	var want uint64
	queued, at := 0, clock.Time(0)
	for _, c := range changes {
		want += uint64(queued) * uint64(c.at-at)
		queued, at = queued+c.bytes, c.at
	}
	port := sw.Ports()[1]
	last := first.Add(time.Duration(n-1) * 80)
	if got := port.QueueArea(last); got != want {
		t.Errorf("queue area at the last departure %d byte·ns, want %d", got, want)
	}
	if got := port.QueueArea(last.Add(time.Millisecond)); got != want {
		t.Errorf("queue area a millisecond after the queue emptied %d byte·ns, want %d (unchanged)", got, want)
	}
	t.Logf("time-averaged queue over the %v of traffic: %.0f B", time.Duration(last), float64(want)/float64(last))
}

// TestStampGrowth lets the stamper grow frames: the grown length goes on the wire and
// into the byte counter the next hop reports.
func TestStampGrowth(t *testing.T) {
	v := clock.NewVirtual(1)
	st := &recordingStamper{dscp: 26, grow: true}
	sw, hosts := star(v, 1, 100e9, 100e9, 0, Config{ID: 1, Stamper: st})
	var lens []int
	hosts[1].onRx = func(f *link.Frame) { lens = append(lens, f.Len()) }
	hosts[0].start(1, 3, 0)
	v.Run()
	for k, hop := range st.hops {
		if hop.TxBytes != uint64(k*1008) || lens[k] != 1008 {
			t.Fatalf("hop %d txBytes %d, frame %d bytes", k, hop.TxBytes, lens[k])
		}
	}
	if sw.Ports()[1].TxBytes() != 3*1008 {
		t.Fatalf("tx bytes %d", sw.Ports()[1].TxBytes())
	}
}

// rejectingStamper finds every frame's telemetry malformed.
type rejectingStamper struct{}

func (rejectingStamper) Stamp(*link.Frame, hpcc.Hop) (bool, error) {
	return false, errors.New("malformed telemetry")
}

// TestStampErrorForwards: a frame the stamper rejects is counted and forwarded
// unstamped, unchanged — never dropped.
func TestStampErrorForwards(t *testing.T) {
	v := clock.NewVirtual(1)
	sw, hosts := star(v, 1, 100e9, 100e9, 0, Config{ID: 1, Stamper: rejectingStamper{}})
	var lens []int
	hosts[1].onRx = func(f *link.Frame) { lens = append(lens, f.Len()) }
	hosts[0].start(1, 3, 0)
	v.Run()
	if len(lens) != 3 || lens[0] != 1000 {
		t.Fatalf("received %v, want 3 frames of 1000 bytes", lens)
	}
	if p := sw.Ports()[1].Stats(); p.StampErrors != 3 || p.Stamped != 0 || p.TxFrames != 3 {
		t.Fatalf("stamp errors %d, stamped %d, tx %d", p.StampErrors, p.Stamped, p.TxFrames)
	}
}

// lateEndpoint hands the switch its port's frames once per period, late, as a
// real-time loop that wakes once per period does: the frames keep their arrival times.
type lateEndpoint struct {
	link.Endpoint
	period time.Duration
	rx     link.Receiver
	held   []*link.Frame
	timer  *clock.Timer
}

func (e *lateEndpoint) Attach(loop clock.Loop, rx link.Receiver) {
	e.rx = rx
	e.timer = loop.NewTimer(func() {
		e.rx.Receive(e.held)
		e.held = e.held[:0]
	})
	e.Endpoint.Attach(loop, e)
}

func (e *lateEndpoint) Receive(frames []*link.Frame) {
	e.held = append(e.held, frames...)
	if !e.timer.Pending() {
		e.timer.Reset(e.held[0].Time.Add(e.period))
	}
}

// TestLateArrivalsKeepTheirTimes: in real time the switch's loop sees a frame after its
// arrival time whenever it wakes late, while the egress model has moved on (its own
// timer or a sampler advanced it). A port with nothing queued must still send such a
// frame at its arrival, as it would have: no queue is invented and no wire time lost.
// One sender at the bottleneck's rate, its frames handed to the switch 30 µs late in
// batches, a sampler advancing the model every microsecond: every frame leaves the
// moment it arrived, with a zero queue in its stamp.
func TestLateArrivalsKeepTheirTimes(t *testing.T) {
	const n, size = 20, 1000
	v := clock.NewVirtual(1)
	st := &recordingStamper{dscp: 26}
	sw, hosts := starWith(v, 1, link.Config{Rate: 1e9}, 1e9, Config{ID: 1, Stamper: st},
		func(i int, ep link.Endpoint) link.Endpoint {
			if i == 0 {
				return &lateEndpoint{Endpoint: ep, period: 30 * time.Microsecond}
			}
			return ep
		})
	stop := sw.Sample(time.Microsecond, func(Sample) {})
	hosts[0].start(1, n, 0)
	v.RunFor(time.Millisecond)
	stop()
	ser := link.Serialization(size, 1e9)
	if len(st.hops) != n {
		t.Fatalf("stamped %d frames, want %d", len(st.hops), n)
	}
	for k, hop := range st.hops {
		// Frame k's last bit reaches the switch at (k+1)·ser; it leaves then.
		if want := uint64(time.Duration(k+1) * ser); hop.TS != want || hop.QLen != 0 {
			t.Fatalf("frame %d left at %v with %d bytes queued; it arrived at %v to an idle port",
				k, time.Duration(hop.TS), hop.QLen, time.Duration(want))
		}
	}
}

// TestLateArrivalsStillQueue: two senders at the bottleneck's rate, each link's frames
// handed to the switch 30 µs late in batches (a late real-time loop sees one link's
// frames before the other's, each after its arrival). The port must queue what waits
// for the wire, as with every frame on time: before, a late frame at a port with
// nothing queued was put on the wire at once, however long the wire was busy, which
// moved the port's model ahead of every later arrival, so that each frame after took
// the same path and the queue, its samples, its telemetry and its ECN marks stayed at
// zero (the lab's DCQCN queue of 0 B in some runs, 7 KB in others). By hand: 2 × 40
// frames of 1000 B at 1 Gb/s into 1 Gb/s build a queue of one frame per 16 µs for
// 640 µs; the time-averaged queue late must be at least 80 % of the one on time.
func TestLateArrivalsStillQueue(t *testing.T) {
	const n = 40
	run := func(late bool) (area uint64, end clock.Time) {
		v := clock.NewVirtual(1)
		sw, hosts := starWith(v, 2, link.Config{Rate: 1e9}, 1e9, Config{ID: 1},
			func(i int, ep link.Endpoint) link.Endpoint {
				if late && i < 2 {
					return &lateEndpoint{Endpoint: ep, period: 30 * time.Microsecond}
				}
				return ep
			})
		var last clock.Time
		hosts[2].onRx = func(f *link.Frame) { last = f.Time }
		hosts[0].start(2, n, 0)
		hosts[1].start(2, n, 0)
		v.RunFor(10 * time.Millisecond)
		if hosts[2].rxFrames != 2*n {
			t.Fatalf("late %v: %d frames delivered, want %d", late, hosts[2].rxFrames, 2*n)
		}
		return sw.Ports()[2].QueueArea(last), last
	}
	onTime, onEnd := run(false)
	late, lateEnd := run(true)
	t.Logf("time-averaged queue %.0f B on time, %.0f B late; last frame at %v and %v",
		float64(onTime)/float64(onEnd), float64(late)/float64(lateEnd), time.Duration(onEnd), time.Duration(lateEnd))
	if late < onTime*8/10 {
		t.Errorf("queue area %d byte·ns with late arrivals, %d on time: the late port hid its queue", late, onTime)
	}
	if lateEnd != onEnd {
		t.Errorf("last frame delivered at %v late, %v on time: want the same wire time", time.Duration(lateEnd), time.Duration(onEnd))
	}
}

// TestECMPSpread sends one frame for each of 1000 flows (RoCEv2 source ports) to a
// destination reachable over 4 ports: each must carry 250 ± 10%.
func TestECMPSpread(t *testing.T) {
	const flows, paths = 1000, 4
	v := clock.NewVirtual(1)
	sw, hosts := star(v, paths, 100e9, 100e9, 0, Config{HashSeed: 0x5eed})
	dst := hostMAC(99)
	sw.SetRoute(dst, []uint16{1, 2, 3, 4})
	src := hosts[0]
	src.sport = func(seq int) uint16 { return uint16(0xC000 | seq*7) } // as rxe: from the QPN
	src.start(99, flows, 0)
	v.Run()
	for p := 1; p <= paths; p++ {
		got := sw.Ports()[p].Stats().TxFrames
		t.Logf("path %d: %d flows", p, got)
		if math.Abs(float64(got)-flows/paths) > 0.1*flows/paths {
			t.Errorf("path %d carries %d of %d flows, want %d ± 10%%", p, got, flows, flows/paths)
		}
	}
}

// TestPFCIncast: 16 senders at 100 Gb/s into one 100 Gb/s port. With a shared buffer
// and tail drop, frames are lost (and counted); with PFC on the data priority, none is.
func TestPFCIncast(t *testing.T) {
	const senders, perSender = 16, 500
	run := func(cfg Config) (sent, delivered int, drops uint64, pauses uint64) {
		v := clock.NewVirtual(3)
		sw, hosts := star(v, senders, 100e9, 100e9, time.Microsecond, cfg)
		for i := range senders {
			hosts[i].start(senders, perSender, 0)
		}
		v.Run()
		for _, p := range sw.Ports() {
			s := p.Stats()
			drops += s.Drops
			pauses += s.PauseSent
		}
		return senders * perSender, hosts[senders].rxFrames, drops, pauses
	}
	sent, got, drops, _ := run(Config{Buffer: 256 << 10, SharedBuffer: true})
	t.Logf("tail drop: sent %d, delivered %d, dropped %d", sent, got, drops)
	if drops == 0 || uint64(sent-got) != drops {
		t.Errorf("tail drop: sent %d delivered %d counted drops %d", sent, got, drops)
	}
	sent, got, drops, pauses := run(Config{Buffer: 256 << 10, SharedBuffer: true,
		PFC: PFC{Lossless: 1 << 3, XOff: 8 << 10, XOn: 4 << 10, Headroom: 32 << 10}})
	t.Logf("PFC: sent %d, delivered %d, dropped %d, pause frames %d", sent, got, drops, pauses)
	if drops != 0 || got != sent || pauses == 0 {
		t.Errorf("PFC: sent %d delivered %d drops %d pauses %d", sent, got, drops, pauses)
	}
}

// TestECNMarking: with KMin 0 and KMax 1 B every ECN-capable frame leaving a non-empty
// queue is marked CE with a valid IPv4 checksum; not-ECT frames are never marked.
func TestECNMarking(t *testing.T) {
	for _, ecn := range []uint8{0, 2} {
		v := clock.NewVirtual(1)
		sw, hosts := star(v, 1, 200e9, 100e9, 0, Config{ECN: ECN{Enabled: true, KMin: 0, KMax: 1, PMax: 1}})
		ce, badSum := 0, 0
		var h Headers
		hosts[1].onRx = func(f *link.Frame) {
			b := f.Bytes()
			h.Parse(b)
			if h.ECN == 3 {
				ce++
			}
			if binary.BigEndian.Uint16(b[24:]) != ipv4Checksum(b[14:34]) {
				badSum++
			}
		}
		hosts[0].ecn = ecn
		hosts[0].start(1, 100, 0)
		v.Run()
		marks := sw.Ports()[1].Stats().ECNMarks
		want := 0
		if ecn != 0 {
			// Frames 0, 1 and 99 leave an empty queue (see the bottleneck test's
			// model: frame k leaves min(2k, n) − (k+1) frames behind).
			want = 100 - 3
		}
		if ce != want || marks != uint64(want) || badSum != 0 {
			t.Errorf("ECN %d: %d CE frames, %d counted, want %d; %d bad checksums", ecn, ce, marks, want, badSum)
		}
	}
}

// TestFloodAndLearn: an unknown destination floods along the spanning tree only; the
// reply's source is learned, so the next frame to it goes out one port.
func TestFloodAndLearn(t *testing.T) {
	v := clock.NewVirtual(1)
	sw, hosts := star(v, 3, 100e9, 100e9, 0, Config{})
	for i := range 4 {
		sw.fib.remove(hostMAC(i))
	}
	sw.SetFloodPorts([]uint16{0, 1, 2}) // port 3 is off the tree
	hosts[0].start(1, 1, 0)
	v.Run()
	if hosts[1].rxFrames != 1 || hosts[2].rxFrames != 1 || hosts[3].rxFrames != 0 {
		t.Fatalf("flood delivered %d %d %d", hosts[1].rxFrames, hosts[2].rxFrames, hosts[3].rxFrames)
	}
	hosts[1].start(0, 1, v.Now()) // learned: host 0 is behind port 0
	v.Run()
	hosts[2].sent = 0
	hosts[2].start(1, 1, v.Now()) // learned from host 1's frame
	v.Run()
	if hosts[0].rxFrames != 1 || hosts[1].rxFrames != 2 || hosts[2].rxFrames != 1 || hosts[3].rxFrames != 0 {
		t.Fatalf("after learning: %d %d %d %d", hosts[0].rxFrames, hosts[1].rxFrames, hosts[2].rxFrames, hosts[3].rxFrames)
	}
}

// signallingStamper is a recordingStamper that says which frames it may stamp
// (SignalStamper), and counts the frames Stamp was asked about.
type signallingStamper struct {
	recordingStamper
	asked    int
	badNotes int // frames whose IPLen and TTL were not their headers'
}

func (s *signallingStamper) MayStamp(frame []byte, l *roce.Layout) bool {
	return l.IPVersion == 4 && roce.IPv4(frame[l.L3:]).DSCP() == s.dscp
}

func (s *signallingStamper) Stamp(f *link.Frame, hop hpcc.Hop) (bool, error) {
	s.asked++
	b := f.Bytes()
	if l, err := roce.Locate(b); err != nil || int(f.IPLen) != l.End-l.L3 || f.TTL != l.TTL(b) {
		s.badNotes++
	}
	return s.recordingStamper.Stamp(f, hop)
}

// TestSignalStamperSkipsAtDequeue: a SignalStamper is not asked at dequeue about the
// frames it said at arrival it would not stamp, and stamps the others as a Stamper
// does, with their IP length and TTL noted on the frame.
func TestSignalStamperSkipsAtDequeue(t *testing.T) {
	for _, dscp := range []uint8{26, 27} { // the hosts' frames carry DSCP 26
		v := clock.NewVirtual(1)
		st := &signallingStamper{recordingStamper: recordingStamper{dscp: dscp}}
		sw, hosts := star(v, 1, 100e9, 100e9, 0, Config{ID: 1, Stamper: st})
		hosts[0].start(1, 10, 0)
		v.Run()
		want := 10
		if dscp != 26 {
			want = 0
		}
		if st.badNotes != 0 {
			t.Errorf("%d of %d frames came to Stamp without their IP length and TTL", st.badNotes, st.asked)
		}
		if st.asked != want || len(st.hops) != want || sw.Ports()[1].Stats().Stamped != uint64(want) {
			t.Fatalf("stamper of DSCP %d asked about %d frames, stamped %d (port: %d), want %d",
				dscp, st.asked, len(st.hops), sw.Ports()[1].Stats().Stamped, want)
		}
	}
}
