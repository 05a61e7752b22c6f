package rnic

import (
	"fmt"
	"net/netip"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/stamp"
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// incastStar is n hosts around one switch on a virtual clock, 10 Gb/s links of 1 µs,
// every host's QPs under cc; the switch stamps cc's telemetry or marks ECN for DCQCN.
func incastStar(t *testing.T, n int, cc CC) (*clock.Virtual, []*Device) {
	t.Helper()
	const rate, mtu = 10e9, 1500
	v := clock.NewVirtual(1)
	pool := link.NewPool(mtu + 18)
	var prio [64]uint8 // one class: telemetry requests, echoes and data in one queue
	scfg := fabric.Config{ID: 1, Buffer: 4 << 20, SharedBuffer: true, Pool: pool, DSCPPriority: &prio}
	switch cc.Mode {
	case ModeDCQCN:
		scfg.ECN = fabric.ECN{Enabled: true, KMin: 20_000, KMax: 80_000, PMax: 0.2}
	case ModeNone:
	default:
		c, err := Codecs(cc.Telemetry)
		if err != nil {
			t.Fatal(err)
		}
		scfg.Stamper = stamp.New(c)
	}
	sw, err := fabric.New(v.NewLoop("s1"), scfg)
	if err != nil {
		t.Fatal(err)
	}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}) }
	mac := func(i int) [6]byte { return [6]byte{2, 0, 0, 0, 0, byte(i + 1)} }
	var hosts []*Device
	for i := range n {
		a, b, err := link.New(link.Config{Rate: rate, Delay: time.Microsecond, MTU: mtu})
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("h%d", i)
		d, err := Open(Config{Name: name, MAC: mac(i), GIDs: []netip.Addr{ip(i)}, Loop: v.NewLoop(name),
			Link: a, Pool: pool, CC: cc})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, d)
		sw.AddPort(b, fabric.MAC{2, 0xff, 0, 0, 0, byte(i)})
		sw.SetRoute(mac(i), []uint16{uint16(i)})
	}
	for i, d := range hosts {
		for j := range hosts {
			if i != j {
				d.AddNeighbour(ip(j), mac(j))
			}
		}
	}
	return v, hosts
}

// TestDataPathAllocatesNothing runs a 2:1 incast of backlogged 64 KB WRITEs (re-posted
// from the completion handlers) through a switch in virtual time and, after warm-up,
// counts the heap allocations of a window of thousands of data packets and ACKs: there
// must be none. HPCC per-ACK with INT-MD exercises telemetry requests, stamping,
// stripping, echoes and NewAck; DCQCN exercises ECN marks, CNPs and the reaction point.
func TestDataPathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		// Under -race sync.Pool drops a random share of Puts (on purpose, to find
		// misuse), so the frame pool allocates replacements.
		t.Skip("the race detector makes sync.Pool (the frame pool) allocate")
	}
	// One P: sync.Pool caches frames per P, and a goroutine that the Go scheduler moves
	// to another P would find that P's cache empty and allocate.
	// No GC: a collection empties sync.Pool, whose refill then allocates.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	baseRTT := 10 * time.Microsecond
	for _, cc := range []CC{
		{Mode: ModeHPCC, Telemetry: telemetry.FormatINTMD, HPCC: hpcc.DraftParams(10e9, baseRTT, 2)},
		{Mode: ModeHPCCProbe, Telemetry: telemetry.FormatINTMD, HPCC: hpcc.DraftParams(10e9, baseRTT, 2)},
		{Mode: ModeDCQCN},
	} {
		t.Run(string(cc.Mode), func(t *testing.T) {
			v, hosts := incastStar(t, 3, cc)
			var ss []*stream
			for i := range 2 {
				ss = append(ss, newStream(t, hosts[i], hosts[2], QPInitAttr{}, 64<<10, 4, roce.MTU1024))
			}
			// Warm-up: until the queues have peaked, the frame pool, the pool's chain and
			// the links' arrival rings still grow (amortized, a few allocations in all).
			v.RunFor(20 * time.Millisecond)
			var data, acks, cnps uint64
			for i := range 2 {
				data -= hosts[i].Stats().TxFrames
			}
			acks -= hosts[2].Stats().TxFrames
			cnps -= hosts[2].Stats().CNPsSent
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			v.RunFor(5 * time.Millisecond)
			runtime.ReadMemStats(&after)
			for i := range 2 {
				data += hosts[i].Stats().TxFrames
			}
			acks += hosts[2].Stats().TxFrames
			cnps += hosts[2].Stats().CNPsSent
			allocs := after.Mallocs - before.Mallocs
			t.Logf("%d data packets (and probes), %d ACKs (and CNPs, responses; %d CNPs): %d allocations",
				data, acks, cnps, allocs)
			if data < 1000 || acks < 100 {
				t.Fatalf("only %d data packets and %d ACKs in the window", data, acks)
			}
			if cc.Mode == ModeDCQCN && cnps == 0 {
				t.Errorf("DCQCN sent no CNP in the window: its path is not exercised")
			}
			if allocs != 0 {
				t.Errorf("%d allocations over %d packets: the data path must allocate nothing in steady state",
					allocs, data+acks)
			}
			for i, s := range ss {
				if s.completed == 0 {
					t.Errorf("stream %d completed nothing", i)
				}
			}
		})
	}
}
