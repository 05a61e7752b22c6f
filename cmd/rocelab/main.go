// Command rocelab is the RoCEv2 emulator's command-line interface: labs, experiments,
// decoding, conformance suites and congestion-control tools.
//
// Each subcommand lives in its own file and registers itself with the root command
// in an init function, so the command tree reads as the file list.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

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
	PersistentPreRunE: func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		stopProfile = func() error {
			pprof.StopCPUProfile()
			return f.Close()
		}
		return nil
	},
}

// cpuProfile is --cpuprofile's file; stopProfile ends the profile the command started.
var (
	cpuProfile  string
	stopProfile = func() error { return nil }
)

func init() {
	rootCmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "",
		"write a CPU profile of the command to `FILE` (go tool pprof); make pgo merges such profiles into cmd/rocelab/default.pgo, which go build optimizes rocelab with")
}

func main() {
	err := rootCmd.Execute()
	if perr := stopProfile(); err == nil && perr != nil {
		err = fmt.Errorf("--cpuprofile: %w", perr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rocelab:", err)
		os.Exit(1)
	}
}
