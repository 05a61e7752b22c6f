package lab

import (
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/netns"
)

// BenchmarkLabUp measures `rocelab up`'s work for 16 and 64 hosts (a leaf-spine with
// 4 spines): namespaces, TAPs, nodes, relays and control socket until ready. Down is
// not timed. (The lab process's memory is measured by cmd/rocelab's BenchmarkUp, on
// the real daemon.)
func BenchmarkLabUp(b *testing.B) {
	if unix.Geteuid() != 0 {
		b.Skip("lab: needs root for namespaces and TAPs")
	}
	for _, hosts := range []int{16, 64} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			tp, err := topo.LeafSpine(hosts/8, 4, 8, topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500})
			if err != nil {
				b.Fatal(err)
			}
			store := netns.Store{Root: b.TempDir()}
			var upTime time.Duration
			n := 0
			for b.Loop() {
				name := fmt.Sprintf("b%dx%d", os.Getpid()%10000, n)
				n++
				start := time.Now()
				l, err := Up(Config{Name: name, Topology: tp, Store: store})
				if err != nil {
					b.Fatal(err)
				}
				upTime += time.Since(start)
				b.StopTimer()
				l.Close()
				if _, err := (&netns.Cleaner{Store: store}).Down(name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(upTime.Milliseconds())/float64(n), "ms/up")
		})
	}
}
