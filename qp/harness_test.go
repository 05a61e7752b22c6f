package qp

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// The virtual-time harness: two hosts, several RC QP pairs between them in both
// directions, over a link that loses, duplicates, reorders and corrupts frames. Random
// WRITE/READ/SEND/atomic streams must complete exactly once and in order, with every
// byte as a reference model says, and the fetch-and-add originals must be exactly
// 0, add, 2·add, ... (linearizability).

var harnessSeeds = flag.Int("qp.seeds", 0, "harness seeds per fault profile (0: 12, or 3 with -short)")

type faults struct {
	loss, dup, reorder, corrupt float64
}

// link delivers frames after a propagation delay, with faults drawn from its seed.
type link struct {
	rng    *rand.Rand
	f      faults
	events eventHeap
	seq    uint64
	sent   uint64
}

type delivery struct {
	at    int64
	seq   uint64
	to    *host
	frame []byte
}

type eventHeap []delivery

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(delivery)) }
func (h *eventHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

const propagation = 2000 // ns

func (l *link) send(now int64, to *host, frame []byte) {
	l.sent++
	if l.rng.Float64() < l.f.loss {
		return
	}
	copies := 1
	if l.rng.Float64() < l.f.dup {
		copies = 2
	}
	for range copies {
		f := bytes.Clone(frame)
		if l.rng.Float64() < l.f.corrupt {
			f[14+l.rng.IntN(len(f)-14)] ^= byte(1 + l.rng.IntN(255))
		}
		at := now + propagation
		if l.rng.Float64() < l.f.reorder {
			at += int64(l.rng.IntN(3 * propagation))
		}
		l.seq++
		heap.Push(&l.events, delivery{at: at, seq: l.seq, to: to, frame: f})
	}
}

// host is one side: its memory and QPs.
type host struct {
	mem  *fakeMem
	qps  []*QP
	byQP map[roce.QPN]*QP
	next int // round-robin position
	busy int64
}

// stream is the work of one requester QP against its peer's memory, with a reference
// model of the peer's region and the expected results.
type stream struct {
	id       int
	req, rsp *node
	rng      *rand.Rand
	ops      int // left to post
	posted   uint64
	pending  []pendingOp // posted, not completed, in order
	shadow   []byte      // the peer's region as it must be
	recvs    uint64
	recvWant [][]byte // SEND payloads in order, awaiting receive completions
	origs    []uint64 // FETCH_ADD originals
}

type pendingOp struct {
	wrid  uint64
	op    WROpcode
	local uint64 // local buffer address
	want  []byte // READ: the expected data
	off   uint64 // READ: the remote range, for fencing later WRITEs
}

const (
	harnessMTU    = roce.MTU1024
	streamRegion  = 16 << 10 // each stream's window in the peer's region
	counterOffset = 0        // the shared FETCH_ADD counter in each host's region
	addend        = 3
	slots         = 32 // outstanding WRs per stream, each with a local buffer slot
	slotSize      = 4 << 10
)

func runHarness(t *testing.T, seed uint64, f faults, opsPerStream int) (virtual int64, frames uint64) {
	t.Helper()
	l := &link{rng: rand.New(rand.NewPCG(seed, 1)), f: f}
	mems := [2]*fakeMem{newFakeMem(), newFakeMem()}
	hosts := [2]*host{{mem: mems[0], byQP: map[roce.QPN]*QP{}}, {mem: mems[1], byQP: map[roce.QPN]*QP{}}}
	const nstreams = 4
	const all = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
	regions := [2][]byte{
		mems[0].reg(remoteKey, remoteBase, 8+nstreams*streamRegion, all),
		mems[1].reg(remoteKey, remoteBase, 8+nstreams*streamRegion, all),
	}
	var streams []*stream
	for i := range nstreams {
		o := defaultOpts()
		o.sqDepth, o.rqDepth, o.maxRd = slots, slots, 8
		o.minRNRTimer = 1
		// At 20 % loss each way, 8 tries of an atomic all fail now and then (0.36^8
		// per atomic): IBTA's retry_cnt 7 would end the run, which checks the data.
		o.rxeRetryCnt = true
		from := i % 2 // streams alternate direction
		o.mem = [2]*fakeMem{mems[from], mems[1-from]}
		o.qpn = [2]roce.QPN{roce.QPN(0x100 + 2*i), roce.QPN(0x101 + 2*i)}
		a, b := newNode(t, o, 0), newNode(t, o, 1)
		a.av, b.av = nodeAddr(from+1), nodeAddr(2-from)
		connect(t, o, a, b)
		connect(t, o, b, a)
		hosts[from].qps = append(hosts[from].qps, a.qp)
		hosts[1-from].qps = append(hosts[1-from].qps, b.qp)
		hosts[from].byQP[a.qp.QPN()], hosts[1-from].byQP[b.qp.QPN()] = a.qp, b.qp
		lkey := uint32(0x1000 + i)
		a.mem.reg(lkey, uint64(lkey)<<32, slots*slotSize, AccessLocalWrite)
		b.mem.reg(lkey, uint64(lkey)<<32, slots*slotSize, AccessLocalWrite)
		s := &stream{id: i, req: a, rsp: b, rng: rand.New(rand.NewPCG(seed, uint64(10+i))), ops: opsPerStream,
			shadow: make([]byte, streamRegion)}
		peerRegion := regions[1-from][8+i*streamRegion : 8+(i+1)*streamRegion]
		fillRandom(s.rng, peerRegion)
		copy(s.shadow, peerRegion)
		for range slots {
			s.postRecv(t)
		}
		streams = append(streams, s)
	}

	buf := make([]byte, MaxFrameSize)
	now := int64(0)
	peerOf := func(h *host) *host {
		if h == hosts[0] {
			return hosts[1]
		}
		return hosts[0]
	}
	for iter := 0; ; iter++ {
		if iter > 50_000_000 {
			t.Fatalf("seed %d: no convergence", seed)
		}
		done := true
		for _, s := range streams {
			s.refill(t)
			s.collect(t, seed)
			if s.ops > 0 || len(s.pending) > 0 || len(s.recvWant) > 0 {
				done = false
			}
		}
		if done {
			break
		}
		// Transmit: each host sends one frame per 100 ns, responses first, requests
		// while the QP's in-flight bytes are under a 64 KiB window.
		sent := false
		for _, h := range hosts {
			if h.busy > now {
				continue
			}
			if n, ok := h.pull(now, buf); ok {
				l.send(now, peerOf(h), buf[:n])
				h.busy = now + 100
				sent = true
			}
		}
		// Advance to the next event: a delivery, a timer or a free transmitter.
		next := Never
		if len(l.events) > 0 {
			next = l.events[0].at
		}
		for _, h := range hosts {
			for _, q := range h.qps {
				next = min(next, q.NextDeadline())
			}
			if sent || h.busy > now {
				next = min(next, max(h.busy, now))
			}
		}
		if next == Never {
			t.Fatalf("seed %d: deadlock at %d ns with work left", seed, now)
		}
		now = max(now, next)
		for len(l.events) > 0 && l.events[0].at <= now {
			d := heap.Pop(&l.events).(delivery)
			d.to.receive(now, d.frame)
		}
		for _, h := range hosts {
			for _, q := range h.qps {
				if q.NextDeadline() <= now {
					q.OnTimer(now)
				}
			}
		}
	}
	// Both memories must equal the reference models, and the counters must have
	// counted exactly one add per FETCH_ADD.
	for _, s := range streams {
		from := s.id % 2
		peerRegion := regions[1-from][8+s.id*streamRegion : 8+(s.id+1)*streamRegion]
		if crc32.ChecksumIEEE(peerRegion) != crc32.ChecksumIEEE(s.shadow) {
			t.Errorf("seed %d stream %d: peer memory checksum differs from the reference", seed, s.id)
		}
		if s.req.qp.State() != StateRTS || s.rsp.qp.State() != StateRTS {
			t.Errorf("seed %d stream %d: QPs in %v/%v", seed, s.id, s.req.qp.State(), s.rsp.qp.State())
		}
		if s.req.qp.InFlightBytes() != 0 {
			t.Errorf("seed %d stream %d: %d bytes in flight when idle", seed, s.id, s.req.qp.InFlightBytes())
		}
	}
	// Streams 0 and 2 add to host 1's counter, 1 and 3 to host 0's.
	for h := range 2 {
		var mine []uint64
		for _, s := range streams {
			if 1-s.id%2 == h {
				mine = append(mine, s.origs...)
			}
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i] < mine[j] })
		for i, v := range mine {
			if v != uint64(i)*addend {
				t.Fatalf("seed %d host %d: FETCH_ADD originals %v are not 0..N-1 × %d", seed, h, mine, addend)
			}
		}
		if got := binary.LittleEndian.Uint64(regions[h][counterOffset:]); got != uint64(len(mine))*addend {
			t.Errorf("seed %d host %d: counter %d after %d adds", seed, h, got, len(mine))
		}
	}
	return now, l.sent
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

func (h *host) pull(now int64, buf []byte) (int, bool) {
	for i := range h.qps {
		q := h.qps[(h.next+i)%len(h.qps)]
		if n, ok := q.NextResponse(buf); ok {
			h.next = (h.next + i + 1) % len(h.qps)
			return n, true
		}
	}
	for i := range h.qps {
		q := h.qps[(h.next+i)%len(h.qps)]
		if q.InFlightBytes() >= 64<<10 {
			continue
		}
		if n, ok := q.NextRequest(now, buf); ok {
			h.next = (h.next + i + 1) % len(h.qps)
			return n, true
		}
	}
	return 0, false
}

// receive plays the rnic's receive pipeline: decode, ICRC, dispatch by QPN.
func (h *host) receive(now int64, frame []byte) {
	var p roce.Packet
	if p.Decode(frame) != nil || !p.ICRCOK() {
		return
	}
	if q := h.byQP[p.BTH.DestQP()]; q != nil {
		q.Receive(now, &p)
	}
}

func (s *stream) lkey() uint32                { return uint32(0x1000 + s.id) }
func (s *stream) slotAddr(wrid uint64) uint64 { return uint64(s.lkey())<<32 + (wrid%slots)*slotSize }

func (s *stream) postRecv(t *testing.T) {
	wrid := s.recvs
	s.recvs++
	err := s.rsp.qp.PostRecv(&RecvWR{WRID: wrid, SGL: []SGE{{Addr: s.slotAddr(wrid), Length: slotSize, LKey: s.lkey()}}})
	if err != nil {
		t.Fatal(err)
	}
}

// refill posts random operations while the send queue has room.
func (s *stream) refill(t *testing.T) {
	for s.ops > 0 && len(s.pending) < slots {
		wrid := s.posted
		local := s.slotAddr(wrid)
		mem := s.req.mem.regions[s.lkey()].buf
		slot := mem[(wrid%slots)*slotSize : (wrid%slots+1)*slotSize]
		n := uint32(s.rng.IntN(slotSize + 1))
		off := uint64(s.rng.IntN(streamRegion - int(n) + 1))
		remote := remoteBase + 8 + uint64(s.id*streamRegion) + off
		wr := SendWR{WRID: wrid, SGL: []SGE{{Addr: local, Length: n, LKey: s.lkey()}}, RemoteAddr: remote, RKey: remoteKey}
		p := pendingOp{wrid: wrid, local: local}
		switch r := s.rng.IntN(10); {
		case r < 4:
			wr.Opcode = WRWrite
			// A READ's data may be fetched (or, when retried, fetched again) after a
			// later WRITE executes: IBTA leaves that to the application, which fences.
			if s.overlapsRead(off, n) {
				wr.Flags = SendFence
			}
			fillRandom(s.rng, slot[:n])
			copy(s.shadow[off:], slot[:n])
		case r < 7:
			wr.Opcode = WRRead
			p.want = bytes.Clone(s.shadow[off : off+uint64(n)])
			p.off = off
		case r < 9:
			wr.Opcode = WRSend
			fillRandom(s.rng, slot[:n])
			s.recvWant = append(s.recvWant, bytes.Clone(slot[:n]))
		default:
			wr.Opcode = WRFetchAdd
			wr.SGL[0].Length = 8
			wr.RemoteAddr, wr.CompareAdd = remoteBase+counterOffset, addend
			wr.Flags = SendFence // exercise fences in the mix
		}
		p.op = wr.Opcode
		if err := s.req.qp.PostSend(&wr); err != nil {
			t.Fatalf("stream %d: post %d: %v", s.id, wrid, err)
		}
		s.pending = append(s.pending, p)
		s.posted++
		s.ops--
	}
}

func (s *stream) overlapsRead(off uint64, n uint32) bool {
	for _, p := range s.pending {
		if p.op == WRRead && off < p.off+uint64(len(p.want)) && p.off < off+uint64(n) {
			return true
		}
	}
	return false
}

// collect checks completions: every WR exactly once, in order, successful, with the
// data the reference model predicts.
func (s *stream) collect(t *testing.T, seed uint64) {
	for _, wc := range s.req.scq.take() {
		if len(s.pending) == 0 {
			t.Fatalf("seed %d stream %d: unexpected completion %+v", seed, s.id, wc)
		}
		p := s.pending[0]
		s.pending = s.pending[1:]
		if wc.WRID != p.wrid || wc.Status != WCSuccess || wc.Opcode != p.op.wcOpcode() {
			t.Fatalf("seed %d stream %d: completion %+v (%v), want WR %d %v SUCCESS", seed, s.id, wc, wc.Status, p.wrid, p.op)
		}
		mem := s.req.mem.regions[s.lkey()].buf
		got := mem[p.local-uint64(s.lkey())<<32:]
		switch p.op {
		case WRRead:
			if !bytes.Equal(got[:len(p.want)], p.want) {
				t.Fatalf("seed %d stream %d: READ %d returned wrong data", seed, s.id, p.wrid)
			}
		case WRFetchAdd:
			s.origs = append(s.origs, binary.LittleEndian.Uint64(got))
		}
	}
	for _, wc := range s.rsp.rcq.take() {
		if len(s.recvWant) == 0 || wc.Status != WCSuccess || wc.Opcode != WCRecv {
			t.Fatalf("seed %d stream %d: unexpected receive completion %+v (%v)", seed, s.id, wc, wc.Status)
		}
		want := s.recvWant[0]
		s.recvWant = s.recvWant[1:]
		buf := s.rsp.mem.regions[s.lkey()].buf[(wc.WRID%slots)*slotSize:]
		if int(wc.ByteLen) != len(want) || !bytes.Equal(buf[:len(want)], want) {
			t.Fatalf("seed %d stream %d: SEND into receive %d carried wrong data (%d bytes, want %d)", seed, s.id, wc.WRID, wc.ByteLen, len(want))
		}
		s.postRecv(t)
	}
}

func TestHarness(t *testing.T) {
	seeds := *harnessSeeds
	if seeds == 0 {
		seeds = 12
		if testing.Short() {
			seeds = 3
		}
	}
	profiles := []struct {
		name string
		f    faults
		ops  int
	}{
		{"clean", faults{}, 500},
		{"faulty-1-5pct", faults{loss: 0.03, dup: 0.02, reorder: 0.05, corrupt: 0.02}, 500},
		{"loss-20pct", faults{loss: 0.20, dup: 0.02, reorder: 0.05, corrupt: 0.02}, 250},
	}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				virt, frames := runHarness(t, seed, p.f, p.ops)
				t.Logf("seed %d: %d ops over 4 QPs, %d frames, %.1f ms virtual", seed, 4*p.ops, frames, float64(virt)/1e6)
			}
		})
	}
}
