package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestExitStatusOfSignaledChild: exec exits as a shell does, 128+N for a command killed
// by signal N (it exited 255).
func TestExitStatusOfSignaledChild(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{{"exit 3", 3}, {"kill -TERM $$", 128 + 15}, {"kill -KILL $$", 128 + 9}} {
		err := exec.Command("sh", "-c", tc.script).Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v", tc.script, err)
		}
		if got := exitStatus(exit); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.script, got, tc.want)
		}
	}
}

// TestCaptureDurationMustBePositive: --duration -1s never stopped; now it is refused
// before any lab is looked up.
func TestCaptureDurationMustBePositive(t *testing.T) {
	for _, d := range []string{"-1s", "0s"} {
		cmd := newCaptureCmd()
		cmd.SetArgs([]string{"s1:p1", "--duration", d})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "want a positive duration") {
			t.Errorf("--duration %s: %v", d, err)
		}
	}
}
