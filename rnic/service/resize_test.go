package service

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// ringCall makes a call answered by RingResp and a memfd, and maps the ring as a
// client would.
func ringCall(t *testing.T, c *conn, op wire.Op, body any) (wire.RingResp, wire.Ring, error) {
	t.Helper()
	req := wire.AppendRequest(nil, op, 0, body)
	_, reqBody, _ := wire.ParseHeader(req)
	out, fds := c.call(op, reqBody, nil, make([]byte, 0, wire.MaxMessage))
	var r wire.RingResp
	if err := wire.ParseResponse(out, op, &r); err != nil {
		wire.CloseFDs(fds)
		return r, wire.Ring{}, err
	}
	if len(fds) != 1 {
		t.Fatalf("%v answered with %d descriptors", op, len(fds))
	}
	mem, err := unix.Mmap(fds[0], 0, int(r.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	ring, ok := wire.NewRing(mem, r.Cap, r.EntrySize)
	if !ok {
		t.Fatalf("%v: ring of %+v does not fit", op, r)
	}
	return r, ring, nil
}

// TestResizeCQCall: the resized ring holds the completions not yet polled at their
// indices, with the header carried over; too small and wrong handles are refused.
func TestResizeCQCall(t *testing.T) {
	c := testConn(t)
	r, ring, err := ringCall(t, c, wire.OpCreateCQ, &wire.CreateCQ{CQE: 4})
	if err != nil {
		t.Fatal(err)
	}
	q := c.objs[r.Handle].(*sCQ)
	for i := range 4 {
		q.put(&qp.WC{WRID: uint64(100 + i)})
	}
	q.publish()
	wire.Store(ring.Cons(), 1) // the client polled one
	wire.Store(ring.Events(), 5)
	if _, _, err := ringCall(t, c, wire.OpResizeCQ, &wire.Resize{Handle: r.Handle, Entries: 2}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("resize to 2 while it holds 3: %v", err)
	}
	if _, _, err := ringCall(t, c, wire.OpResizeCQ, &wire.Resize{Handle: r.Handle + 7, Entries: 8}); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("resize of no CQ: %v", err)
	}
	nr, nring, err := ringCall(t, c, wire.OpResizeCQ, &wire.Resize{Handle: r.Handle, Entries: 9})
	if err != nil || nr.Cap != 16 || nr.Handle != r.Handle {
		t.Fatalf("resize to 9: %+v, %v", nr, err)
	}
	if p, cons, ev := wire.Load(nring.Prod()), wire.Load(nring.Cons()), wire.Load(nring.Events()); p != 4 || cons != 1 || ev != 5 {
		t.Errorf("header after the resize: prod %d cons %d events %d", p, cons, ev)
	}
	for k := uint32(1); k < 4; k++ {
		var wc qp.WC
		wire.GetCQE(nring.Entry(k), &wc)
		if wc.WRID != uint64(100+k) {
			t.Errorf("entry %d holds WR %d", k, wc.WRID)
		}
	}
	for i := 4; i < 18; i++ { // 16 unpolled fit; a 17th overruns
		q.put(&qp.WC{WRID: uint64(100 + i)})
	}
	q.publish()
	if e := wire.Load(nring.Error()); e != wire.RingOverrun {
		t.Errorf("a 16-entry ring given a 17th: error %d", e)
	}
}

// TestResizeSRQCall: the receives posted before the resize stay where the service
// and the rnic SRQ expect them; the new room takes more.
func TestResizeSRQCall(t *testing.T) {
	c := testConn(t)
	var pd wire.Handle
	if err := do(c, wire.OpAllocPD, nil, nil, &pd); err != nil {
		t.Fatal(err)
	}
	r, ring, err := ringCall(t, c, wire.OpCreateSRQ, &wire.CreateSRQ{PD: pd.Handle, MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := c.objs[r.Handle].(*sSRQ)
	post := func(ring wire.Ring, from, to uint32) {
		for k := from; k < to; k++ {
			wire.PutRecvWQE(ring.Entry(k), &qp.RecvWR{WRID: uint64(k)})
		}
		wire.Store(ring.Prod(), to)
		s.drain()
	}
	post(ring, 0, 4)
	if _, _, err := ringCall(t, c, wire.OpResizeSRQ, &wire.Resize{Handle: r.Handle, Entries: 2}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("resize to 2 while it holds 4: %v", err)
	}
	if _, _, err := ringCall(t, c, wire.OpResizeCQ, &wire.Resize{Handle: r.Handle, Entries: 8}); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("RESIZE_CQ of an SRQ: %v", err)
	}
	nr, nring, err := ringCall(t, c, wire.OpResizeSRQ, &wire.Resize{Handle: r.Handle, Entries: 8})
	if err != nil || nr.Cap != 8 {
		t.Fatalf("resize to 8: %+v, %v", nr, err)
	}
	post(nring, 4, 8)
	if n := s.srq.Len(); n != 8 {
		t.Fatalf("the SRQ holds %d WRs, want 8", n)
	}
	for want := uint64(0); want < 8; want++ {
		wr, ok := s.srq.Pop()
		if !ok {
			t.Fatalf("SRQ empty at %d", want)
		}
		if got, ok := s.rq.retire(uint32(wr.WRID)); !ok || got != want {
			t.Fatalf("WR %d retires as %d (%v)", want, got, ok)
		}
	}
	if cons := wire.Load(nring.Cons()); cons != 8 {
		t.Errorf("the ring's consumer index is %d after 8 retired", cons)
	}
}

// TestReregMRCall: unknown MRs and PDs are refused; a PD change needs a PD.
func TestReregMRCall(t *testing.T) {
	c := testConn(t)
	if err := do(c, wire.OpReregMR, &wire.ReregMR{Handle: 9, ChangeAccess: 1}, nil, nil); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("rereg of no MR: %v", err)
	}
}
