package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// TestExitWith: --exit-with refuses what is not a live process, by name; the pidfd of
// a live one signals its exit, and no earlier.
func TestExitWith(t *testing.T) {
	if f, err := openExitWith(0); f != nil || err != nil {
		t.Fatalf("--exit-with 0: %v, %v; want neither", f, err)
	}
	if _, err := openExitWith(-3); err == nil || !strings.Contains(err.Error(), "want a process id") {
		t.Errorf("--exit-with -3: %v", err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := openExitWith(gone.Process.Pid); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Errorf("--exit-with of an exited process: %v", err)
	}

	cat := exec.Command("cat")
	stdin, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	pidfd, err := openExitWith(cat.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer pidfd.Close()
	exited := exitOf(pidfd)
	select {
	case <-exited:
		t.Fatal("exit signalled while the process runs")
	default:
	}
	stdin.Close() // cat exits at the end of its input
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of the process was not signalled within 10 s")
	}
	cat.Wait()
}
