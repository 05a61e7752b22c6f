package rnic

import (
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
)

// TestIntactFramesSkipOnlyTheirICRC: frames a device builds arrive intact
// (link.Frame.Intact) and are accepted without an ICRC check, but a bit the link's
// corrupt fault flips clears it, so the receiver checks and drops what it broke
// (RxBadICRC) and the stream recovers by retransmission. A frame that lost the mark
// anywhere else, as one from a TAP, is checked as before.
func TestIntactFramesSkipOnlyTheirICRC(t *testing.T) {
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 1e9, Delay: time.Microsecond, MTU: 1500,
		Faults: link.Faults{Corrupt: 0.002}})
	if err != nil {
		t.Fatal(err)
	}
	src, dst := openPair(t, v, a, b, 1500, Config{})
	s := newStream(t, src, dst, QPInitAttr{}, 64<<10, 2, roce.MTU1024)
	v.RunFor(time.Second)
	corrupted := a.Stats().Corrupted
	rx := dst.Stats()
	t.Logf("%d WRITEs completed; %d frames corrupted, %d dropped for their ICRC", s.completed, corrupted, rx.RxBadICRC)
	if corrupted < 10 || rx.RxBadICRC == 0 {
		t.Errorf("%d frames corrupted, %d dropped for their ICRC: want the corrupted frames' ICRC checked", corrupted, rx.RxBadICRC)
	}
	if s.completed < 10 {
		t.Errorf("%d WRITEs completed through the corruption, want retransmissions to recover", s.completed)
	}

	f, buf := src.frameBuffer()
	if !f.Intact {
		t.Error("a frame the device builds is not marked intact")
	}
	f.SetBytes(buf[:64])
	if f.Intact {
		t.Error("SetBytes kept the mark: the bytes are not the device's any more")
	}
	f.Release()
}
