// Command send_lat is perftest's ib_send_lat (4.5-0.17) over a rocelab soft-RNIC: the common
// flags, the out-of-band exchange without -R, perftest's output table. Run it in a
// lab host:
//
//	rocelab exec h1 -- send_lat -x 1
//	rocelab exec h2 -- send_lat -x 1 10.0.0.1
//
// See docs/apps.md.
package main

import (
	"os"

	"github.com/rocelab/rocelab/apps/perftest"
)

func main() { os.Exit(perftest.Main(perftest.SendLat, os.Args)) }
