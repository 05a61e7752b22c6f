package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/conformance"
	"github.com/rocelab/rocelab/roce/decode"
)

func init() {
	var suite, junit, vectors string
	var signals decode.Signals
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the wire and telemetry conformance suites (roce, int, ioam, ifa, hpcc-int, probe)",
		Long: `conformance runs rocelab's conformance suites and prints one line per case: suite, case,
pass/FAIL/skip and the reason. It exits non-zero when any case fails, naming each failed
case and its reason on stderr. --junit writes the results as JUnit XML as well.

--int-dscp, --hpcc-dscp and --ifa-protocol set the telemetry signalling values the
suites' codecs use (defaults: the codecs' own).

The roce suite replays the Linux rxe captures of the source tree's roce/testdata; run it
inside the tree or point --vectors at that directory.`,
		Example: `  rocelab conformance
  rocelab conformance --suite ioam --junit out/ioam.xml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := signals.Validate(); err != nil {
				return err
			}
			conformance.RoCEVectors, conformance.Signals = vectors, signals
			suites := conformance.Suites()
			if suite != "" {
				s, err := conformance.Find(suite)
				if err != nil {
					return err
				}
				suites = []conformance.Suite{s}
			}
			results := conformance.Run(suites...)
			if err := conformance.PrintTable(cmd.OutOrStdout(), results); err != nil {
				return err
			}
			if junit != "" {
				f, err := os.Create(junit)
				if err != nil {
					return err
				}
				if err := conformance.WriteJUnit(f, results); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			failed := conformance.Failures(results)
			for _, r := range failed {
				fmt.Fprintf(cmd.ErrOrStderr(), "FAIL %s/%s: %v\n", r.Suite, r.Case, r.Err)
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d conformance case(s) failed", len(failed))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&suite, "suite", "", "run only this suite (roce, int, ioam, ifa, hpcc-int, probe)")
	cmd.Flags().StringVar(&junit, "junit", "", "also write JUnit XML to this file")
	cmd.Flags().StringVar(&vectors, "vectors", "", "directory of roce/testdata (default: found above the working directory)")
	signalFlags(cmd.Flags(), &signals)
	rootCmd.AddCommand(cmd)
}
