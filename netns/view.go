package netns

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ViewDir pins each host's mount and UTS namespaces (its "view": hostname, /sys,
// /etc/hosts, the RDMA device's sysfs and /dev/infiniband) as <netns>.mnt and
// <netns>.uts, beside /run/netns's pin of its network namespace. It is a private mount:
// a mount namespace can be pinned only on a mount that does not propagate (the pin
// would otherwise propagate into the namespace it pins).
const ViewDir = "/run/rocelab-ns"

// ViewPaths are the pins of a host's mount and UTS namespaces ([ViewDir]).
func ViewPaths(netns string) (mnt, uts string) {
	return filepath.Join(ViewDir, netns+".mnt"), filepath.Join(ViewDir, netns+".uts")
}

// RDMADevice is what a host's sysfs shows of its soft-RNIC, as the kernel shows an rxe
// device: the lab queries the device itself, so the files say what ibv_query_* say.
type RDMADevice struct {
	Name     string // "rocelab0"
	NodeGUID uint64
	FWVer    string
	Netdev   string // the host's TAP: device/net/<Netdev>, parent, gid_attrs/ndevs
	Active   bool
	Rate     uint64 // bit/s
	GIDs     []GID
	PKeys    int // entries in the P_Key table (0xffff first, then zeros)
}

// GID is one entry of the port's GID table.
type GID struct {
	GID  [16]byte
	Type string // "RoCE v2" or "IB/RoCE v1", as gid_attrs/types shows it
}

// HostView is what [CreateHostView] installs in a host's own namespaces.
type HostView struct {
	Hostname string
	// Hosts is the file to bind-mount over /etc/hosts ([Store.WriteHosts]); empty
	// keeps the machine's. One file serves every host of a lab.
	Hosts   string
	Devices []RDMADevice
}

// WriteHosts writes lab's hosts file, <lab dir>/hosts: localhost and every host of the
// lab by its addresses, so that each host resolves the others' names as a machine on a
// LAN does. It returns the file's path; the file goes with the lab's state directory.
func (s Store) WriteHosts(lab string) (string, error) {
	l, err := s.Load(lab)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, h := range l.Hosts {
		for _, p := range []netip.Prefix{h.IPv4, h.IPv6} {
			if p.IsValid() {
				fmt.Fprintf(&b, "%s\t%s\n", p.Addr(), h.Name)
			}
		}
	}
	path := filepath.Join(s.Dir(lab), "hosts")
	// Readable by everyone: the host's users read it as /etc/hosts (the directory above
	// stays the owner's).
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("netns: lab %s hosts file: %w", lab, unwrapPathError(err))
	}
	return path, os.Chmod(path, 0o644)
}

// viewChildArg0 is the argv[0] under which a binary linking this package runs
// [runViewChild] instead of its main (see init in viewchild.go).
const viewChildArg0 = "rocelab-hostview"

// CreateHostView gives host of lab (recorded, with its network namespace) mount and UTS
// namespaces of its own, pinned at [ViewPaths]: hostname, a sysfs of its network
// namespace, /etc/hosts, and v's RDMA devices under /sys/class/infiniband,
// /sys/class/infiniband_verbs and /dev/infiniband. Nothing changes outside the host.
//
// The namespaces are made by a child (this binary re-executed: a Go process cannot
// switch its own mount namespace, having several threads), started from a thread in
// the host's network namespace with CLONE_NEWNS|CLONE_NEWUTS; it builds the view and
// waits while this process pins its namespaces. [Cleaner.Down] removes the pins.
func CreateHostView(store Store, lab, host string, v HostView) error {
	if err := createHostView(store, lab, host, v); err != nil {
		return fmt.Errorf("netns: view of host %s of lab %s: %w", host, lab, err)
	}
	return nil
}

func createHostView(store Store, lab, host string, v HostView) error {
	l, err := store.Load(lab)
	if err != nil {
		return err
	}
	h := l.Host(host)
	if h == nil {
		return errors.New("not recorded")
	}
	if err := privateViewDir(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	mntPin, utsPin := ViewPaths(h.Netns)
	for _, p := range []string{mntPin, utsPin} {
		// O_EXCL: a taken name is an error, never a second mount on someone's pin.
		f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return unwrapPathError(err)
		}
		f.Close()
	}
	if err := startViewChild(self, h.Netns, mntPin, utsPin, viewConfig{HostView: v}); err != nil {
		return errors.Join(err, removeViewPins(h.Netns))
	}
	return nil
}

// viewConfig is what the child reads on its stdin.
type viewConfig struct {
	HostView
}

func startViewChild(self, ns, mntPin, utsPin string, cfg viewConfig) error {
	in, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{Path: self, Args: []string{viewChildArg0}, Env: []string{}}
	// No Pdeathsig: it would fire when StartIn's thread exits, not this process; the
	// child ends at its stdin's EOF, which this process's death also brings.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWUTS}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := StartIn(ns, cmd); err != nil {
		return err
	}
	// The child reads its config, builds the view and says "ready"; it then waits for
	// stdin's EOF, so that its namespaces exist while they are pinned.
	_, err = stdin.Write(append(in, '\n'))
	var line string
	if err == nil {
		line, err = bufio.NewReader(stdout).ReadString('\n')
	}
	if err == nil && line != "ready\n" {
		err = fmt.Errorf("child said %q", line)
	}
	if err == nil {
		pid := cmd.Process.Pid
		err = pin(fmt.Sprintf("/proc/%d/ns/mnt", pid), mntPin)
		if err == nil {
			err = pin(fmt.Sprintf("/proc/%d/ns/uts", pid), utsPin)
		}
	}
	stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	if werr := cmd.Wait(); err == nil || errors.Is(err, io.EOF) && werr != nil {
		err = werr // the child's exit status says more than the EOF of its stdout
	}
	if err != nil && stderr.Len() > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return err
}

func pin(nsFile, path string) error {
	if err := unix.Mount(nsFile, path, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("pin %s: %w", path, err)
	}
	return nil
}

// viewDirMu serialises privateViewDir: two views made at once must not both find
// ViewDir no mount point and bind it onto itself twice.
var viewDirMu sync.Mutex

// privateViewDir makes ViewDir a private mount point (see [ViewDir]).
func privateViewDir() error {
	viewDirMu.Lock()
	defer viewDirMu.Unlock()
	if err := os.MkdirAll(ViewDir, 0o755); err != nil {
		return unwrapPathError(err)
	}
	err := unix.Mount("", ViewDir, "none", unix.MS_PRIVATE, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet: make it one
		if err = unix.Mount(ViewDir, ViewDir, "none", unix.MS_BIND, ""); err == nil {
			err = unix.Mount("", ViewDir, "none", unix.MS_PRIVATE, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a private mount: %w", ViewDir, err)
	}
	return nil
}

// removeViewPins unpins a host's mount and UTS namespaces; the kernel frees them (and
// the sysfs mount that holds the host's network namespace) when no process is left in
// them. Missing pins are not an error unless both are: then it wraps [os.ErrNotExist].
func removeViewPins(netns string) error {
	mnt, uts := ViewPaths(netns)
	var errs []error
	gone := 0
	for _, p := range []string{mnt, uts} {
		// MNT_DETACH: a shell inside (nsenter --mount=PIN) must not keep the pin.
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("netns: unpin %s: %w", p, err))
			continue
		}
		if err := os.Remove(p); errors.Is(err, os.ErrNotExist) {
			gone++
		} else if err != nil {
			errs = append(errs, fmt.Errorf("netns: remove %s: %w", p, unwrapPathError(err)))
		}
	}
	if gone == 2 {
		return os.ErrNotExist
	}
	return errors.Join(errs...)
}

// reachableView returns the pins of netns's view as this process can open them: at
// their own paths, or through the lab process's root directory (/proc/<owner>/root),
// which is walked in the lab process's mount namespace, the machine's. A view is a copy
// of the machine's mounts taken when it was made, and /run/rocelab-ns does not propagate
// (a namespace cannot be pinned on a mount that propagates into it), so the pins of hosts
// made after it are missing inside it: `rocelab exec` run in a host (MPI's remote-shell
// agent) finds them through the owner. ok is false when the host has no view.
func reachableView(netns string, owner int) (mnt, uts string, ok bool) {
	mnt, uts = ViewPaths(netns)
	prefixes := []string{""}
	if owner > 0 {
		prefixes = append(prefixes, fmt.Sprintf("/proc/%d/root", owner))
	}
	for _, prefix := range prefixes {
		pins := true
		for _, p := range []string{prefix + mnt, prefix + uts} {
			var st unix.Statfs_t
			if err := unix.Statfs(p, &st); err != nil || st.Type != unix.NSFS_MAGIC {
				pins = false
			}
		}
		if pins {
			return prefix + mnt, prefix + uts, true
		}
	}
	return mnt, uts, false
}
