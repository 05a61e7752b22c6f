package qp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// burstPath is a path to a peer slower than the sender (rxe in a VM: its queue fills
// with whatever the sender has in flight) that drops runs of 32–128 frames in both
// directions, as QEMU's queues do when they overflow: a run drops everything for as
// long as the sender takes to send that many frames.
type burstPath struct {
	rng       *rand.Rand
	dropUntil int64
	queues    [2][]timedFrame // toward the responder, toward the requester
	served    int64           // when the responder may take its next frame
}

type timedFrame struct {
	at    int64
	frame []byte
}

const (
	burstSendGap    = 100   // ns per frame at the sender
	burstServiceGap = 1000  // ns per frame at the responder
	burstDelay      = 2000  // ns one way
	burstRunStart   = 0.002 // probability that a frame starts a run of drops
)

func (p *burstPath) send(now int64, dir int, frame []byte) {
	if now < p.dropUntil {
		return
	}
	if p.rng.Float64() < burstRunStart {
		p.dropUntil = now + int64(32+p.rng.IntN(97))*burstSendGap
		return
	}
	p.queues[dir] = append(p.queues[dir], timedFrame{now + burstDelay, bytes.Clone(frame)})
}

// runBurstLoss moves nmsg 64 KiB WRITEs or READs from a to b over a burstPath and
// returns the data frames sent per data frame needed, and the virtual time taken.
func runBurstLoss(t *testing.T, op WROpcode, maxUnacked int, seed uint64) (ratio float64, took int64) {
	t.Helper()
	o := defaultOpts() // retry_cnt 7, rnr_retry 7, 1024-byte MTU: perftest against rxe
	o.sqDepth, o.timeout = 128, 14
	a, b := newNode(t, o, 0), newNode(t, o, 1)
	a.qp.cfg.MaxUnackedPSNs = maxUnacked
	connect(t, o, a, b)
	connect(t, o, b, a)
	const msg, nmsg = 64 << 10, 200
	const needed = nmsg * msg / 1024
	a.mem.reg(localKey, localBase, msg, AccessLocalWrite)
	b.mem.reg(remoteKey, remoteBase, msg, AccessRemoteWrite|AccessRemoteRead)
	p := &burstPath{rng: rand.New(rand.NewPCG(seed, 19))}
	buf := make([]byte, MaxFrameSize)
	var now, busy, bBusy int64 // the times each side's transmitter is free
	var posted, done int
	var dataSent uint64
	for iter := 0; done < nmsg; iter++ {
		if iter > 10_000_000 {
			t.Fatalf("seed %d: %d of %d messages after %d ns", seed, done, nmsg, now)
		}
		for posted < nmsg && !a.qp.sq.full() {
			wr := SendWR{WRID: uint64(posted), Opcode: op, SGL: []SGE{{Addr: localBase, Length: msg, LKey: localKey}},
				RemoteAddr: remoteBase, RKey: remoteKey}
			if err := a.qp.PostSend(&wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		if busy <= now {
			if n, ok := a.qp.NextRequest(now, buf); ok {
				if op == WRWrite {
					dataSent++
				}
				p.send(now, 0, buf[:n])
				busy = now + burstSendGap
			}
		}
		if q := p.queues[0]; len(q) > 0 && q[0].at <= now && p.served <= now {
			b.qp.ReceiveFrame(now, q[0].frame)
			p.queues[0] = q[1:]
			p.served = now + burstServiceGap
		}
		if bBusy <= now {
			if n, ok := b.qp.NextResponse(buf); ok {
				if roce.BTH(buf[14+20+8:]).Opcode() != roce.OpRCAck {
					dataSent++ // READ responses
				}
				p.send(now, 1, buf[:n])
				bBusy = now + burstSendGap
			}
		}
		for q := p.queues[1]; len(q) > 0 && q[0].at <= now; q = p.queues[1] {
			a.qp.ReceiveFrame(now, q[0].frame)
			p.queues[1] = q[1:]
		}
		for _, wc := range a.scq.take() {
			if wc.Status != WCSuccess {
				t.Fatalf("seed %d: WR %d completed %v", seed, wc.WRID, wc.Status)
			}
			done++
		}
		next := a.qp.NextDeadline()
		if a.qp.HasRequest() {
			next = min(next, max(busy, now+1))
		}
		if q := p.queues[0]; len(q) > 0 {
			next = min(next, max(q[0].at, p.served))
		}
		if q := p.queues[1]; len(q) > 0 {
			next = min(next, q[0].at)
		}
		if b.qp.HasResponse() {
			next = min(next, max(bBusy, now+1))
		}
		if next != Never {
			now = max(now, next)
		}
		a.qp.OnTimer(now)
	}
	return float64(dataSent) / needed, now
}

// TestGoBackNBurstLoss: with rxe's bound on unacknowledged PSNs, go-back-N over a
// path that drops bursts behind a slow peer's queue sends at most 1.5 data frames per
// data frame needed, for WRITE (requests) and READ (responses). Without the bound
// every loss resends the send queue's worth (128 × 64 KiB), about ten times over.
func TestGoBackNBurstLoss(t *testing.T) {
	for _, op := range []WROpcode{WRWrite, WRRead} {
		for seed := uint64(1); seed <= 3; seed++ {
			ratio, took := runBurstLoss(t, op, RXEMaxUnackedPSNs, seed)
			t.Logf("%v seed %d: %.2f data frames per frame needed, %.1f ms", op, seed, ratio, float64(took)/1e6)
			if ratio > 1.5 {
				t.Errorf("%v seed %d: %.2f data frames sent per frame needed, want <= 1.5", op, seed, ratio)
			}
		}
		ratio, _ := runBurstLoss(t, op, maxOutstandingPSNs, 1)
		t.Logf("%v without the bound: %.2f data frames per frame needed", op, ratio)
	}
}

// frames returns the frames next yields until it has none.
func frames(next func([]byte) (int, bool)) [][]byte {
	var out [][]byte
	for {
		buf := make([]byte, MaxFrameSize)
		n, ok := next(buf)
		if !ok {
			return out
		}
		out = append(out, buf[:n])
	}
}

// TestGoBackNOncePerLoss: a sequence-error NAK restarts transmission once from the
// NAKed PSN; the same NAK arriving again (duplicated, or late) after the retry has
// made progress resends nothing, nor do duplicate ACKs.
func TestGoBackNOncePerLoss(t *testing.T) {
	a, b := newPair(t, defaultOpts())
	a.mem.reg(localKey, localBase, 8<<10, AccessLocalWrite)
	b.mem.reg(remoteKey, remoteBase, 8<<10, AccessRemoteWrite)
	post(t, a, SendWR{WRID: 1, Opcode: WRWrite, SGL: []SGE{{Addr: localBase, Length: 8 << 10, LKey: localKey}},
		RemoteAddr: remoteBase, RKey: remoteKey})
	const now = 1000
	sent := frames(func(buf []byte) (int, bool) { return a.qp.NextRequest(now, buf) })
	if len(sent) != 8 {
		t.Fatalf("%d packets for 8 KiB at MTU 1024", len(sent))
	}
	for i, f := range sent {
		if i != 3 { // packet 3 is lost
			b.qp.ReceiveFrame(now, f)
		}
	}
	naks := frames(b.qp.NextResponse) // the ACK-free NAK of PSN 3 (one per gap)
	if len(naks) != 1 {
		t.Fatalf("responder sent %d responses for one gap", len(naks))
	}
	a.qp.ReceiveFrame(now, naks[0])
	resent := frames(func(buf []byte) (int, bool) { return a.qp.NextRequest(now, buf) })
	if len(resent) != 5 {
		t.Fatalf("the NAK of PSN 3 of 0..7 resent %d packets, want 5", len(resent))
	}
	b.qp.ReceiveFrame(now, resent[0])
	acks := frames(b.qp.NextResponse)
	for _, f := range acks {
		a.qp.ReceiveFrame(now, f) // progress: PSN 3 acknowledged
	}
	before := a.qp.Counters().TxRetransmits
	a.qp.ReceiveFrame(now, naks[0]) // the NAK again
	for _, f := range acks {
		a.qp.ReceiveFrame(now, f) // and the ACK again
	}
	if again := frames(func(buf []byte) (int, bool) { return a.qp.NextRequest(now, buf) }); len(again) != 0 {
		t.Errorf("a repeated NAK and ACK started another pass: %d packets resent", len(again))
	}
	for _, f := range resent[1:] {
		b.qp.ReceiveFrame(now, f)
	}
	for _, f := range frames(b.qp.NextResponse) {
		a.qp.ReceiveFrame(now, f)
	}
	if wcs := a.scq.take(); len(wcs) != 1 || wcs[0].Status != WCSuccess {
		t.Fatalf("completions %+v", wcs)
	}
	if got := a.qp.Counters().TxRetransmits; got != before || got != 5 {
		t.Errorf("%d retransmissions, want the 5 of one pass", got)
	}
}
