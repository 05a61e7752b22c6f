// Command cmatose is librdmacm's ucmatose example over a rocelab soft-RNIC: one RC
// connection through RDMA-CM, -C SENDs of -S bytes each way. Run it in a lab host:
//
//	rocelab exec h1 -- cmatose
//	rocelab exec h2 -- cmatose -s 10.0.0.1
//
// See docs/apps.md and docs/rdmacm.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rocelab/rocelab/apps/cmatose"
)

func main() {
	cfg, err := cmatose.ParseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Print(cmatose.Usage)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmatose.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}
