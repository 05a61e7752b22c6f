package service

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// Usage is what clients make the lab process hold: descriptors (the MRs' memfds, the
// eventfds of channels, the sockets), mappings (MRs, rings, doorbell pages: each one
// of the kernel's vm.max_map_count), the bytes those mappings span (address space), and
// the memory the lab itself allocates for them (ring pages and the service's and the
// device's per-entry state). It is a limit as well as a use.
type Usage struct {
	FDs      int64 `json:"fds"`
	Maps     int64 `json:"maps"`
	MapBytes int64 `json:"map_bytes"`
	Memory   int64 `json:"memory"`
}

func (u Usage) plus(v Usage) Usage {
	return Usage{u.FDs + v.FDs, u.Maps + v.Maps, u.MapBytes + v.MapBytes, u.Memory + v.Memory}
}

func (u Usage) minus(v Usage) Usage {
	return Usage{u.FDs - v.FDs, u.Maps - v.Maps, u.MapBytes - v.MapBytes, u.Memory - v.Memory}
}

// over names the first resource of u beyond limit, with both figures, or "".
func (u Usage) over(limit Usage) (what string, used, max int64) {
	switch {
	case u.FDs > limit.FDs:
		return "descriptors", u.FDs, limit.FDs
	case u.Maps > limit.Maps:
		return "mappings", u.Maps, limit.Maps
	case u.MapBytes > limit.MapBytes:
		return "mapped bytes", u.MapBytes, limit.MapBytes
	case u.Memory > limit.Memory:
		return "bytes of memory", u.Memory, limit.Memory
	}
	return "", 0, 0
}

// Budget bounds what the clients of a lab's verbs services make the lab process hold,
// at three levels: the lab (what the process has, less a reserve for the lab itself),
// each host (an equal share of the lab's: no host's clients can spend what another
// host's applications need) and each client (half its host's share: one runaway
// application leaves its host's others room). One Budget is shared by every host's
// Server (WithBudget); it is safe for concurrent use.
type Budget struct {
	Lab, Host, Client Usage // the limits

	mu    sync.Mutex
	used  Usage
	hosts map[string]*Usage
}

// NewBudget makes a budget of lab shared by hosts hosts.
func NewBudget(lab Usage, hosts int) *Budget {
	hosts = max(hosts, 1)
	host := Usage{lab.FDs / int64(hosts), lab.Maps / int64(hosts), lab.MapBytes / int64(hosts), lab.Memory / int64(hosts)}
	client := Usage{host.FDs / 2, host.Maps / 2, host.MapBytes / 2, host.Memory / 2}
	return &Budget{Lab: lab, Host: host, Client: client, hosts: map[string]*Usage{}}
}

// ProcessBudget derives a lab's budget from what this process really has: the
// descriptor limit (RLIMIT_NOFILE's soft limit, which a lab raises to the hard one
// first) and the kernel's vm.max_map_count, each less what is in use and a quarter
// kept for the lab itself (its sockets, TAPs, captures, the Go runtime's heap
// mappings: the runtime dies when it cannot map); half the address space
// (RLIMIT_AS, else the 47 bits of user space); a quarter of the memory (MemTotal,
// or the cgroup's memory.max if lower).
func ProcessBudget(hosts int) *Budget {
	var lab Usage
	var nofile unix.Rlimit
	fds := int64(4096)
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile) == nil && nofile.Cur < math.MaxInt32 {
		fds = int64(nofile.Cur)
	}
	open := int64(countDir("/proc/self/fd"))
	lab.FDs = max(0, fds-open-fds/4)

	maps := readInt("/proc/sys/vm/max_map_count", 65530)
	lab.Maps = max(0, maps-int64(countMaps())-maps/4)

	as := int64(1) << 47
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) == nil && lim.Cur < uint64(as) {
		as = int64(lim.Cur)
	}
	lab.MapBytes = as / 2

	mem := memTotal()
	if cg := readInt("/sys/fs/cgroup/memory.max", 0); cg > 0 && cg < mem {
		mem = cg
	}
	lab.Memory = mem / 4
	return NewBudget(lab, hosts)
}

func countDir(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

func countMaps() int {
	b, _ := os.ReadFile("/proc/self/maps")
	return bytes.Count(b, []byte{'\n'})
}

func readInt(path string, def int64) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// memTotal is /proc/meminfo's MemTotal in bytes (1 GiB if unreadable).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			if err == nil {
				return n << 10
			}
		}
	}
	return 1 << 30
}

// BudgetStatus is a host's use of its budget, for status.
type BudgetStatus struct {
	Used   Usage `json:"used"`   // the host's clients, together
	Host   Usage `json:"host"`   // the host's share
	Client Usage `json:"client"` // each client's
	LabUse Usage `json:"lab_used"`
	Lab    Usage `json:"lab"`
}

func (b *Budget) status(host string) *BudgetStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &BudgetStatus{Host: b.Host, Client: b.Client, LabUse: b.used, Lab: b.Lab}
	if u := b.hosts[host]; u != nil {
		st.Used = *u
	}
	return st
}

// charge adds u to client's use (and its host's and the lab's) if it fits all three,
// or says which limit it would pass: EMFILE's class for descriptors, ENOMEM's for the
// rest, as the kernel's own limits answer.
func (b *Budget) charge(host string, client *Usage, pid int32, u Usage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hosts[host]
	if h == nil {
		h = &Usage{}
		b.hosts[host] = h
	}
	for _, l := range []struct {
		who         string
		used, limit Usage
	}{{fmt.Sprintf("client pid %d", pid), *client, b.Client}, {"host " + host + "'s clients", *h, b.Host}, {"the lab's clients", b.used, b.Lab}} {
		if what, used, limit := l.used.plus(u).over(l.limit); what != "" {
			class := rnic.ErrNoMemory
			if what == "descriptors" {
				class = wire.ErrTooManyFiles
			}
			return fmt.Errorf("%w: %s would hold %d %s in the lab process, over the budget of %d (docs/verbs-service.md, Budgets; rocelab status shows the use)",
				class, l.who, used, what, limit)
		}
	}
	*client, *h, b.used = client.plus(u), h.plus(u), b.used.plus(u)
	return nil
}

// release returns u, which charge took, from client, its host and the lab.
func (b *Budget) release(host string, client *Usage, u Usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*client = client.minus(u)
	if h := b.hosts[host]; h != nil {
		*h = h.minus(u)
	}
	b.used = b.used.minus(u)
}

// What each thing a client can make the lab hold costs. Memory counts the ring's
// pages (which the lab allocates and touches) and the per-entry state the service and
// the device keep in Go's heap.
const (
	objectMemory = 512     // a handle's map entry and its small object (PD, AH, CM ID)
	connMemory   = 3 << 12 // a connection's buffers and goroutine stack
)

var wcSize = int64(unsafe.Sizeof(qp.WC{}))

// connCost is a connection's: its socket and its doorbell page.
func connCost() Usage {
	return Usage{FDs: 1, Maps: 1, MapBytes: wire.PageSize, Memory: wire.PageSize + connMemory}
}

// mrCost is an MR's: the device keeps a duplicate of its memfd and maps its length.
func mrCost(length uint64) Usage {
	return Usage{FDs: 1, Maps: 1, MapBytes: int64(length), Memory: objectMemory}
}

// ringCost is a CQ's, QP's or SRQ's: one mapping of size bytes the lab allocates, and
// slots entries of per bytes of state.
func ringCost(size uint64, slots, per int64) Usage {
	return Usage{Maps: 1, MapBytes: int64(size), Memory: int64(size) + slots*per + objectMemory}
}

// wqSlotBytes is the service's state per work-queue slot: its WRID, done flag and SGL.
func wqSlotBytes(sge uint32) int64 {
	return 8 + 1 + int64(sge)*int64(unsafe.Sizeof(qp.SGE{}))
}
