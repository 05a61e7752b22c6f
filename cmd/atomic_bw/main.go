// Command atomic_bw is perftest's ib_atomic_bw (4.5-0.17) over a rocelab soft-RNIC:
// FETCH_AND_ADD (or -A CMP_AND_SWAP) on 8 bytes, the out-of-band exchange without -R,
// perftest's output table. Run it in a lab host:
//
//	rocelab exec h1 -- atomic_bw -x 1
//	rocelab exec h2 -- atomic_bw -x 1 10.0.0.1
//
// See docs/apps.md.
package main

import (
	"os"

	"github.com/rocelab/rocelab/apps/perftest"
)

func main() { os.Exit(perftest.Main(perftest.AtomicBW, os.Args)) }
