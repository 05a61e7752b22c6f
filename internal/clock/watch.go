package clock

import (
	"errors"
	"slices"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned by Watch for loops that cannot watch descriptors
// (Virtual loops: nothing outside the simulation may wake them).
var ErrNotSupported = errors.New("clock: not supported by this driver")

// A Watcher is work a Real loop looks for by itself, for producers that cannot post a
// Task because they are not in the process: another process that shares memory with the
// node (the verbs service's clients publish work requests in shared rings). The loop
// polls the watcher's memory while it is awake and sleeps on the watcher's eventfd, so a
// producer needs a system call only when the loop is (about to be) asleep — the
// "notification suppression" of virtio rings.
//
// The protocol that makes this safe, with sequentially consistent atomics on both
// sides: the watcher keeps an "awake" flag where producers can read it; Sleep(true)
// clears it, Sleep(false) sets it. A producer publishes its work (a store), then loads
// the flag and writes the eventfd only if it is clear. The loop calls Sleep(true), then
// Poll once more, and blocks only if that Poll found nothing: either the producer saw
// the flag clear and writes the eventfd, or the loop's Poll sees the work.
type Watcher interface {
	// Poll runs on the loop at every turn — after the tasks posted to it, while it
	// spins before a deadline, before it sleeps and after it woke. It does the pending
	// work (it may post tasks and arm timers) and reports whether it found any.
	Poll() bool
	// Sleep(true) runs on the loop before it blocks in the kernel, Sleep(false) after
	// it woke (for whatever reason).
	Sleep(asleep bool)
}

type watch struct {
	fd int
	w  Watcher
}

// Watch makes l call w at every turn and include fd — an eventfd, non-blocking, that
// producers write to wake the loop — in the set it sleeps on; the loop drains fd when it
// is readable. It must be called on l (from one of its callbacks), or before the clock
// starts. The returned function removes the watcher, on l as well; fd stays the
// caller's to close, after that. Virtual loops return ErrNotSupported.
func Watch(l Loop, fd int, w Watcher) (unwatch func(), err error) {
	rl, ok := l.(*realLoop)
	if !ok {
		return nil, ErrNotSupported
	}
	x := &watch{fd: fd, w: w}
	rl.watches = append(rl.watches, x)
	rl.rebuildFDs()
	return func() {
		if i := slices.Index(rl.watches, x); i >= 0 {
			rl.watches = slices.Delete(rl.watches, i, i+1)
			rl.rebuildFDs()
		}
	}, nil
}

// rebuildFDs recomputes the descriptors the loop sleeps on: its own eventfd (slot 0,
// filled in at wait time since it exists only once the loop started), then the watches'.
func (l *realLoop) rebuildFDs() {
	l.pfds = l.pfds[:0]
	l.pfds = append(l.pfds, unix.PollFd{Events: unix.POLLIN})
	for _, x := range l.watches {
		l.pfds = append(l.pfds, unix.PollFd{Fd: int32(x.fd), Events: unix.POLLIN})
	}
}

// pollWatches runs every watcher's Poll and reports whether any found work.
func (l *realLoop) pollWatches() bool {
	if len(l.watches) == 0 {
		return false
	}
	l.setTaskTime()
	found := false
	for _, x := range l.watches {
		if x.w.Poll() {
			found = true
		}
	}
	return found
}

func (l *realLoop) sleepWatches(asleep bool) {
	for _, x := range l.watches {
		x.w.Sleep(asleep)
	}
}

// drainWatches reads the watched eventfds that ppoll found readable.
func (l *realLoop) drainWatches() {
	var buf [8]byte
	for i := 1; i < len(l.pfds); i++ {
		if l.pfds[i].Revents != 0 {
			unix.Read(int(l.pfds[i].Fd), buf[:])
			l.pfds[i].Revents = 0
		}
	}
}
