package service

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// TestProcessBudget: the lab's budget leaves the lab a quarter of its descriptors and of
// the kernel's mappings; hosts share it equally and each client gets half its host's.
func TestProcessBudget(t *testing.T) {
	b := ProcessBudget(4)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	maps := readInt("/proc/sys/vm/max_map_count", 65530)
	t.Logf("lab %+v, host %+v, client %+v (RLIMIT_NOFILE %d, max_map_count %d)", b.Lab, b.Host, b.Client, lim.Cur, maps)
	if b.Lab.FDs <= 0 || b.Lab.FDs > int64(lim.Cur)*3/4 {
		t.Errorf("lab descriptors %d of RLIMIT_NOFILE %d: want at most three quarters", b.Lab.FDs, lim.Cur)
	}
	if b.Lab.Maps <= 0 || b.Lab.Maps > maps*3/4 {
		t.Errorf("lab mappings %d of max_map_count %d: want at most three quarters", b.Lab.Maps, maps)
	}
	if b.Host.Maps != b.Lab.Maps/4 || b.Client.Maps != b.Host.Maps/2 || b.Client.Memory != b.Lab.Memory/8 {
		t.Errorf("shares: host %+v, client %+v of lab %+v", b.Host, b.Client, b.Lab)
	}
}

// TestBudgetLevels: a charge fails at the first level it would pass — the client's,
// its host's or the lab's — with EMFILE's class for descriptors and ENOMEM's for the
// rest, and takes nothing then; release returns exactly what charge took.
func TestBudgetLevels(t *testing.T) {
	b := NewBudget(Usage{FDs: 8, Maps: 8, MapBytes: 1 << 20, Memory: 1 << 20}, 2) // host 4, client 2
	var c1, c2, c3 Usage
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.charge("h1", &c1, 1, Usage{FDs: 2}))
	if err := b.charge("h1", &c1, 1, Usage{FDs: 1}); !errors.Is(err, wire.ErrTooManyFiles) || !strings.Contains(err.Error(), "client pid 1 would hold 3 descriptors") {
		t.Errorf("a client's third descriptor: %v", err)
	}
	must(b.charge("h1", &c2, 2, Usage{FDs: 2}))
	if err := b.charge("h1", &c3, 3, Usage{FDs: 1}); !errors.Is(err, wire.ErrTooManyFiles) || !strings.Contains(err.Error(), "host h1's clients would hold 5 descriptors") {
		t.Errorf("h1's fifth descriptor: %v", err)
	}
	var d1, d2 Usage
	must(b.charge("h2", &d1, 4, Usage{FDs: 1, Maps: 2}))
	must(b.charge("h2", &d2, 5, Usage{Maps: 2}))
	if err := b.charge("h2", &d2, 5, Usage{Memory: 1 << 19}); !errors.Is(err, rnic.ErrNoMemory) || !strings.Contains(err.Error(), "bytes of memory") {
		t.Errorf("half the lab's memory for one client: %v", err)
	}
	if st := b.status("h1"); st.Used != (Usage{FDs: 4}) || st.LabUse != (Usage{FDs: 5, Maps: 4}) {
		t.Errorf("status %+v", st)
	}
	b.release("h1", &c1, c1)
	b.release("h1", &c2, c2)
	b.release("h2", &d1, d1)
	b.release("h2", &d2, d2)
	if st := b.status("h2"); st.LabUse != (Usage{}) || c1 != (Usage{}) || d2 != (Usage{}) {
		t.Errorf("after every release: %+v, clients %+v %+v", st, c1, d2)
	}
}
