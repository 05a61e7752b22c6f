package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/experiment"
)

// newCompareCmd returns `experiment compare`.
func newCompareCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compare DIR_A DIR_B",
		Short: "Two experiment runs side by side: metrics and FCT slowdown by size class, with B/A ratios",
		Long: `Reads the summary.json and flows.csv that 'experiment' wrote into two --out
directories and prints their metrics and their FCT slowdown quantiles (finished flows,
cut at the 50th, 80th and 95th percentile of size) side by side with the ratio B/A
("–" where A's figure is 0). --json prints the same as one object with snake_case keys.`,
		Example: `  rocelab experiment compare out/hpcc out/dcqcn
  rocelab experiment compare out/hpcc out/dcqcn --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := experiment.Compare(args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(c)
			}
			c.WriteText(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
