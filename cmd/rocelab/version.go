package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print rocelab's version and the Go toolchain that built it",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			version, goVersion := "(devel)", "unknown"
			if info, ok := debug.ReadBuildInfo(); ok {
				goVersion = info.GoVersion
				for _, s := range info.Settings {
					if s.Key == "vcs.revision" {
						version = s.Value
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rocelab %s (%s)\n", version, goVersion)
		},
	})
}
