package verbs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
	"github.com/rocelab/rocelab/rnic/verbs"
)

// TestBudgetMappingLimit is the crash, scaled down by a small budget: a client
// fills its mappings with CQs, frees 30, then asks for CQs of 2^20 entries. The lab
// process used to run out of mappings (vm.max_map_count) and die; now the client's
// share of the host's share of the lab bounds it: ENOMEM naming the limit, sizes past
// the device's max_cqe EINVAL, and h1's other apps and h2's keep opening their device
// and moving data.
func TestBudgetMappingLimit(t *testing.T) {
	b := service.NewBudget(service.Usage{FDs: 400, Maps: 400, MapBytes: 1 << 34, Memory: 256 << 20}, 2)
	l := newLab(t, service.WithBudget(b))
	ctx, err := verbs.Open(l.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	var cqs []*verbs.CQ
	for {
		cq, err := ctx.CreateCQ(1, nil)
		if err != nil {
			if !errors.Is(err, rnic.ErrNoMemory) || !strings.Contains(err.Error(), "mappings") {
				t.Fatalf("CQ %d refused with %v, want ENOMEM naming the mapping budget", len(cqs), err)
			}
			t.Logf("CQ %d: %v", len(cqs), err)
			break
		}
		cqs = append(cqs, cq)
		if len(cqs) > int(b.Client.Maps) {
			t.Fatalf("%d CQs, each a mapping, past the client's budget of %d", len(cqs), b.Client.Maps)
		}
	}
	if used := l.srvs[0].Stats().Budget.Used; used.Maps != b.Client.Maps {
		t.Errorf("h1's use %+v, want the client's %d mappings", used, b.Client.Maps)
	}
	// The client holds its whole budget: the others of its host and h2's open their
	// devices and move data.
	writeWorks(t, l)
	for _, cq := range cqs[:30] {
		if err := ctx.DestroyCQ(cq); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := ctx.CreateCQ(1<<20, nil); !errors.Is(err, rnic.ErrNoMemory) || !strings.Contains(err.Error(), "bytes of memory") {
			t.Fatalf("CQ of 2^20 entries: %v, want ENOMEM naming the memory budget", err)
		}
	}
	if _, err := ctx.CreateCQ(rnic.MaxCQE+1, nil); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("CQ of max_cqe+1 entries: %v, want EINVAL", err)
	}
	writeWorks(t, l)
	waitFor(t, "h2's budget returned once its app closed", func() bool { return l.srvs[1].Stats().Budget.Used == service.Usage{} })
	ctx.Close()
	waitFor(t, "h1's budget returned", func() bool { return l.srvs[0].Stats().Budget.LabUse == service.Usage{} })
}
