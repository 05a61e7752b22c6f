package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocelab/rocelab/lab"
)

// TestMckey: Debian's unmodified mckey (rdmacm-utils) in a three-host lab, over IPv4
// and IPv6 groups: receivers in h1 and h2 join, a sender in h3 joins and sends; each
// receiver must get every message (mckey waits for message_count completions, so a
// lost datagram hangs it and the test fails on its deadline). While the receivers
// wait, `rocelab status` shows their groups, text and JSON; once they exit, none.
func TestMckey(t *testing.T) {
	c := newCLI(t)
	if _, err := exec.LookPath("mckey"); err != nil {
		t.Skip("mckey is not installed (make deps-system installs rdmacm-utils as root)")
	}
	dir := filepath.Dir(c.bin)
	buildLibibverbs(t, dir)
	if out, err := exec.Command("../../librdmacm/build.sh", filepath.Join(dir, "lib", "librdmacm.so.1")).CombinedOutput(); err != nil {
		t.Fatalf("build librdmacm.so.1: %v\n%s", err, out)
	}
	l := upLab(t, c, "mck", "../../topologies/three-hosts.yaml")
	for _, tc := range []struct{ name, group, prefix string }{
		{"ipv4", "239.1.2.3", "10.0.0."}, {"ipv6", "ff0e::1:2:3", "fd00::"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const count = "20"
			var receivers []*mckeyRun
			for _, h := range []string{"1", "2"} {
				r := l.startMckey(t, "h"+h, "-m", tc.group, "-b", tc.prefix+h, "-C", count)
				receivers = append(receivers, r)
			}
			for _, r := range receivers {
				r.waitLine(t, "receiving data transfers")
			}
			var st lab.Status
			if err := json.Unmarshal([]byte(l.run("status", "--json", "--lab", l.name)), &st); err != nil {
				t.Fatal(err)
			}
			for _, h := range st.Hosts {
				want := h.Name != "h3"
				got := len(h.McastGroups) == 1 && h.McastGroups[0].GID == tc.group && len(h.McastGroups[0].QPs) == 1
				if got != want || !want && len(h.McastGroups) != 0 {
					t.Errorf("status of %s: groups %+v; want %v only in h1 and h2, one QP each", h.Name, h.McastGroups, tc.group)
				}
			}
			text := l.run("status", "--lab", l.name)
			for _, h := range []string{"h1", "h2"} {
				if !slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
					f := strings.Fields(line)
					return len(f) == 3 && f[0] == h && f[1] == tc.group
				}) {
					t.Errorf("rocelab status lacks a line of %s's group %s:\n%s", h, tc.group, text)
				}
			}
			sender := l.startMckey(t, "h3", "-m", tc.group, "-b", tc.prefix+"3", "-C", count, "-s")
			for _, r := range append(receivers, sender) {
				out := r.wait(t)
				if !strings.Contains(out, "data transfers complete\n") || !strings.HasSuffix(out, "return status 0\n") {
					t.Errorf("mckey in %s:\n%s", r.host, out)
				}
			}
			// mckey leaves its group and destroys its QP before it exits, each a call
			// the service has answered: nothing is left.
			st = lab.Status{} // fresh: Unmarshal keeps a field the JSON omits (no groups)
			if err := json.Unmarshal([]byte(l.run("status", "--json", "--lab", l.name)), &st); err != nil {
				t.Fatal(err)
			}
			for _, h := range st.Hosts {
				if len(h.McastGroups) != 0 {
					t.Errorf("after mckey exited, %s still has groups %+v", h.Name, h.McastGroups)
				}
			}
		})
	}
}

// mckeyRun is an mckey running in a lab host, its output read as it comes (line
// buffered by stdbuf: mckey prints with stdio, which would hold it all until exit).
type mckeyRun struct {
	host string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	line chan string
	done chan error
}

func (l *ibverbsLab) startMckey(t *testing.T, host string, args ...string) *mckeyRun {
	t.Helper()
	r := &mckeyRun{host: host, cmd: l.exec(host, append([]string{"stdbuf", "-oL", "mckey"}, args...)...), line: make(chan string, 64),
		done: make(chan error, 1)}
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	r.cmd.WaitDelay = 5 * time.Second
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill() })
	go func() {
		s := bufio.NewScanner(pr)
		for s.Scan() {
			r.mu.Lock()
			r.out.WriteString(s.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.line <- s.Text():
			default: // nobody waits for lines past the ones asked for
			}
		}
		close(r.line)
	}()
	go func() { err := r.cmd.Wait(); pw.Close(); r.done <- err }()
	return r
}

// waitLine waits until the program prints want; it fails the test if the program ends
// or 20 s pass first.
func (r *mckeyRun) waitLine(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-r.line:
			if !ok {
				t.Fatalf("mckey in %s ended before %q:\n%s", r.host, want, r.output())
			}
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("mckey in %s: no %q in 20 s:\n%s", r.host, want, r.output())
		}
	}
}

// wait waits up to 20 s for the program to exit and returns its output.
func (r *mckeyRun) wait(t *testing.T) string {
	t.Helper()
	select {
	case err := <-r.done:
		// the reader has the whole output once the pipe closes
		for range r.line {
		}
		if err != nil {
			t.Errorf("mckey in %s: %v", r.host, err)
		}
	case <-time.After(20 * time.Second):
		r.cmd.Process.Kill()
		t.Errorf("mckey in %s did not finish in 20 s", r.host)
	}
	return r.output()
}

func (r *mckeyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}
