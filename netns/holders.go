package netns

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// holders returns the live processes that keep the named namespace in use: inside,
// those that run in it (what `ip netns pids` shows); outside, those elsewhere that hold
// a file of it open, a handle on the namespace itself or a TAP whose netdev lives in
// it (a lab process, whatever its state directory, holds every host's TAP). Deleting
// a namespace with an outside holder breaks a live lab or a live process.
func holders(ns string) (inside, outside []Process, err error) {
	var want unix.Stat_t
	if err := unix.Stat(NamespacePath(ns), &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("netns: holders of %s: %w", ns, err)
	}
	all, err := processesIn(ns)
	if err != nil {
		return nil, nil, err
	}
	// The caller is not a holder: it may have a thread in the namespace or a handle
	// on it while it works on it.
	seen := map[int]bool{os.Getpid(): true}
	for _, p := range all {
		if !seen[p.PID] {
			inside = append(inside, p)
		}
		seen[p.PID] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, fmt.Errorf("netns: holders of %s: %w", ns, err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || seen[pid] {
			continue
		}
		if holdsNamespace(pid, want) {
			if p, err := ProcessOf(pid); err == nil {
				outside = append(outside, p)
			}
		}
	}
	return inside, outside, nil
}

// holdsNamespace reports whether process pid has a file open that refers to the
// network namespace whose nsfs inode is ns: the namespace itself or a TAP in it.
func holdsNamespace(pid int, ns unix.Stat_t) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false // gone meanwhile, or a kernel thread
	}
	pidfd := -1
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	for _, fd := range fds {
		target, err := os.Readlink(dir + fd.Name())
		if err != nil {
			continue
		}
		switch target {
		case "net:[" + strconv.FormatUint(ns.Ino, 10) + "]":
			return true
		case "/dev/net/tun":
			// The TAP's namespace is only known to the kernel: borrow the fd
			// (pidfd_getfd, root) and ask it (TUNGETDEVNETNS).
			if pidfd < 0 {
				if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
					return false
				}
			}
			n, err := strconv.Atoi(fd.Name())
			if err != nil {
				continue
			}
			if tapIn(pidfd, n, ns) {
				return true
			}
		}
	}
	return false
}

// tapIn reports whether fd n of the process behind pidfd is a TAP attached to a
// netdev in the namespace ns.
func tapIn(pidfd, n int, ns unix.Stat_t) bool {
	tun, err := unix.PidfdGetfd(pidfd, n, 0)
	if err != nil {
		return false
	}
	defer unix.Close(tun)
	nsfd, err := unix.IoctlRetInt(tun, unix.TUNGETDEVNETNS)
	if err != nil {
		return false // not attached to a netdev
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	return unix.Fstat(nsfd, &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino
}
