package netns

import (
	"fmt"
	"os/exec"

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
