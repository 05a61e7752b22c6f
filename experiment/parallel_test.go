package experiment

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
)

// TestParallelMixSameOnAnyThreads: a mix on the parallel driver writes the same bytes
// (every data file, the summary, the JSON) on one, two and three threads, for HPCC and
// DCQCN on the leaf-spine and for the HPCC paper's three-tier fat tree, and every flow
// finishes. The race detector runs it too (make test's first pass): the partitions'
// windows share nothing but the links' hand-over.
func TestParallelMixSameOnAnyThreads(t *testing.T) {
	leaf := mixConfig()
	leaf.Duration, leaf.MTU = 60*time.Microsecond, roce.MTU1024
	dcqcn := leaf
	dcqcn.CC = rnic.ModeDCQCN
	fat3 := MixDefaults()
	fat3.Topology, fat3.Load, fat3.Duration = "fat-tree-3tier", 0.3, 20*time.Microsecond
	if raceEnabled {
		fat3.Duration = 5 * time.Microsecond
	}
	for name, cfg := range map[string]Config{"leaf-spine-hpcc": leaf, "leaf-spine-dcqcn": dcqcn, "fat3-hpcc": fat3} {
		t.Run(name, func(t *testing.T) {
			cfg.Threads = 1
			ref := goldenOutputs(t, cfg)
			if !bytes.Contains(ref["summary"], []byte("driver            parallel")) {
				t.Fatalf("the summary does not name the parallel driver:\n%s", ref["summary"])
			}
			for _, threads := range []int{2, 3} {
				cfg.Threads = threads
				got := goldenOutputs(t, cfg)
				for file, want := range ref {
					if !bytes.Equal(got[file], want) {
						t.Errorf("%d threads: %s differs from one thread's", threads, file)
					}
				}
			}
		})
	}
}

// TestPartitionTopology: a fat tree splits by pod with the core switches dealt among
// the pods, a leaf-spine by leaf, and a star is one partition; the lookahead is the
// least delay of a link between partitions.
func TestPartitionTopology(t *testing.T) {
	p := topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500}
	// checkParts checks that part has n partitions of hosts hosts each.
	checkParts := func(name string, tp *topo.Topology, part partitioning, n, hosts int) {
		t.Helper()
		if part.n != n {
			t.Errorf("%s: %d partitions, want %d", name, part.n, n)
			return
		}
		perPart := make([]int, part.n)
		for _, h := range tp.Hosts {
			perPart[part.partition(h.Name)]++
		}
		for i, got := range perPart {
			if got != hosts {
				t.Errorf("%s: partition %d holds %d hosts, want %d", name, i, got, hosts)
			}
		}
	}
	fat, err := topo.FatTree(8, p)
	if err != nil {
		t.Fatal(err)
	}
	part := partitionTopology(fat)
	for i, l := range fat.Links { // one link between partitions, the least delay
		if part.partition(l.Endpoints[0]) != part.partition(l.Endpoints[1]) {
			fat.Links[i].Delay = 700 * time.Nanosecond
			break
		}
	}
	part = partitionTopology(fat)
	if part.lookahead != 700*time.Nanosecond {
		t.Errorf("k=8 fat tree: lookahead %v, want 700ns", part.lookahead)
	}
	checkParts("k=8 fat tree (its pods)", fat, part, 8, 16)
	if part.partition("arrivals") != -1 {
		t.Errorf("a loop that is no node's is in partition %d, want the coordinator (-1)", part.partition("arrivals"))
	}
	// Fewer pods than minPartitions: cut at the first tier of switches.
	small, err := topo.FatTree(4, p)
	if err != nil {
		t.Fatal(err)
	}
	checkParts("k=4 fat tree (its ToRs)", small, partitionTopology(small), 8, 2)
	paper, err := topo.FatTree3(topo.PaperThreeTier, p)
	if err != nil {
		t.Fatal(err)
	}
	checkParts("320-host three-tier tree (its ToRs)", paper, partitionTopology(paper), 20, 16)
	ls, err := topo.LeafSpine(3, 2, 4, p)
	if err != nil {
		t.Fatal(err)
	}
	if part := partitionTopology(ls); part.n != 3 {
		t.Errorf("leaf-spine of 3 leaves: %d partitions, want 3", part.n)
	}
	star, err := topo.Parse([]byte(strings.Join([]string{"hosts:", "  - {name: h1, ipv4: 10.0.0.1}", "  - {name: h2, ipv4: 10.0.0.2}", "switches:", "  - {name: s1}",
		"links:", "  - {endpoints: [h1, s1], rate: 1G}", "  - {endpoints: [h2, s1], rate: 1G}"}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if part := partitionTopology(star); part.n != 1 {
		t.Errorf("star: %d partitions, want 1", part.n)
	}
	for i, l := range fat.Links { // a link between pods without delay: no window is safe
		if part.partition(l.Endpoints[0]) != part.partition(l.Endpoints[1]) {
			fat.Links[i].Delay = 0
			break
		}
	}
	part = partitionTopology(fat)
	if part.n != 1 || part.lookahead <= 0 {
		t.Errorf("k=8 fat tree with a link of no delay between pods: %d partitions, lookahead %v; want 1 and a positive window", part.n, part.lookahead)
	}
	for _, s := range fat.Switches {
		if i := part.partition(s.Name); i != 0 {
			t.Errorf("one partition: %s is in partition %d", s.Name, i)
		}
	}
}
