package qp

import (
	"errors"
	"fmt"
	"testing"
)

// repostCQ re-posts a WR from inside Push, the moment the completion becomes
// visible, as an application polling its CQ on another core may.
type repostCQ struct {
	wcs    []WC
	repost func(WC)
}

func (c *repostCQ) Push(wc WC) {
	c.wcs = append(c.wcs, wc)
	if c.repost != nil {
		c.repost(wc)
	}
}

// TestRepostFromCompletion: with exactly max_send_wr WRs posted, each completion's
// send-queue slot is free by the time the completion is visible, so re-posting one WR
// per completion never finds the queue full — on success and on flush — at a depth
// the ring's length is and at one it is not (the ring is a power of two long).
func TestRepostFromCompletion(t *testing.T) {
	for _, depth := range []int{4, 5} {
		t.Run(fmt.Sprintf("depth-%d", depth), func(t *testing.T) { testRepostFromCompletion(t, depth) })
	}
}

func testRepostFromCompletion(t *testing.T, depth int) {
	const total = 40
	o := defaultOpts()
	o.sqDepth = depth
	a, b := newPair(t, o)
	withRegions(a, b, AccessRemoteWrite)
	cq := &repostCQ{}
	a.qp.cfg.SendCQ = cq
	posted := 0
	wr := func() *SendWR {
		posted++
		return &SendWR{WRID: uint64(posted), Opcode: WRWrite, Flags: SendSignaled,
			SGL: []SGE{{Addr: localBase, Length: 3000, LKey: localKey}}, RemoteAddr: remoteBase, RKey: remoteKey}
	}
	cq.repost = func(wc WC) {
		if posted == total {
			return
		}
		if err := a.qp.PostSend(wr()); err != nil {
			t.Fatalf("re-post after completion %d (%v): %v", wc.WRID, wc.Status, err)
		}
	}
	for range depth {
		if err := a.qp.PostSend(wr()); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.qp.PostSend(wr()); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("post beyond max_send_wr: %v", err)
	}
	posted--
	exchange(t, 0, a, b)
	if len(cq.wcs) != total {
		t.Fatalf("%d completions, want %d", len(cq.wcs), total)
	}
	for i, wc := range cq.wcs {
		if wc.WRID != uint64(i+1) || wc.Status != WCSuccess {
			t.Fatalf("completion %d: %+v (%v)", i, wc, wc.Status)
		}
	}

	// Flushed completions free their slots first too: in ERR, re-posting from a flush
	// completion is accepted (and flushed in turn).
	cq.wcs, posted = nil, 0
	cq.repost = nil
	for range depth {
		if err := a.qp.PostSend(wr()); err != nil {
			t.Fatal(err)
		}
	}
	cq.repost = func(wc WC) {
		if posted < 2*depth {
			if err := a.qp.PostSend(wr()); err != nil {
				t.Fatalf("re-post after flushed completion %d: %v", wc.WRID, err)
			}
		}
	}
	if err := a.qp.Modify(&Attr{State: StateErr}, AttrState); err != nil {
		t.Fatal(err)
	}
	if len(cq.wcs) != 2*depth {
		t.Fatalf("%d flushed completions, want %d", len(cq.wcs), 2*depth)
	}
	for i, wc := range cq.wcs {
		if wc.WRID != uint64(i+1) || wc.Status != WCWRFlushErr {
			t.Errorf("flushed completion %d: %+v (%v)", i, wc, wc.Status)
		}
	}
}
