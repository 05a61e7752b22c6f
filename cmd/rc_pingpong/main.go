// Command rc_pingpong is rdma-core's ibv_rc_pingpong example over a rocelab
// soft-RNIC: same flags, same out-of-band exchange, same output. Run it in a lab host:
//
//	rocelab exec h1 -- rc_pingpong -g 1
//	rocelab exec h2 -- rc_pingpong -g 1 10.0.0.1
//
// See docs/apps.md.
package main

import (
	"os"

	"github.com/rocelab/rocelab/apps/pingpong"
)

func main() { os.Exit(pingpong.Main(pingpong.RC, os.Args)) }
