package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/wireshark"
)

func init() {
	ws := &cobra.Command{
		Use:   "wireshark",
		Short: "Wireshark support: Lua dissectors for INT, IFA, HPCC hops and rocelab probes",
	}
	var dir string
	install := &cobra.Command{
		Use:   "install",
		Short: "Install rocelab's Lua dissectors into Wireshark's personal plugin directory",
		Long: `install writes rocelab.lua into ~/.local/lib/wireshark/plugins (or --dir), where
Wireshark and tshark load it at start-up. RoCEv2 owns UDP port 4791, so enable
"Try heuristic sub-dissectors first" for UDP (tshark -o udp.try_heuristic_first:TRUE)
to see INT, HPCC and probe fields on RoCEv2 packets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := wireshark.Install(dir)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "installed", path)
			return nil
		},
	}
	install.Flags().StringVar(&dir, "dir", "", "plugin directory (default ~/.local/lib/wireshark/plugins)")
	ws.AddCommand(install)
	rootCmd.AddCommand(ws)
}
