package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/experiment"
)

// newFlowsCmd returns `experiment flows`: the mix's arrivals as a flow file.
func newFlowsCmd() *cobra.Command {
	cfg := experiment.MixDefaults()
	var hosts int
	cmd := &cobra.Command{
		Use:   "flows",
		Short: "Write the mix scenario's arrivals as a flow file in the HPCC simulator's format",
		Long: `Draws flows as the mix scenario does — per host a Poisson process at --load of
--link-rate, sizes from --cdf, destinations uniformly among the other hosts, as the
HPCC simulator's traffic_gen.py draws them — among --hosts hosts (node IDs 0 to
hosts-1) and prints them in the simulator's flow-file format: the number of flows,
then "src dst priority dport size start_seconds" per line, starting at 2 s as its
generator's files do. The same flags and seed give the same file; 'experiment mix
--flows FILE' replays it, and so does the simulator.`,
		Example: `  rocelab experiment flows --cdf websearch --load 0.3 --duration 5ms --hosts 320 --seed 1 > flows.txt`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("flows") && !cmd.Flags().Changed("duration") {
				cfg.Duration = 0
			}
			flows, err := experiment.GenerateFlows(cfg, hosts)
			if err != nil {
				return err
			}
			return experiment.WriteSimFlows(cmd.OutOrStdout(), flows)
		},
	}
	f := cmd.Flags()
	f.IntVar(&hosts, "hosts", 16, "hosts (node IDs 0 to hosts-1)")
	f.StringVar(&cfg.CDF, "cdf", cfg.CDF, "flow sizes: "+strings.Join(experiment.CDFNames, ", ")+" or a CDF file")
	f.Float64Var(&cfg.Load, "load", cfg.Load, "offered load, a fraction of each host link's rate")
	f.Var(rateValue{&cfg.LinkRate}, "link-rate", "host link rate the load is a fraction of")
	f.Var(durationValue{&cfg.Duration}, "duration", "arrival window")
	f.IntVar(&cfg.Flows, "flows", 0, "stop after this many flows (0: --duration decides)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed")
	return cmd
}
