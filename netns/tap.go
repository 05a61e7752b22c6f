package netns

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// TAP is a TAP netdev opened by the lab process: every queue is a non-blocking fd
// (IFF_TAP|IFF_NO_PI) that reads the Ethernet frames the namespace's kernel transmits
// and writes the frames it should receive. Reads park the goroutine in the Go poller,
// not an OS thread, and Close wakes them.
//
// The TAP is not persistent: it disappears with its last fd, so a lab process that dies
// takes its TAPs with it.
type TAP struct {
	name   string
	ns     string
	queues []*os.File
	raw    []syscall.RawConn
}

// OpenTAP creates the TAP netdev name inside namespace ns and opens queues fds on it
// (IFF_MULTI_QUEUE when queues > 1, so that several goroutines can read in parallel,
// each on its own queue). The device starts down and unconfigured: see [ConfigureLink].
func OpenTAP(ns, name string, queues int) (*TAP, error) {
	if queues < 1 {
		return nil, fmt.Errorf("netns: open TAP %s in %s: %d queues", name, ns, queues)
	}
	t := &TAP{name: name, ns: ns}
	// The device is created in the namespace of the thread that opens /dev/net/tun.
	err := Do(ns, func() error {
		for range queues {
			f, err := openTapQueue(name, queues > 1)
			if err != nil {
				return err
			}
			rc, err := f.SyscallConn()
			if err != nil {
				f.Close()
				return err
			}
			t.queues, t.raw = append(t.queues, f), append(t.raw, rc)
		}
		return nil
	})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("netns: open TAP %s in %s: %w", name, ns, err)
	}
	return t, nil
}

func openTapQueue(name string, multiQueue bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	req, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if multiQueue {
		flags |= unix.IFF_MULTI_QUEUE
	}
	req.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, req); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	// Non-blocking before os.NewFile, so the file joins the runtime poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// Name is the netdev's name inside its namespace.
func (t *TAP) Name() string { return t.name }

// Namespace is the namespace the netdev lives in.
func (t *TAP) Namespace() string { return t.ns }

// Queues is the number of open queues.
func (t *TAP) Queues() int { return len(t.queues) }

// File returns queue q's fd, for callers that bring their own I/O loop. Closing it
// closes the queue.
func (t *TAP) File(q int) *os.File { return t.queues[q] }

// Read reads up to len(bufs) frames from queue q, frame i into bufs[i] with its length
// in sizes[i], and returns how many it read. It waits for the first frame, then takes
// what else is already queued without waiting again, so one wake-up serves a burst.
// A frame longer than its buffer is truncated (size the buffers to MTU + 14 bytes).
// After Close, Read returns an error wrapping [os.ErrClosed].
func (t *TAP) Read(q int, bufs [][]byte, sizes []int) (n int, err error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	rerr := t.raw[q].Read(func(fd uintptr) bool {
		for n < len(bufs) {
			m, e := unix.Read(int(fd), bufs[n])
			if e == unix.EINTR {
				continue
			}
			if e != nil {
				if e != unix.EAGAIN {
					err = e
				}
				break
			}
			sizes[n] = m
			n++
		}
		// Done once something was read or failed; otherwise park until readable.
		return n > 0 || err != nil
	})
	if rerr != nil && n == 0 {
		return 0, fmt.Errorf("netns: read TAP %s: %w", t.name, rerr)
	}
	if err != nil && n == 0 {
		return 0, fmt.Errorf("netns: read TAP %s: %w", t.name, err)
	}
	return n, nil
}

// Write writes each of bufs as one Ethernet frame to queue q, for the namespace's
// kernel to receive, and returns how many it wrote before the first error. It waits
// while the queue is full rather than dropping.
func (t *TAP) Write(q int, bufs [][]byte) (int, error) {
	for i, b := range bufs {
		if _, err := t.queues[q].Write(b); err != nil {
			return i, fmt.Errorf("netns: write TAP %s: %w", t.name, err)
		}
	}
	return len(bufs), nil
}

// Close closes every queue; the netdev disappears with the last one. It wakes blocked
// Reads and Writes.
func (t *TAP) Close() error {
	var errs []error
	for _, f := range t.queues {
		errs = append(errs, f.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netns: close TAP %s: %w", t.name, err)
	}
	return nil
}
