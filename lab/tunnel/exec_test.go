package tunnel

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/rocelab/rocelab/fabric/topo"
)

// execPart is machine b's part of two-machines.yaml, serving remote execs with sh.
func execPart(t *testing.T) *Part {
	t.Helper()
	tp, err := topo.Load("../../topologies/two-machines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Lab: "demo", Machine: "b", Topology: tp, Secret: []byte("the lab secret, 16+"),
		Exec: func(req ExecRequest) (*exec.Cmd, error) {
			if req.Host != "h3" {
				return nil, errors.New("no host " + req.Host)
			}
			return exec.Command("sh", append([]string{"-c"}, req.Argv...)...), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// remoteExec runs req against p over a pipe, as machine a with secret.
func remoteExec(p *Part, secret string, req ExecRequest, stdin string) (code int, stdout, stderr string, err error) {
	client, server := net.Pipe()
	go p.serve(server)
	var out, errOut bytes.Buffer
	code, err = execOver(client, []byte(secret), "demo", "a", "b", req, strings.NewReader(stdin), &out, &errOut, nil)
	client.Close()
	return code, out.String(), errOut.String(), err
}

func TestRemoteExec(t *testing.T) {
	p := execPart(t)
	const secret = "the lab secret, 16+"
	code, out, errOut, err := remoteExec(p, secret, ExecRequest{Host: "h3", Argv: []string{"cat; echo to stderr >&2; exit 7"}}, "from a\n")
	if err != nil || code != 7 || out != "from a\n" || errOut != "to stderr\n" {
		t.Errorf("exec = %d, %q, %q, %v; want 7, the input back, the stderr line", code, out, errOut, err)
	}
	// 100 KB through stdin and back, in chunks.
	big := strings.Repeat("0123456789", 10000)
	if code, out, _, err := remoteExec(p, secret, ExecRequest{Host: "h3", Argv: []string{"cat"}}, big); err != nil || code != 0 || out != big {
		t.Errorf("100 KB round trip: %d, %d bytes, %v", code, len(out), err)
	}
	if _, _, _, err := remoteExec(p, secret, ExecRequest{Host: "h9", Argv: []string{"true"}}, ""); err == nil || !strings.Contains(err.Error(), "no host h9") {
		t.Errorf("exec in a host the part lacks: %v", err)
	}
	if _, _, _, err := remoteExec(p, secret, ExecRequest{Argv: []string{"true"}}, ""); err == nil || !strings.Contains(err.Error(), "want a host") {
		t.Errorf("exec without a host: %v", err)
	}
	if _, _, _, err := remoteExec(p, "another secret, 16+", ExecRequest{Host: "h3", Argv: []string{"true"}}, ""); !errors.Is(err, ErrAuth) {
		t.Errorf("exec with another secret: %v, want ErrAuth", err)
	}
}

// TestRemoteExecSignals: the signals the CLI catches reach the remote command by name
// (a signal RemoteExec does not forward is left out), and the command's exit status
// comes back.
func TestRemoteExecSignals(t *testing.T) {
	p := execPart(t)
	client, server := net.Pipe()
	go p.serve(server)
	defer client.Close()
	pr, pw := io.Pipe()
	sigs := make(chan os.Signal, 2)
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req := ExecRequest{Host: "h3", Argv: []string{`trap 'echo got TERM; exit 7' TERM; echo ready; sleep 30 & wait`}}
		code, err := execOver(client, []byte("the lab secret, 16+"), "demo", "a", "b", req, nil, pw, io.Discard, sigs)
		pw.Close()
		done <- result{code, err}
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the remote command did not start: %q", lines.Text())
	}
	sigs <- syscall.SIGUSR1 // not forwarded
	sigs <- syscall.SIGTERM
	var got []string
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	r := <-done
	if r.err != nil || r.code != 7 || strings.Join(got, "\n") != "got TERM" {
		t.Errorf("exec = %d, %v, output %q; want 7 and the trap's line", r.code, r.err, got)
	}
}
