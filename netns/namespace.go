package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted, as by `ip netns add`, so that
// `ip netns list` and `ip netns exec` see rocelab's hosts.
const RunDir = "/run/netns"

// NamespacePath is the bind mount that keeps the named namespace alive.
func NamespacePath(name string) string { return filepath.Join(RunDir, name) }

// CreateNamespace creates a network namespace and pins it at [NamespacePath](name). It
// fails if the name is taken. The namespace lives until [DeleteNamespace], whether or
// not any process is inside it.
func CreateNamespace(name string) error {
	if err := createNamespace(name); err != nil {
		return fmt.Errorf("netns: create namespace %s: %w", name, err)
	}
	return nil
}

func createNamespace(name string) error {
	if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
		return fmt.Errorf("invalid name")
	}
	if err := sharedRunDir(); err != nil {
		return err
	}
	path := NamespacePath(name)
	// O_EXCL is what makes a taken name an error instead of a second mount on it.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return unwrapPathError(err)
	}
	f.Close()
	if err := onFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind mount: %w", err)
		}
		return nil
	}); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// sharedRunDir makes RunDir a shared mount point, as iproute2 does, so that namespaces
// mounted later propagate to mount namespaces created from this one (`ip netns exec`,
// containers) and vice versa.
func sharedRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return unwrapPathError(err)
	}
	err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet: make it one
		if err = unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount: %w", RunDir, err)
	}
	return nil
}

// DeleteNamespace unpins a named namespace. The kernel destroys it, with the virtual
// devices in it, once no process, socket or fd refers to it any more; physical devices
// would go back to the initial namespace. A missing namespace is an error wrapping
// [os.ErrNotExist].
func DeleteNamespace(name string) error {
	path := NamespacePath(name)
	// MNT_DETACH: an `ip netns exec` shell holding the mount busy must not block removal.
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		if errors.Is(err, unix.ENOENT) {
			err = os.ErrNotExist
		}
		return fmt.Errorf("netns: delete namespace %s: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("netns: delete namespace %s: %w", name, unwrapPathError(err))
	}
	return nil
}

// ListNamespaces returns the names pinned under RunDir (rocelab's and everyone else's),
// sorted. A missing RunDir means none.
func ListNamespaces() ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: list namespaces: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// onFreshThread runs fn on a locked OS thread and then puts the thread back into the
// network namespace it started in, so that what fn does to it (unshare) never leaks.
// Merely exiting locked is not enough: the runtime terminates such a thread, except the
// process's main thread, which it parks for good — and a main thread parked inside a
// host's namespace makes the whole process look like it lives there (clean saw its own
// test process as a holder). If the thread cannot go back it is discarded, locked.
func onFreshThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("open current namespace: %w", err)
			return // discarded: still locked
		}
		defer unix.Close(home)
		fnErr := fn()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(fnErr, fmt.Errorf("back to the original namespace: %w", err))
			return // discarded: still locked
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// unwrapPathError drops the *os.PathError wrapper, whose path the caller's message
// already names through the object name.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
