package netns

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process identifies a process across pid reuse: the pid plus its start time in clock
// ticks after boot (field 22 of /proc/<pid>/stat). The zero Process is never alive.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// Self is the calling process.
func Self() (Process, error) { return ProcessOf(os.Getpid()) }

// ProcessOf identifies the live process pid.
func ProcessOf(pid int) (Process, error) {
	start, _, err := procStat(pid)
	if err != nil {
		return Process{}, fmt.Errorf("netns: process %d: %w", pid, err)
	}
	return Process{PID: pid, StartTime: start}, nil
}

// Alive reports whether p still runs: its pid exists, started when p says, and is not a
// zombie. A pid reused by another process is not p.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	start, state, err := procStat(p.PID)
	return err == nil && start == p.StartTime && state != 'Z' && state != 'X'
}

// String returns the process as "pid N".
func (p Process) String() string { return "pid " + strconv.Itoa(p.PID) }

// procStat reads the start time and state of pid from /proc/<pid>/stat. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after the last
// ')'.
func procStat(pid int) (start uint64, state byte, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, unwrapPathError(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	const stateField, startField = 0, 19 // fields 3 and 22, counted from 1
	if len(fields) <= startField {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(fields[startField], 10, 64)
	return start, fields[stateField][0], err
}

// terminate stops p: SIGTERM, up to grace for it to exit, then SIGKILL and up to
// kill more. It reports whether it signalled anything; a process that is gone, or
// whose pid now belongs to another process, is left alone. The pidfd pins the process
// between the identity check and the signals, and tells when it has exited, so no pid
// is ever signalled by mistake and nothing polls on a timer.
func terminate(p Process, grace, kill time.Duration) (signalled bool, err error) {
	pidfd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("netns: stop %v: pidfd_open: %w", p, err)
	}
	defer unix.Close(pidfd)
	if !p.Alive() { // checked after the pidfd pins the pid, so no reuse can follow
		return false, nil
	}
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{unix.SIGTERM, grace}, {unix.SIGKILL, kill}} {
		err := unix.PidfdSendSignal(pidfd, step.sig, nil, 0)
		if errors.Is(err, unix.ESRCH) {
			return true, nil
		}
		if err != nil {
			return true, fmt.Errorf("netns: stop %v: %v: %w", p, step.sig, err)
		}
		if exited, err := waitExit(pidfd, step.wait); err != nil || exited {
			if err != nil {
				err = fmt.Errorf("netns: stop %v: %w", p, err)
			}
			return true, err
		}
	}
	return true, fmt.Errorf("netns: stop %v: still running %v after SIGKILL", p, kill)
}

// killWait bounds the wait after SIGKILL, which is only delayed by uninterruptible
// kernel work (a process in D state); killWaitPerHost is added per host of the lab,
// because a dying lab process closes every host's TAP, and each close unregisters a
// netdev and waits for an RCU grace period: a 256-host lab process took over 5 s to
// exit after SIGKILL on the project's 2-core machines.
const (
	killWait        = 5 * time.Second
	killWaitPerHost = 50 * time.Millisecond
)

// waitExit waits up to d for the process behind pidfd to exit (the pidfd turns
// readable).
func waitExit(pidfd int, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond)) // round up: no spin
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll pidfd: %w", err)
		}
		if n > 0 || left == 0 {
			return n > 0, nil
		}
	}
}

// processesIn returns the live processes whose network namespace is the named one
// (what `ip netns pids` shows), found by comparing /proc/<pid>/ns/net with the pinned
// namespace.
func processesIn(ns string) ([]Process, error) {
	var want unix.Stat_t
	if err := unix.Stat(NamespacePath(ns), &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("netns: processes in %s: %w", ns, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("netns: processes in %s: %w", ns, err)
	}
	var procs []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
			continue // gone meanwhile, or elsewhere
		}
		if p, err := ProcessOf(pid); err == nil {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// ListensTCP reports whether process pid holds a listening TCP socket (IPv4 or IPv6):
// a server started with `rocelab exec -d` is ready for its client once it does. The
// sockets are looked up in the network namespace of each of its threads.
func ListensTCP(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, fmt.Errorf("netns: sockets of pid %d: %w", pid, unwrapPathError(err))
	}
	listening := map[string]bool{}
	namespaces := map[string]bool{}
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, task.Name())
		ns, err := os.Readlink(dir + "ns/net")
		if err != nil || namespaces[ns] {
			continue // gone meanwhile, or a namespace already read
		}
		namespaces[ns] = true
		for _, table := range []string{"net/tcp", "net/tcp6"} {
			data, err := os.ReadFile(dir + table)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n")[1:] {
				// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
				f := strings.Fields(line)
				const tcpListen = "0A"
				if len(f) > 9 && f[3] == tcpListen {
					listening["socket:["+f[9]+"]"] = true
				}
			}
		}
	}
	if len(listening) == 0 {
		return false, nil
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("netns: sockets of pid %d: %w", pid, unwrapPathError(err))
	}
	for _, fd := range fds {
		if target, err := os.Readlink(dir + "/" + fd.Name()); err == nil && listening[target] {
			return true, nil
		}
	}
	return false, nil
}
