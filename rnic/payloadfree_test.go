package rnic

import (
	"errors"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// TestPayloadFreeSameTraffic: a backlogged WRITE stream between two PayloadFree
// devices sends and receives the same frames, bytes and completions in the same
// virtual time as between two devices that move the data, and its memory regions are
// lengths that still check keys, bounds and access.
func TestPayloadFreeSameTraffic(t *testing.T) {
	type outcome struct {
		tx, rx    Stats
		completed int
	}
	run := func(cfg Config) outcome {
		v, src, dst := linkedPair(t, 25e9, 1500, cfg)
		s := newStream(t, src, dst, QPInitAttr{}, 64<<10, 2, roce.MTU1024)
		v.RunFor(time.Millisecond)
		return outcome{src.Stats(), dst.Stats(), s.completed}
	}
	real, free := run(Config{}), run(Config{PayloadFree: true})
	t.Logf("%d WRITEs completed, %d frames sent", real.completed, real.tx.TxFrames)
	if real.completed < 10 || free != real {
		t.Errorf("payload-free %+v\nwith data     %+v", free, real)
	}
	if free.rx.RxBadICRC != 0 || free.rx.RxMalformed != 0 {
		t.Errorf("payload-free receiver dropped frames: %+v", free.rx)
	}

	_, d, _ := linkedPair(t, 25e9, 1500, Config{PayloadFree: true})
	pd, _ := d.AllocPD()
	mr, err := d.RegMR(pd, 1<<30, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Bytes() != nil || mr.FD() != -1 || mr.Length() != 1<<30 {
		t.Errorf("payload-free MR: %d bytes of memory, fd %d, length %d", len(mr.Bytes()), mr.FD(), mr.Length())
	}
	if err := pd.Write(mr.RKey(), mr.Addr()+1<<30-4, make([]byte, 8), qp.AccessRemoteWrite); !errors.Is(err, qp.ErrOutOfBounds) {
		t.Errorf("write past the end: %v", err)
	}
	if err := pd.Read(mr.LKey(), mr.Addr(), make([]byte, 8), qp.AccessRemoteRead); !errors.Is(err, qp.ErrAccessDenied) {
		t.Errorf("remote read of a region without it: %v", err)
	}
	if _, err := pd.Atomic(mr.RKey(), mr.Addr(), qp.AtomicOp{SwapAdd: 1}, qp.AccessLocalWrite); !errors.Is(err, qp.ErrAccessDenied) {
		t.Errorf("atomic on a region without memory: %v", err)
	}
	if err := d.DeregMR(mr); err != nil {
		t.Fatal(err)
	}
	if err := d.DeregMR(mr); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("second deregistration: %v", err)
	}
}
