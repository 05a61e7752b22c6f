package qp

import (
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// countCQ counts completions without keeping them, so the data path allocates nothing.
type countCQ struct{ n, errs int }

func (c *countCQ) Push(wc WC) {
	c.n++
	if wc.Status != WCSuccess {
		c.errs++
	}
}

// writeLoop is an RC pair doing 4 KiB RDMA WRITEs at path MTU 4096: one request packet
// and one ACK per operation, through the whole pipeline (post, build, decode and ICRC
// check, execute, ACK, complete).
type writeLoop struct {
	a, b   *node
	cq     *countCQ
	wr     SendWR
	reqBuf []byte
	ackBuf []byte
	now    int64
}

func newWriteLoop(t testing.TB) *writeLoop {
	o := defaultOpts()
	o.mtu = roce.MTU4096
	a, b := newPair(t, o)
	a.mem.reg(localKey, localBase, 4096, AccessLocalWrite)
	b.mem.reg(remoteKey, remoteBase, 4096, AccessRemoteWrite)
	cq := &countCQ{}
	a.qp.cfg.SendCQ = cq
	return &writeLoop{a: a, b: b, cq: cq, reqBuf: make([]byte, MaxFrameSize), ackBuf: make([]byte, MaxFrameSize),
		wr: SendWR{Opcode: WRWrite, SGL: []SGE{{localBase, 4096, localKey}}, RemoteAddr: remoteBase, RKey: remoteKey}}
}

func (l *writeLoop) op(tb testing.TB) {
	l.now += 400
	l.wr.WRID++
	if err := l.a.qp.PostSend(&l.wr); err != nil {
		tb.Fatal(err)
	}
	n, ok := l.a.qp.NextRequest(l.now, l.reqBuf)
	if !ok {
		tb.Fatal("no request")
	}
	l.b.qp.ReceiveFrame(l.now, l.reqBuf[:n])
	n, ok = l.b.qp.NextResponse(l.ackBuf)
	if !ok {
		tb.Fatal("no ACK")
	}
	l.a.qp.ReceiveFrame(l.now, l.ackBuf[:n])
}

// BenchmarkRCWrite4K reports the requester + responder CPU cost of one 4 KiB packet
// (including its ACK) as ns/op.
func BenchmarkRCWrite4K(b *testing.B) {
	l := newWriteLoop(b)
	b.ReportAllocs()
	b.SetBytes(4096)
	for b.Loop() {
		l.op(b)
	}
	if l.cq.n != int(l.wr.WRID) || l.cq.errs != 0 {
		b.Fatalf("%d completions, %d errors for %d writes", l.cq.n, l.cq.errs, l.wr.WRID)
	}
}

// BenchmarkRCRead4K: one READ request and its 4 KiB response.
func BenchmarkRCRead4K(b *testing.B) {
	l := newWriteLoop(b)
	l.b.mem.regions[remoteKey].access |= AccessRemoteRead
	l.wr.Opcode = WRRead
	b.ReportAllocs()
	b.SetBytes(4096)
	for b.Loop() {
		l.op(b)
	}
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	l := newWriteLoop(t)
	for range 100 {
		l.op(t)
	}
	if n := testing.AllocsPerRun(1000, func() { l.op(t) }); n != 0 {
		t.Errorf("%v allocations per 4 KiB WRITE, want 0", n)
	}
	l.b.mem.regions[remoteKey].access |= AccessRemoteRead
	l.wr.Opcode = WRRead
	if n := testing.AllocsPerRun(1000, func() { l.op(t) }); n != 0 {
		t.Errorf("%v allocations per 4 KiB READ, want 0", n)
	}
}
