package pingpong

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// Main runs the example as a command with args (os.Args) and returns its exit code.
func Main(k Kind, args []string) int {
	argv0 := k.Program()
	if len(args) > 0 {
		argv0 = filepath.Base(args[0])
		args = args[1:]
	}
	cfg, err := ParseArgs(k, args)
	if errors.Is(err, ErrUsage) {
		fmt.Fprintln(os.Stderr, err)
		fmt.Print(Usage(k, argv0))
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
