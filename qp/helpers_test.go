package qp

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// fakeMem is an in-memory protection domain: regions by key, with bounds and access
// checks, as the rnic's MR table provides them.
type fakeMem struct {
	regions map[uint32]*region
}

type region struct {
	base   uint64
	buf    []byte
	access Access
}

func newFakeMem() *fakeMem { return &fakeMem{regions: map[uint32]*region{}} }

// reg registers size bytes at base under key (used as both lkey and rkey).
func (m *fakeMem) reg(key uint32, base uint64, size int, access Access) []byte {
	r := &region{base: base, buf: make([]byte, size), access: access}
	m.regions[key] = r
	return r.buf
}

func (m *fakeMem) lookup(key uint32, addr, n uint64, need Access) ([]byte, error) {
	r := m.regions[key]
	if r == nil {
		return nil, ErrInvalidKey
	}
	if addr < r.base || addr-r.base > uint64(len(r.buf)) || n > uint64(len(r.buf))-(addr-r.base) {
		return nil, ErrOutOfBounds
	}
	if r.access&need != need {
		return nil, ErrAccessDenied
	}
	return r.buf[addr-r.base : addr-r.base+n], nil
}

func (m *fakeMem) Read(key uint32, addr uint64, dst []byte, need Access) error {
	b, err := m.lookup(key, addr, uint64(len(dst)), need)
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (m *fakeMem) Write(key uint32, addr uint64, src []byte, need Access) error {
	b, err := m.lookup(key, addr, uint64(len(src)), need)
	if err == nil {
		copy(b, src)
	}
	return err
}

func (m *fakeMem) Check(key uint32, addr uint64, n uint64, need Access) error {
	_, err := m.lookup(key, addr, n, need)
	return err
}

func (m *fakeMem) Atomic(key uint32, addr uint64, op AtomicOp, need Access) (uint64, error) {
	b, err := m.lookup(key, addr, 8, need)
	if err != nil {
		return 0, err
	}
	orig := binary.LittleEndian.Uint64(b)
	binary.LittleEndian.PutUint64(b, op.Apply(orig))
	return orig, nil
}

func (m *fakeMem) Invalidate(rkey uint32) error {
	if m.regions[rkey] == nil {
		return ErrInvalidKey
	}
	delete(m.regions, rkey)
	return nil
}

// BindMW implements Memory: the fake has no memory windows.
func (m *fakeMem) BindMW(*MWBind) error { return ErrInvalidKey }

// cqRec records completions.
type cqRec struct{ wcs []WC }

func (c *cqRec) Push(wc WC) { c.wcs = append(c.wcs, wc) }

func (c *cqRec) take() []WC {
	w := c.wcs
	c.wcs = nil
	return w
}

// node is one end of a test connection: a QP with its memory and CQs.
type node struct {
	qp       *QP
	mem      *fakeMem
	scq, rcq *cqRec
	av       AddressVector // the path to this node, as its peer sees it
}

func nodeAddr(i int) AddressVector {
	ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
	return AddressVector{DGID: roce.GIDFromAddr(ip), DstMAC: [6]byte{2, 0, 0, 0, 0, byte(i)}}
}

type pairOpts struct {
	typ         Type
	mtu         roce.MTU
	sqDepth     int
	rqDepth     int
	access      Access
	timeout     uint8
	retry       uint8
	rnrRetry    uint8
	minRNRTimer uint8
	maxRd       uint8
	sigAll      bool
	ackReqEvery int
	rxeRetryCnt bool // retry_cnt 7 retries forever
	segment     int
	mem         [2]*fakeMem // shared memories, nil = fresh
	qpn         [2]roce.QPN
}

func defaultOpts() pairOpts {
	return pairOpts{typ: RC, mtu: roce.MTU1024, sqDepth: 64, rqDepth: 64,
		access:  AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic,
		timeout: 8, retry: 7, rnrRetry: 7, minRNRTimer: 1, maxRd: 16, sigAll: true,
		qpn: [2]roce.QPN{0x11, 0x22}}
}

func newNode(t testing.TB, o pairOpts, i int) *node {
	t.Helper()
	n := &node{mem: o.mem[i], scq: &cqRec{}, rcq: &cqRec{}, av: nodeAddr(i + 1)}
	if n.mem == nil {
		n.mem = newFakeMem()
	}
	q, err := New(Config{Type: o.typ, QPN: o.qpn[i], Memory: n.mem, SendCQ: n.scq, RecvCQ: n.rcq,
		MaxSendWR: o.sqDepth, MaxRecvWR: o.rqDepth, MaxSGE: 4, SigAll: o.sigAll, PortMTU: o.mtu,
		AckReqEvery: o.ackReqEvery, RXERetryCnt: o.rxeRetryCnt, Segment: o.segment})
	if err != nil {
		t.Fatal(err)
	}
	n.qp = q
	return n
}

// newPair creates two QPs and brings them to RTS, connected to each other (UD QPs
// share the Q_Key 0x11111111).
func newPair(t testing.TB, o pairOpts) (a, b *node) {
	t.Helper()
	a, b = newNode(t, o, 0), newNode(t, o, 1)
	connect(t, o, a, b)
	connect(t, o, b, a)
	return a, b
}

func connect(t testing.TB, o pairOpts, n, peer *node) {
	t.Helper()
	av := peer.av
	av.SGID, av.SrcMAC = n.av.DGID, n.av.DstMAC
	steps := []struct {
		a    Attr
		mask AttrMask
	}{
		{Attr{State: StateInit, Port: 1, AccessFlags: o.access, QKey: 0x11111111}, AttrState | AttrPKeyIndex | AttrPort},
		{Attr{State: StateRTR, AV: av, PathMTU: o.mtu, DestQPN: peer.qp.QPN(), RQPSN: 0xFFFFF0,
			MaxDestRdAtomic: o.maxRd, MinRNRTimer: o.minRNRTimer}, AttrState},
		{Attr{State: StateRTS, SQPSN: 0xFFFFF0, Timeout: o.timeout, RetryCnt: o.retry, RNRRetry: o.rnrRetry,
			MaxRdAtomic: o.maxRd}, AttrState},
	}
	for _, s := range steps {
		cur := n.qp.State()
		tr := transitions[cur][s.a.State]
		if err := n.qp.Modify(&s.a, s.mask|tr.required[typeIndex(o.typ)]); err != nil {
			t.Fatalf("%v → %v: %v", cur, s.a.State, err)
		}
	}
}

// exchange moves frames between a and b without loss until both are idle, running
// timers when nothing else is left. It returns the virtual time reached.
func exchange(t testing.TB, now int64, a, b *node) int64 {
	t.Helper()
	return exchangeWith(t, now, a, b, nil)
}

// exchangeWith is exchange with a filter that drops the frames it returns true for.
func exchangeWith(t testing.TB, now int64, a, b *node, drop func(from *node, frame []byte) bool) int64 {
	t.Helper()
	buf := make([]byte, MaxFrameSize)
	for range 1_000_000 {
		moved := false
		for _, pair := range [2][2]*node{{a, b}, {b, a}} {
			from, to := pair[0], pair[1]
			for {
				n, ok := from.qp.NextResponse(buf)
				if !ok {
					n, ok = from.qp.NextRequest(now, buf)
				}
				if !ok {
					break
				}
				if drop == nil || !drop(from, buf[:n]) {
					to.qp.ReceiveFrame(now, buf[:n])
				}
				moved = true
				now += 100
			}
		}
		if moved {
			continue
		}
		d := min(a.qp.NextDeadline(), b.qp.NextDeadline())
		if d == Never {
			return now
		}
		now = max(now, d)
		a.qp.OnTimer(now)
		b.qp.OnTimer(now)
	}
	t.Fatal("exchange did not settle")
	return now
}
