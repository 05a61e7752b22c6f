package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// exitWithEnv is --exit-with's default: a test harness sets it to its own pid once, and
// every lab its tests start, however, goes down when it exits, even killed by its
// timeout.
const exitWithEnv = "ROCELAB_EXIT_WITH"

const exitWithHelp = "take the lab down when process PID exits (a script's or a test's own pid; 0: never); default $" + exitWithEnv

// exitWithDefault is $ROCELAB_EXIT_WITH as a pid, or 0.
func exitWithDefault() int {
	pid, _ := strconv.Atoi(os.Getenv(exitWithEnv))
	return pid
}

// openExitWith opens a pidfd of pid for --exit-with: unlike the pid, it names that
// process and no later one that reuses its number, and the lab process inherits it.
// pid 0 gives nil.
func openExitWith(pid int) (*os.File, error) {
	if pid == 0 {
		return nil, nil
	}
	if pid < 0 {
		return nil, fmt.Errorf("--exit-with %d: want a process id", pid)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("--exit-with %d: no such process", pid)
		}
		return nil, fmt.Errorf("--exit-with %d: pidfd_open: %w", pid, err)
	}
	return os.NewFile(uintptr(fd), "exit-with "+strconv.Itoa(pid)), nil
}

// exitOf is closed when the process of pidfd exits; for a nil pidfd it is never closed.
// A pidfd polls readable once its process has exited.
func exitOf(pidfd *os.File) <-chan struct{} {
	if pidfd == nil {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				return
			}
		}
	}()
	return done
}
