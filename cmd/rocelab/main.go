// Command rocelab is the RoCEv2 emulator's command-line interface: labs, experiments,
// decoding, conformance suites and congestion-control tools.
//
// Each subcommand lives in its own file and registers itself with the root command
// in an init function, so the command tree reads as the file list.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "rocelab",
	Short: "RoCEv2 RDMA NIC emulator with HPCC++ congestion control and in-band telemetry",
	Long: `rocelab emulates RoCEv2 RDMA NICs in userspace. Hosts are Linux network namespaces
whose NIC is a soft-RNIC behind a TAP netdev; Go bridge-switches connect them and stamp
in-band network telemetry; the soft-RNICs run HPCC++ congestion control.

Everything that does not need a kernel (transport, fabric, HPCC) also runs in-process in
virtual time, deterministically and without root.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "rocelab:", err)
		os.Exit(1)
	}
}
