package rnic

import (
	"errors"
	"testing"

	"github.com/rocelab/rocelab/qp"
)

// TestResizeCQKeepsCompletions: ibv_resize_cq keeps what the CQ holds, in order, and
// refuses a size below it, as rxe.
func TestResizeCQKeepsCompletions(t *testing.T) {
	_, d, _ := pair(t)
	cq, err := d.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		cq.Push(qp.WC{WRID: uint64(i)})
	}
	wcs := make([]qp.WC, 2)
	if n, _ := cq.PollCQ(wcs); n != 2 { // the ring's head moves off slot 0
		t.Fatalf("polled %d", n)
	}
	cq.Push(qp.WC{WRID: 4})
	if err := cq.ResizeCQ(2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("resize to 2 while it holds 3: %v", err)
	}
	if err := cq.ResizeCQ(0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("resize to 0: %v", err)
	}
	if err := cq.ResizeCQ(16); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 16; i++ { // the new room: no overrun
		cq.Push(qp.WC{WRID: uint64(i)})
	}
	got := make([]qp.WC, 16)
	n, err := cq.PollCQ(got)
	if err != nil || n != 14 {
		t.Fatalf("polled %d: %v", n, err)
	}
	for i, wc := range got[:n] {
		if wc.WRID != uint64(i+2) {
			t.Fatalf("completion %d is WR %d, want %d", i, wc.WRID, i+2)
		}
	}
}

// TestResizeSRQ: the SRQ keeps its WRs in order; below them or below an armed limit
// is refused, as rxe.
func TestResizeSRQ(t *testing.T) {
	_, d, _ := pair(t)
	pd, _ := d.AllocPD()
	s, err := d.CreateSRQ(pd, SRQInitAttr{MaxWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := s.PostSRQRecv(&qp.RecvWR{WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Pop()
	if err := s.PostSRQRecv(&qp.RecvWR{WRID: 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.PostSRQRecv(&qp.RecvWR{WRID: 5}); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("a full SRQ: %v", err)
	}
	if err := s.ResizeSRQ(3); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("resize to 3 while it holds 4: %v", err)
	}
	if err := s.ResizeSRQ(8); err != nil {
		t.Fatal(err)
	}
	if err := s.ModifySRQ(6); err != nil {
		t.Fatal(err)
	}
	if err := s.ResizeSRQ(5); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("resize below the armed limit: %v", err)
	}
	for i := 5; i < 9; i++ {
		if err := s.PostSRQRecv(&qp.RecvWR{WRID: uint64(i)}); err != nil {
			t.Fatalf("WR %d after the resize: %v", i, err)
		}
	}
	for want := uint64(1); want < 9; want++ {
		if wr, ok := s.Pop(); !ok || wr.WRID != want {
			t.Fatalf("popped %d (%v), want %d", wr.WRID, ok, want)
		}
	}
}

// TestReregMR: a region moved to another PD keeps its keys and leaves the old PD; an
// access change is checked as at registration.
func TestReregMR(t *testing.T) {
	_, d, _ := pair(t)
	pd, _ := d.AllocPD()
	pd2, _ := d.AllocPD()
	mr, err := d.RegMR(pd, 4096, qp.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ReregMR(mr, nil, qp.AccessRemoteWrite, true); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("remote write without local write: %v", err)
	}
	if err := d.ReregMR(mr, nil, qp.AccessLocalWrite|qp.AccessRemoteWrite, true); err != nil {
		t.Fatal(err)
	}
	if err := pd.Write(mr.RKey(), mr.Addr(), make([]byte, 8), qp.AccessRemoteWrite); err != nil {
		t.Errorf("remote write after the access change: %v", err)
	}
	if err := d.ReregMR(mr, pd2, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := pd.Write(mr.RKey(), mr.Addr(), make([]byte, 8), qp.AccessRemoteWrite); !errors.Is(err, qp.ErrInvalidKey) {
		t.Errorf("the old PD still reaches the region: %v", err)
	}
	if err := pd2.Write(mr.RKey(), mr.Addr(), make([]byte, 8), qp.AccessRemoteWrite); err != nil {
		t.Errorf("the new PD, same key, access kept: %v", err)
	}
	if err := d.DeallocPD(pd2); !errors.Is(err, ErrBusy) {
		t.Errorf("the new PD holds the region: %v", err)
	}
	if err := d.DeallocPD(pd); err != nil {
		t.Errorf("the old PD holds nothing: %v", err)
	}
}
