package netns

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a locked OS thread switched into the named namespace and returns fn's
// error. Sockets, TAP fds and child processes that fn creates belong to that namespace
// for their whole life and may be used from any goroutine afterwards.
//
// Goroutines that fn starts do not inherit the namespace: they run on other threads, in
// the namespace the process started in. fn must finish its namespaced work itself.
//
// The thread is put back into its original namespace and returned to the scheduler; if
// that fails, it is discarded rather than reused in the wrong namespace.
func Do(ns string, fn func() error) error {
	target, err := unix.Open(NamespacePath(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: enter namespace %s: %w", ns, err)
	}
	defer unix.Close(target)

	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("netns: enter namespace %s: open current namespace: %w", ns, err)
			return // thread discarded: still locked
		}
		defer unix.Close(home)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("netns: enter namespace %s: %w", ns, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			done <- fnErr // fn's result stands; the thread is discarded: still locked
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// StartIn starts cmd inside the named namespace, as cmd.Start does; the caller waits
// for it. The child is forked from a thread inside the namespace, so it and everything
// it starts live there; its mount namespace and environment are the caller's (see
// [Lab.HostCommand] for the environment apps expect).
func StartIn(ns string, cmd *exec.Cmd) error {
	return Do(ns, func() error {
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("netns: start %s in namespace %s: %w", cmd.Path, ns, err)
		}
		return nil
	})
}
