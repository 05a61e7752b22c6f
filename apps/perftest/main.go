package perftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
	switch {
	case errors.Is(err, errHelp):
		fmt.Print(Usage(t, argv0))
		return 1
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(os.Stderr, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
		fmt.Print(Usage(t, argv0))
		fmt.Fprintln(os.Stderr, " Parser function exited with Error")
		return 1
	case errors.Is(err, errVersion):
		fmt.Println(err)
		return 1
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, " Parser function exited with Error")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := Run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
