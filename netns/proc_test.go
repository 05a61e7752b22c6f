package netns

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestProcessIdentitySurvivesPidReuse(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Error("Self().Alive() = false")
	}
	if reused := (Process{PID: self.PID, StartTime: self.StartTime + 1}); reused.Alive() {
		t.Error("a process with our pid but another start time counts as alive")
	}
	if (Process{}).Alive() {
		t.Error("the zero Process counts as alive")
	}
}

// startSleeper starts `sleep 30`, optionally ignoring SIGTERM, and returns once it
// runs (and ignores SIGTERM), so the test never races the shell's trap.
func startSleeper(t *testing.T, ignoreTerm bool) (*exec.Cmd, Process) {
	t.Helper()
	script := "echo ready; exec sleep 30"
	if ignoreTerm {
		script = `trap "" TERM; ` + script // SIG_IGN survives exec
	}
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("netns: cannot start sh: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p, err := ProcessOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, p
}

func TestTerminate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ignoreTerm bool
		want       syscall.Signal
	}{{"exits on SIGTERM", false, syscall.SIGTERM}, {"ignores SIGTERM", true, syscall.SIGKILL}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, p := startSleeper(t, tc.ignoreTerm)
			start := time.Now()
			signalled, err := terminate(p, 200*time.Millisecond, killWait)
			if !signalled || err != nil {
				t.Fatalf("terminate = %v, %v; want true, nil", signalled, err)
			}
			var exit *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != tc.want {
				t.Errorf("process ended with %v, want killed by %v", err, tc.want)
			}
			t.Logf("stopped in %v", time.Since(start))
		})
	}
}

func TestTerminateLeavesReusedPidAlone(t *testing.T) {
	cmd, p := startSleeper(t, false)
	p.StartTime++ // as if the recorded process died and its pid went to this one
	if signalled, err := terminate(p, time.Second, killWait); signalled || err != nil {
		t.Fatalf("terminate = %v, %v; want false, nil", signalled, err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process behind a reused pid was stopped: %v", err)
	}
}

// TestListensTCP: a process is found listening once it has a listening TCP socket,
// and not before.
func TestListensTCP(t *testing.T) {
	pid := os.Getpid()
	if ok, err := ListensTCP(pid); err != nil || ok {
		t.Fatalf("before listening: %v %v", ok, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ok, err := ListensTCP(pid); err != nil || !ok {
		t.Fatalf("while listening: %v %v", ok, err)
	}
}
