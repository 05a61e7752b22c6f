package netns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rocelab/rocelab/rnic/service"
)

// Environment variables that [Store.Exec] gives an app, besides [StateRootEnv] and the
// verbs client's service.EnvLab and service.EnvHost, so it can find its namespace and its
// own addresses without parsing the state file.
const (
	EnvNetns = "ROCELAB_NETNS"
	EnvIPv4  = "ROCELAB_IPV4" // the host's address without prefix length; unset if none
	EnvIPv6  = "ROCELAB_IPV6"
)

// Exec starts cmd inside host's namespace in lab, as cmd.Start does, with the app
// environment above appended to cmd.Env (the caller's environment when cmd.Env is
// nil), and records the process in the lab's state, so that down and clean stop it even
// if it moves to another namespace. The caller waits for cmd.
func (s Store) Exec(lab, host string, cmd *exec.Cmd) error {
	l, err := s.Load(lab)
	if err != nil {
		return err
	}
	h := l.Host(host)
	if h == nil {
		return fmt.Errorf("netns: exec in lab %s: no host %q", lab, host)
	}
	if cmd.Env == nil {
		cmd.Env = cmd.Environ()
	}
	cmd.Env = append(cmd.Env, service.EnvLab+"="+lab, service.EnvHost+"="+host, EnvNetns+"="+h.Netns, StateRootEnv+"="+s.Root)
	if h.IPv4.IsValid() {
		cmd.Env = append(cmd.Env, EnvIPv4+"="+h.IPv4.Addr().String())
	}
	if h.IPv6.IsValid() {
		cmd.Env = append(cmd.Env, EnvIPv6+"="+h.IPv6.Addr().String())
	}
	if mnt, uts, ok := reachableView(h.Netns, l.Owner.PID); ok {
		if err := enterView(mnt, uts, cmd); err != nil {
			return fmt.Errorf("netns: exec in host %s of lab %s: %w", host, lab, err)
		}
	}
	if err := StartIn(h.Netns, cmd); err != nil {
		return err
	}
	// The child is not waited for yet, so its pid cannot have been reused.
	p, err := ProcessOf(cmd.Process.Pid)
	if err != nil {
		return nil // already exited: nothing to record
	}
	return s.Update(lab, func(l *Lab) error {
		l.Processes = append(l.Processes, p)
		return nil
	})
}

// enterView makes cmd start through util-linux's nsenter, which joins the host's pinned
// mount and UTS namespaces (CreateHostView) before it execs cmd: setns(CLONE_NEWNS)
// needs a single-threaded process, which a Go process is not, and nsenter execs in
// place, so cmd keeps nsenter's pid. Joining a mount namespace moves the working
// directory to its root; --wd puts it back.
func enterView(mnt, uts string, cmd *exec.Cmd) error {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("the host has a view of its own, entered by util-linux's nsenter: %w", err)
	}
	wd := cmd.Dir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return err
		}
	}
	args := []string{"nsenter", "--mount=" + mnt, "--uts=" + uts, "--wd=" + wd, "--", argv0(cmd)}
	cmd.Args = append(args, cmd.Args[1:]...)
	cmd.Path = nsenter
	return nil
}

// argv0 is what nsenter is told to exec: the command's own argv[0] when nsenter's search
// of the command's PATH finds cmd.Path by it, so that programs which print their name
// (rdma_xserver, usage texts) print it as they would outside; else cmd.Path.
func argv0(cmd *exec.Cmd) string {
	name := cmd.Args[0]
	if strings.Contains(name, "/") {
		return cmd.Path
	}
	path := ""
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as in the child
		}
	}
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, name)
		if st, err := os.Stat(candidate); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if candidate == cmd.Path {
				return name
			}
			return cmd.Path
		}
	}
	return cmd.Path
}
