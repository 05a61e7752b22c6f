package lab

import (
	"testing"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
)

// ids are the identifiers a peer would have to guess to forge a frame into a lab's
// connection: the first QPN, the first MR's rkey, and the first draws of the host
// loop's random source, which the CM takes its starting PSNs (and TIDs) from.
type ids struct {
	qpn  uint32
	rkey uint32
	rand [2]uint64
}

func firstIDs(t *testing.T, l *Lab) ids {
	t.Helper()
	d := l.Network.Host("h1").Device
	ch := make(chan ids, 1)
	d.Do(func() {
		var got ids
		defer func() { ch <- got }()
		pd, err := d.AllocPD()
		if err != nil {
			t.Error(err)
			return
		}
		cq, _ := d.CreateCQ(16, nil)
		x, err := d.CreateQP(pd, rnic.QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Error(err)
			return
		}
		mr, err := d.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
		if err != nil {
			t.Error(err)
			return
		}
		r := d.Loop().Rand()
		got = ids{uint32(x.QPN()), mr.RKey(), [2]uint64{r.Uint64(), r.Uint64()}}
	})
	return <-ch
}

// TestFreshLabsDiffer: two labs brought up alike share no QPN, rkey key byte or CM
// random stream: each up seeds them from the system's random source. (Virtual time
// stays seeded: the experiment package's golden tests pin its outputs.)
func TestFreshLabsDiffer(t *testing.T) {
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l1, _, _ := startDoubleLab(t, tp)
	l2, _, _ := startDoubleLab(t, tp)
	a, b := firstIDs(t, l1), firstIDs(t, l2)
	t.Logf("lab 1: %+v; lab 2: %+v", a, b)
	// A QPN (24 bits) and a key byte (8) alike by chance: once in 2^32 runs.
	if a.qpn == b.qpn && a.rkey == b.rkey {
		t.Errorf("both labs' first QPN is %#x and first rkey %#x", a.qpn, a.rkey)
	}
	if a.rand == b.rand {
		t.Errorf("both labs' hosts draw the same CM PSNs: %x", a.rand)
	}
}
