// Command read_lat is perftest's ib_read_lat (4.5-0.17) over a rocelab soft-RNIC: the
// client's RDMA READ round trips, the out-of-band exchange without -R, perftest's
// latency table. Run it in a lab host:
//
//	rocelab exec h1 -- read_lat -x 1
//	rocelab exec h2 -- read_lat -x 1 10.0.0.1
//
// See docs/apps.md.
package main

import (
	"os"

	"github.com/rocelab/rocelab/apps/perftest"
)

func main() { os.Exit(perftest.Main(perftest.ReadLat, os.Args)) }
