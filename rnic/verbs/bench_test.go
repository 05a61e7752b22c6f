package verbs_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
)

// TestDataPathAllocs: PostSend, PostRecv and PollCQ allocate nothing in steady state —
// and neither does the service that carries the work (AllocsPerRun counts every
// goroutine of the process).
func TestDataPathAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("real-time run; the race detector allocates")
	}
	l := newLab(t)
	a, b := pair(t, l, 1<<16)
	sgl := []qp.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}}
	rsgl := []qp.SGE{{Addr: b.mr.Addr(), Length: 64, LKey: b.mr.LKey()}}
	wr := qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: sgl}
	rwr := qp.RecvWR{SGL: rsgl}
	wcs := make([]qp.WC, 4)
	wait := func(cq interface {
		PollCQ([]qp.WC) (int, error)
	}) {
		for {
			if n, _ := cq.PollCQ(wcs); n > 0 {
				return
			}
			runtime.Gosched()
		}
	}
	round := func() {
		if err := b.qp.PostRecv(&rwr); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		wait(a.cq)
		wait(b.cq)
	}
	for range 200 {
		round()
	}
	if n := testing.AllocsPerRun(500, round); n > 0.1 {
		t.Errorf("%.2f allocations per SEND round", n)
	}
}

// BenchmarkWrite64KB is app-to-app RDMA WRITE throughput through the verbs service,
// 64 KB messages, 32 outstanding, between two hosts behind one switch at 100 Gb/s: the
// sending application busy-polls its CQ (see idle) and reposts as completions arrive.
func BenchmarkWrite64KB(b *testing.B) {
	l := newLab(b)
	const msg, depth = 64 << 10, 32
	x, y := pair(b, l, msg*depth)
	sgl := []qp.SGE{{Addr: x.mr.Addr(), Length: msg, LKey: x.mr.LKey()}}
	wr := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sgl, RKey: y.mr.RKey()}
	wcs := make([]qp.WC, depth)
	posted, done, empty := 0, 0, 0
	b.ResetTimer()
	start := time.Now()
	for done < b.N {
		for posted < b.N && posted-done < depth {
			wr.RemoteAddr = y.mr.Addr() + uint64(posted%depth)*msg
			if err := x.qp.PostSend(&wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		n, err := x.cq.PollCQ(wcs)
		if err != nil {
			b.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				b.Fatal(wc.Status)
			}
		}
		done += n
		if n == 0 {
			idle(&empty)
		} else {
			empty = 0
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)*msg*8/el.Seconds()/1e9, "Gb/s")
}

// BenchmarkSendLatency64B is the 64-byte SEND ping-pong between two apps through the
// verbs service: half round trips, p50 and p99 in µs. One goroutine busy-polls both
// apps' CQs (see idle), as ib_send_lat polls.
func BenchmarkSendLatency64B(b *testing.B) {
	l := newLab(b)
	x, y := pair(b, l, 4096)
	mk := func(a *app) (qp.SendWR, qp.RecvWR) {
		return qp.SendWR{Opcode: qp.WRSend, SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}}},
			qp.RecvWR{SGL: []qp.SGE{{Addr: a.mr.Addr() + 1024, Length: 64, LKey: a.mr.LKey()}}}
	}
	xs, xr := mk(x)
	ys, yr := mk(y)
	for range 16 {
		x.qp.PostRecv(&xr)
		y.qp.PostRecv(&yr)
	}
	wcs := make([]qp.WC, 4)
	// await polls cq until a receive completes (send completions are unsignaled).
	await := func(cq *app) {
		empty := 0
		for {
			n, err := cq.cq.PollCQ(wcs)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				if wcs[0].Status != qp.WCSuccess {
					b.Fatal(wcs[0].Status)
				}
				return
			}
			idle(&empty)
		}
	}
	// Sends are unsignaled except every 8th, which frees the send ring's slots.
	half := make([]time.Duration, 0, b.N)
	rounds := b.N + 100
	b.ResetTimer()
	for i := range rounds {
		xs.Flags, ys.Flags = 0, 0
		if i%8 == 0 {
			xs.Flags, ys.Flags = qp.SendSignaled, qp.SendSignaled
		}
		t0 := time.Now()
		x.qp.PostSend(&xs)
		await(y)
		if i%8 == 0 {
			await(x) // x's send completion precedes its receive
		}
		y.qp.PostRecv(&yr)
		y.qp.PostSend(&ys)
		await(x)
		if i%8 == 0 {
			await(y)
		}
		x.qp.PostRecv(&xr)
		if i >= 100 { // warm-up rounds do not count
			half = append(half, time.Since(t0)/2)
		}
	}
	b.StopTimer()
	slices.Sort(half)
	b.ReportMetric(float64(half[len(half)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(half[len(half)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// idle is what a benchmark's application does after a poll found its CQ empty: it polls
// again at once, as ib_write_bw and ib_send_lat do (their CQ polling never yields the
// CPU), but yields to the Go scheduler every idleYield empty polls. The applications are
// goroutines of the test process standing for processes of their own; a goroutine that
// yields after every poll keeps Go's run-queue lock busy for the device loops (a profile
// showed half the CPU there), one that never yields can starve a loop of its P.
func idle(empty *int) {
	if *empty++; *empty%idleYield == 0 {
		runtime.Gosched()
	}
}

const idleYield = 64
