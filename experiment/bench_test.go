package experiment

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
)

// benchWrite runs b.N RDMA WRITEs of size bytes on one RC QP between two soft-RNICs
// through one switch, in real time, keeping depth WRs outstanding; the application
// re-posts from its completion handler on the sender's loop. It reports Gb/s and
// messages/s.
func benchWrite(b *testing.B, size int, mtu roce.MTU) {
	cfg := Defaults()
	cfg.Senders, cfg.CC, cfg.MTU, cfg.LinkRate = 1, rnic.ModeNone, mtu, 100e9
	cfg.TxLookahead = 50 * time.Microsecond
	r := clock.NewReal(clock.RealOptions{Seed: 1})
	st, err := buildStar(r, 2, &cfg)
	if err != nil {
		b.Fatal(err)
	}
	const depth = 32
	f := &flow{ID: 0, Src: 0, Dst: 1, Size: size}
	if err := f.connect(st.hosts[0], st.hosts[1], &cfg, func(*flow) {}); err != nil {
		b.Fatal(err)
	}
	src := st.hosts[0]
	pd, _ := src.AllocPD()
	_ = pd
	ch := src.CreateCompChannel(1)
	cq, _ := src.CreateCQ(2*depth, ch)
	spd, _ := src.AllocPD()
	mr, _ := src.RegMR(spd, size, qp.AccessLocalWrite)
	x, err := src.CreateQP(spd, rnic.QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: depth, MaxRecvWR: 1}})
	if err != nil {
		b.Fatal(err)
	}
	dgid, _ := st.hosts[1].QueryGID(0)
	sgid, _ := src.QueryGID(0)
	// Re-point the receiver's QP at the benchmark's QP.
	if err := bringUp(src, x, dgid, f.rq.QPN(), mtu); err != nil {
		b.Fatal(err)
	}
	dst := st.hosts[1]
	if err := dst.ModifyQP(f.rq, &qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
		b.Fatal(err)
	}
	if err := bringUp(dst, f.rq, sgid, x.QPN(), mtu); err != nil {
		b.Fatal(err)
	}
	sgl := []qp.SGE{{Addr: mr.Addr(), Length: uint32(size), LKey: mr.LKey()}}
	wr := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: sgl, RemoteAddr: f.rmr.Addr(), RKey: f.rmr.RKey()}
	var posted, completed int
	total := b.N
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	var failed atomic.Value
	post := func() {
		for posted < total && posted-completed < depth {
			if err := x.PostSend(&wr); err != nil {
				failed.Store(err.Error())
				finish()
				return
			}
			posted++
		}
	}
	wcs := make([]qp.WC, 2*depth)
	ch.Handler = func(cq *rnic.CQ) {
		n, _ := cq.PollCQ(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				failed.Store(wc.Status.String())
			}
		}
		completed += n
		if completed == total {
			finish()
			return
		}
		cq.ReqNotifyCQ(false)
		post()
	}
	cq.ReqNotifyCQ(false)
	if err := r.Start(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	src.Do(post)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		b.Error("WRITEs did not complete within 20 s")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	r.Close()
	if b.Failed() {
		b.Logf("posted %d completed %d; sender %+v %+v; receiver %+v %+v; switch %+v %+v", posted, completed,
			src.Stats(), x.Counters(), dst.Stats(), f.rq.Counters(), st.sw.Ports()[0].Stats().Drops, st.sw.Ports()[1].Stats().Drops)
	}
	if v := failed.Load(); v != nil {
		b.Fatal(v)
	}
	b.ReportMetric(float64(total)*float64(size)*8/elapsed.Seconds()/1e9, "Gb/s")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(linkHandoffGbps(4096+100), "handoff-Gb/s")
}

// linkHandoffGbps measures the raw in-process link between two real-time loops: frames
// of size bytes handed over in batches of 64 and released by the receiver, the sender
// staying within half the link's ring so that nothing is dropped.
func linkHandoffGbps(size int) float64 {
	const frames = 200_000
	r := clock.NewReal(clock.RealOptions{Seed: 2})
	a, bEnd, _ := link.New(link.Config{Rate: 1e12, MTU: 9000})
	tx, rx := r.NewLoop("tx"), r.NewLoop("rx")
	pool := link.NewPool(size)
	var got atomic.Int64
	done := make(chan struct{})
	a.Attach(tx, sink{})
	bEnd.Attach(rx, counter{&got, frames, done})
	batch := make([]*link.Frame, 64)
	sent := 0
	var send *clock.Task
	send = tx.NewTask(func() {
		if int64(sent)-got.Load() > 2048 { // the ring holds 4096: do not overrun it
			send.Post()
			return
		}
		for i := range batch {
			f := pool.Get()
			f.SetLen(size)
			f.Time = tx.Now()
			batch[i] = f
		}
		a.Send(batch)
		if sent += len(batch); sent < frames {
			send.Post()
		}
	})
	r.Start()
	start := time.Now()
	send.Post()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
	}
	el := time.Since(start)
	r.Close()
	return float64(got.Load()) * float64(size) * 8 / el.Seconds() / 1e9
}

type sink struct{}

func (sink) Receive(fs []*link.Frame) {
	for _, f := range fs {
		f.Release()
	}
}

type counter struct {
	n    *atomic.Int64
	want int64
	done chan struct{}
}

func (c counter) Receive(fs []*link.Frame) {
	for _, f := range fs {
		f.Release()
	}
	if c.n.Add(int64(len(fs))) >= c.want && c.n.Load()-int64(len(fs)) < c.want {
		close(c.done)
	}
}

// BenchmarkWrite64KB is single-QP RDMA WRITE throughput, 64 KB messages, 4 KB MTU,
// next to the raw link handoff rate of the same run.
func BenchmarkWrite64KB(b *testing.B) { benchWrite(b, 64<<10, roce.MTU4096) }

// BenchmarkWrite64B is the 64-byte message rate.
func BenchmarkWrite64B(b *testing.B) { benchWrite(b, 64, roce.MTU4096) }

// BenchmarkIncastTwin runs the 2:1 and 4:1 incast of issue 21 (HPCC, per-ACK INT,
// 10 µs links) at 1 and 10 Gb/s in virtual time and, in the same run, in real time as
// a lab runs it, and reports each one's bottleneck utilization, queue averaged over
// the second half, and Jain's fairness index: the lab's figures next to their twin's.
func BenchmarkIncastTwin(b *testing.B) {
	for _, rate := range []uint64{1e9, 10e9} {
		for _, n := range []int{2, 4} {
			for _, mode := range []string{"virtual", "real"} {
				b.Run(fmt.Sprintf("%dGbps/%d:1/%s", rate/1e9, n, mode), func(b *testing.B) {
					cfg := RealTimeDefaults(Defaults())
					cfg.Senders, cfg.LinkRate, cfg.CC = n, rate, rnic.ModeHPCC
					cfg.LinkDelay = 10 * time.Microsecond
					cfg.FlowSize = int(rate/8) * 40 / 1000 / n
					run := RunRealTime
					if mode == "virtual" {
						cfg.Sample, run = Defaults().Sample, Run
					}
					var m Metrics
					for b.Loop() {
						res, err := run(cfg)
						if err != nil {
							b.Fatal(err)
						}
						if len(res.Errors) > 0 {
							b.Fatal(res.Errors)
						}
						m = res.Metrics
					}
					b.ReportMetric(m.Utilization, "util")
					b.ReportMetric(m.MeanQueue, "queue-B")
					b.ReportMetric(m.Jain, "jain")
				})
			}
		}
	}
}
