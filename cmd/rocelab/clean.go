package main

import (
	"fmt"
	"io"

	"github.com/rocelab/rocelab/netns"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func init() { rootCmd.AddCommand(newCleanCmd()) }

// newCleanCmd builds `rocelab clean`: a fresh command per call, so tests can run it
// in-process without flag values leaking between runs.
func newCleanCmd() *cobra.Command {
	var dryRun, verbose bool
	cmd := &cobra.Command{
		Use:   "clean [--dry-run]",
		Short: "Remove the leftovers of crashed labs (only rocelab's)",
		Long: `clean removes every lab whose lab process is gone: its processes (SIGTERM, then
SIGKILL), network namespaces, devices, sockets and state directory. Labs that still
run are left alone (stop them with rocelab down). A namespace named like rocelab's
("rl-...") that no lab's state file records is reported and left alone; if live
processes use it (a lab under another state directory holds its TAPs, or processes
run inside it), clean says so and suggests nothing. A crashed lab whose namespace a
live process outside it holds (a lab of the same name under another state
directory) is left alone too.

Labs are found in $ROCELAB_STATE_DIR, by default /run/rocelab, and in every other
state directory a lab was made in (a test's temporary one, say), which rocelab records
in /run/rocelab-stores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := &netns.Cleaner{
				Store:   netns.DefaultStore(),
				Log:     stderrLogger(cmd.ErrOrStderr(), verbose),
				DryRun:  dryRun,
				Indexed: true,
			}
			rep, err := c.Clean()
			printCleanReport(cmd.OutOrStdout(), rep, dryRun)
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log each step to stderr")
	return cmd
}

func printCleanReport(w io.Writer, rep netns.Report, dryRun bool) {
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, r := range rep.Removed {
		fmt.Fprintf(w, "%s %s\n", verb, r)
	}
	for _, lab := range rep.Running {
		fmt.Fprintf(w, "left lab %s alone: its lab process runs (stop it with rocelab down %s)\n", lab, lab)
	}
	for _, u := range rep.InUse {
		if u.Lab != "" {
			fmt.Fprintf(w, "left crashed lab %s and its %s (a live lab of the same name under another state directory?)\n", u.Lab, u)
		} else {
			fmt.Fprintf(w, "left %s (no lab here records it: a live lab under another state directory, or live processes)\n", u)
		}
	}
	for _, ns := range rep.Foreign {
		fmt.Fprintf(w, "left namespace %s alone: named like rocelab's, but no lab records it (ip netns delete %s removes it)\n", ns, ns)
	}
	for _, pin := range rep.ForeignViews {
		fmt.Fprintf(w, "left host view %s alone: no lab here records it (a lab under another state directory?; umount %s && rm %s removes it)\n", pin, pin, pin)
	}
	if len(rep.Removed) == 0 {
		fmt.Fprintln(w, "nothing to clean")
	}
}

// stderrLogger logs warnings (and with verbose, every step) as console lines to w.
func stderrLogger(w io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.InfoLevel
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), level))
}
