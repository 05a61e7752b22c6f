package experiment

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
)

// benchWrite runs b.N RDMA WRITEs of size bytes on one RC QP between two soft-RNICs
// through one switch, in real time, keeping depth WRs outstanding; the application
// re-posts from its completion handler on the sender's loop. The payload is real
// (memfd-backed MRs, every byte read from the sender's MR into the frame and written
// from it into the receiver's, ICRC computed and checked). It reports Gb/s,
// messages/s, the process's CPU time per message and the raw link handoff rate.
func benchWrite(b *testing.B, size int, mtu roce.MTU) {
	cfg := Defaults()
	cfg.Senders, cfg.CC, cfg.MTU, cfg.LinkRate = 1, rnic.ModeNone, mtu, 100e9
	cfg.TxLookahead = 50 * time.Microsecond
	cfg.Verify = true // real payload bytes and ICRCs: the data path a lab runs
	r := clock.NewReal(clock.RealOptions{Seed: 1})
	// The thread plan for two cores (docs/datapath.md): the switch and both hosts on
	// one loop thread, whose links then hand frames over directly. Splitting the
	// sender from the switch and receiver over two threads cost a third more CPU per
	// message (the frames cross cores) and was slower on the project's 2-vCPU VMs.
	st, err := buildStar(oneLoop{r.NewLoop("nodes")}, 2, &cfg)
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
	start, cpu0 := time.Now(), processCPU(b)
	src.Do(post)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		b.Error("WRITEs did not complete within 20 s")
	}
	elapsed, cpu := time.Since(start), processCPU(b)-cpu0
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
	// The process's CPU time per message: on a shared machine, where the loop thread
	// gets less than a core, the figure that does not depend on what else runs.
	b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/msg")
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

// The scenario benchmarks run each scenario in a child process (this test binary,
// re-executed with benchChildEnv naming the scenario), so that the peak RSS the kernel
// reports for the child is the scenario's own. The parent reports wall and CPU time,
// packets (data, ACKs, probes, CNPs) per CPU-second, events per packet and peak RSS.

const (
	benchChildEnv = "ROCELAB_BENCH_SCENARIO" // the scenario the child runs
	benchOutEnv   = "ROCELAB_BENCH_OUT"      // where the child writes its counts
	// benchFilesSuffix ends the name of a scenario whose child writes the data files
	// the CLI writes (Result.WriteData: CSVs, summary, topology), as a user's run
	// does, so that its CPU and peak RSS are the command's.
	benchFilesSuffix = "+files"
)

// benchScenarios are the `make bench` scenarios of issue 15, by name.
func benchScenarios() map[string]Config {
	// The scenarios' figures are the sequential driver's; the parallel driver's runs
	// are named by their threads.
	fat3 := func(cc rnic.Mode) Config {
		c := MixDefaults()
		c.Topology, c.CC, c.Load, c.Duration = "fat-tree-3tier", cc, 0.3, 5*time.Millisecond
		c.Threads = 0
		return c
	}
	big := MixDefaults()
	big.Topology, big.K, big.Load, big.Duration = "fat-tree", 16, 0.5, 10*time.Millisecond
	big.Threads = 0
	long := NS3(Defaults())
	long.FlowSize = 50_000_000
	scenarios := map[string]Config{
		"fat3-hpcc":  fat3(rnic.ModeHPCC),
		"fat3-dcqcn": fat3(rnic.ModeDCQCN),
		"incast16":   Defaults(),
		"fat1024":    big,
		// The 16:1 incasts as `rocelab experiment incast --senders 16 --preset ns3
		// [--flow-size 50MB]` runs them, its data files included (benchFilesSuffix).
		"incast16-ns3" + benchFilesSuffix:      NS3(Defaults()),
		"incast16-50MB-ns3" + benchFilesSuffix: long,
	}
	// The sweep's runs: the 500 KB incast under the preset, a seed each.
	scenarios[sweepScenario] = NS3(Defaults())
	// The parallel driver's runs of the fat trees, on one thread and on two.
	for _, name := range []string{"fat3-hpcc", "fat1024"} {
		for _, threads := range []int{1, 2} {
			c := scenarios[name]
			c.Threads = threads
			scenarios[fmt.Sprintf("%s-threads%d", name, threads)] = c
		}
	}
	return scenarios
}

// TestBenchChild is the child side of the scenario benchmarks; without benchChildEnv
// it has nothing to do.
func TestBenchChild(t *testing.T) {
	name := os.Getenv(benchChildEnv)
	if name == "" {
		t.Skip("runs only as a scenario benchmark's child process")
	}
	cfg, ok := benchScenarios()[name]
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	if name == sweepScenario {
		benchSweepChild(t, cfg)
		return
	}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("%d errors, the first: %s", len(res.Errors), res.Errors[0])
	}
	if strings.HasSuffix(name, benchFilesSuffix) {
		if err := res.WriteData(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	// What the flows did, every FCT: the parallel driver's runs on one and two
	// threads must agree on it.
	js, err := json.Marshal(JSON{Metrics: res.Metrics, Flows: res.Flows, Errors: res.Errors})
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%d %d %x\n", res.Packets, res.Events, sha256.Sum256(js))
	if err := os.WriteFile(os.Getenv(benchOutEnv), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// benchScenario runs the scenario b.N times, each in a child process, and reports
// per run: wall and CPU time, packets per CPU-second, events per packet and the peak
// RSS of the largest child. It returns the hash of the last run's flows and metrics,
// and what the child wrote after its counts' line.
func benchScenario(b *testing.B, name string) (hash, rest string) {
	out := filepath.Join(b.TempDir(), "counts")
	var wall, cpu time.Duration
	var rss int64
	var packets, events uint64
	for range b.N {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBenchChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), benchChildEnv+"="+name, benchOutEnv+"="+out)
		start := time.Now()
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", name, err, msg)
		}
		wall += time.Since(start)
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		rss = max(rss, ru.Maxrss*1024)
		data, err := os.ReadFile(out)
		if err != nil {
			b.Fatal(err)
		}
		var p, e uint64
		line, after, _ := strings.Cut(string(data), "\n")
		if _, err := fmt.Sscan(line, &p, &e, &hash); err != nil {
			b.Fatalf("%s: counts %q: %v", name, data, err)
		}
		rest = after
		packets, events = packets+p, events+e
	}
	reportScenario(b, wall, cpu, packets, events)
	b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
	return hash, rest
}

// benchScenarioInProcess runs a scenario too short for a child process's start-up
// not to dominate its CPU time b.N times in this process.
func benchScenarioInProcess(b *testing.B, name string) {
	cfg := benchScenarios()[name]
	var wall, cpu time.Duration
	var packets, events uint64
	for range b.N {
		before, start := processCPU(b), time.Now()
		res, err := Run(cfg)
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		cpu += processCPU(b) - before
		if len(res.Errors) > 0 {
			b.Fatalf("%d errors, the first: %s", len(res.Errors), res.Errors[0])
		}
		packets, events = packets+res.Packets, events+res.Events
	}
	reportScenario(b, wall, cpu, packets, events)
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportScenario(b *testing.B, wall, cpu time.Duration, packets, events uint64) {
	n := float64(b.N)
	b.ReportMetric(wall.Seconds()/n, "wall-s")
	b.ReportMetric(cpu.Seconds()/n, "cpu-s")
	b.ReportMetric(float64(packets)/cpu.Seconds(), "pkts/cpu-s")
	b.ReportMetric(float64(events)/float64(packets), "events/pkt")
}

// BenchmarkFatTree3HPCC is the HPCC paper's 320-host three-tier fat tree, WebSearch at
// 30% load for 5 ms of arrivals (about 3,500 flows, 5.8 GB), HPCC per-ACK over INT.
func BenchmarkFatTree3HPCC(b *testing.B) { benchScenario(b, "fat3-hpcc") }

// BenchmarkFatTree3HPCCParallel is BenchmarkFatTree3HPCC on the parallel driver, on
// one thread and on two; it fails if the two runs' flows differ.
func BenchmarkFatTree3HPCCParallel(b *testing.B) { benchParallel(b, "fat3-hpcc") }

// BenchmarkFatTree1024Parallel is BenchmarkFatTree1024 on the parallel driver, on one
// thread and on two.
func BenchmarkFatTree1024Parallel(b *testing.B) { benchParallel(b, "fat1024") }

// benchParallel runs a scenario on the parallel driver on one and two threads, and
// fails if their flows and metrics differ.
func benchParallel(b *testing.B, name string) {
	var hashes []string
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			hash, _ := benchScenario(b, fmt.Sprintf("%s-threads%d", name, threads))
			hashes = append(hashes, hash)
		})
	}
	if len(hashes) == 2 && hashes[0] != hashes[1] {
		b.Fatalf("%s: the flows on two threads differ from those on one (%s, %s)", name, hashes[0], hashes[1])
	}
}

// BenchmarkFatTree3DCQCN is the same arrivals under DCQCN.
func BenchmarkFatTree3DCQCN(b *testing.B) { benchScenario(b, "fat3-dcqcn") }

// BenchmarkIncast16Files is the 16:1 incast of 500 KB per sender under --preset ns3
// as the CLI runs it, files and all, in its own process: start-up, simulation and
// outputs (wall, CPU, packets per CPU-second, peak RSS).
func BenchmarkIncast16Files(b *testing.B) { benchScenario(b, "incast16-ns3"+benchFilesSuffix) }

// BenchmarkIncast16x50MBFiles is the same with 50 MB per sender (75 ms of simulated
// time, 1.6 M packets): peak RSS must not grow with the run (docs/performance.md).
func BenchmarkIncast16x50MBFiles(b *testing.B) {
	benchScenario(b, "incast16-50MB-ns3"+benchFilesSuffix)
}

// sweepScenario names the 20-seed sweep of BenchmarkIncastSweep20, and sweepSeeds its
// seeds.
const (
	sweepScenario = "incast16-ns3-sweep20"
	sweepSeeds    = 20
)

// BenchmarkIncastSweep20 is `rocelab experiment sweep incast --seeds 20 --preset ns3
// --grid cc=hpcc,dcqcn` in a child process: the 500 KB 16:1 incast over 20 seeds under
// each (HPCC's incast has nothing random, so its seeds agree; DCQCN's RED marking
// draws), as many runs at once as the machine has cores. It reports the whole sweep's
// wall and CPU time, packets per CPU-second, events per packet and peak RSS, and logs
// the sweep's summary table.
func BenchmarkIncastSweep20(b *testing.B) {
	_, table := benchScenario(b, sweepScenario)
	b.Logf("the sweep's table (%d seeds a grid point, %d at once):\n%s", sweepSeeds, runtime.NumCPU(), table)
}

// benchSweepChild runs the sweep of sweepScenario from cfg and writes its counts for
// benchScenario, its summary table after them.
func benchSweepChild(t *testing.T, cfg Config) {
	var runs []SweepRun
	for _, cc := range []struct {
		flag string // as --cc names it
		mode rnic.Mode
	}{{"hpcc", rnic.ModeHPCC}, {"dcqcn", rnic.ModeDCQCN}} {
		for seed := range uint64(sweepSeeds) {
			c := cfg
			c.CC, c.Seed = cc.mode, seed+1
			runs = append(runs, SweepRun{Params: []Param{{"cc", cc.flag}}, Config: c})
		}
	}
	outcomes := Sweep(runs, runtime.NumCPU(), nil, nil)
	var packets, events uint64
	for _, o := range outcomes {
		if len(o.Errors) > 0 {
			t.Fatalf("seed %d: %s", o.Seed, o.Errors[0])
		}
		packets, events = packets+o.Packets, events+o.Events
	}
	var table strings.Builder
	WriteSweepTable(&table, outcomes)
	js, err := json.Marshal(outcomes)
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%d %d %x\n%s", packets, events, sha256.Sum256(js), table.String())
	if err := os.WriteFile(os.Getenv(benchOutEnv), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkIncast16Scenario is the 16:1 incast, 500 KB per sender at 100 Gb/s, HPCC.
func BenchmarkIncast16Scenario(b *testing.B) { benchScenarioInProcess(b, "incast16") }

// BenchmarkFatTree1024 is a 1,024-host k=16 fat tree, WebSearch at 50% load for 10 ms.
func BenchmarkFatTree1024(b *testing.B) { benchScenario(b, "fat1024") }

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkState measures the memory a simulation holds: per flow (two RC QPs with
// their CQs, PDs and payload-free MRs, HPCC per-ACK, connected but idle), and per link
// of the 320-host three-tier fat tree as network.Build makes it (two link ends, the switch
// port or device at each end, forwarding tables, the shared neighbour table).
func BenchmarkState(b *testing.B) {
	cfg := Defaults()
	cfg.Senders = 1
	st, err := buildStar(clock.NewVirtual(1), 2, &cfg)
	if err != nil {
		b.Fatal(err)
	}
	flows := make([]*flow, 1000*b.N)
	before := heapInUse()
	for i := range flows {
		flows[i] = &flow{ID: i, Src: 0, Dst: 1, Size: 1 << 20}
		if err := flows[i].connect(st.hosts[0], st.hosts[1], &cfg, func(*flow) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(heapInUse()-before)/float64(len(flows)), "B/flow")
	runtime.KeepAlive(flows)

	mix := benchScenarios()["fat3-hpcc"]
	mix.FabricRate = mix.threeTierFabricRate()
	t, _, _, err := mix.mixTopology()
	if err != nil {
		b.Fatal(err)
	}
	before = heapInUse()
	nw, err := network.Build(t, clock.NewVirtual(1), network.Options{CC: mix.ccConfigFor(10*time.Microsecond, len(t.Hosts)-1),
		StaticNeighbours: true, PayloadFree: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(heapInUse()-before)/float64(len(t.Links)), "B/link")
	runtime.KeepAlive(nw)
}

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
