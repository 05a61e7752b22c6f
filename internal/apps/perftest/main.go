package perftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Main runs the tool as a command with args (os.Args) and returns its exit code.
func Main(t Test, args []string) int {
	argv0 := t.Program()
	if len(args) > 0 {
		argv0 = filepath.Base(args[0])
		args = args[1:]
	}
	cfg, err := ParseArgs(t, args)
	if errors.Is(err, ErrUsage) {
		if err != ErrUsage { // -h: just the usage
			fmt.Fprintln(os.Stderr, err)
		}
		fmt.Print(Usage(t, argv0))
		return 1
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
