package tunnel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Remote exec: `rocelab exec HOST` on one machine for a host that another part runs.
// The CLI opens a control session of its own to that part (authenticated with the lab
// secret like any part's, as its own machine), asks for the command, and the session
// then carries its standard streams both ways until it exits:
//
//	CLI  → part  exec{host, argv}
//	CLI  → part  stdin{bytes} ... stdin-eof, signal{name}
//	part → CLI   stdout{bytes}, stderr{bytes} ... exit{code}
//
// The part starts the command as its Config.Exec says (rocelab exec in the host, with
// the part's state directory) in a process group of its own, which a signal message
// reaches; a session that breaks kills the group.

// ExecRequest asks a part to run Argv in its host Host, or, with Rocelab, to run
// rocelab itself with Argv (a capture of one of its ports): what it runs is the
// part's Config.Exec's to decide.
type ExecRequest struct {
	Host    string   `json:"host,omitempty"`
	Rocelab bool     `json:"rocelab,omitempty"`
	Argv    []string `json:"argv"`
}

// execExit is op "exit"'s body.
type execExit struct {
	Code int `json:"code"`
}

// streamChunk bounds the bytes one stdin, stdout or stderr message carries.
const streamChunk = 32 << 10

// lockedSession serializes the sends of a session written by several goroutines.
type lockedSession struct {
	mu sync.Mutex
	s  *Session
}

func (l *lockedSession) send(m Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Send(m)
}

// streamWriter turns writes into op messages.
type streamWriter struct {
	ls *lockedSession
	op string
}

func (w streamWriter) Write(b []byte) (int, error) {
	for rest := b; len(rest) > 0; {
		n := min(len(rest), streamChunk)
		body, _ := json.Marshal(rest[:n])
		if err := w.ls.send(Message{Op: w.op, Body: body}); err != nil {
			return len(b) - len(rest), err
		}
		rest = rest[n:]
	}
	return len(b), nil
}

// signals a remote exec forwards, by the name the session carries.
var signals = map[string]syscall.Signal{"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT}

// ForwardedSignals are the signals RemoteExec forwards to the remote command: what
// the CLI relays (signal.Notify) of its own.
var ForwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalName is the name a forwarded signal has in the session ("" for another).
func signalName(sig os.Signal) string {
	for name, s := range signals {
		if s == sig {
			return name
		}
	}
	return ""
}

// serveExec runs an exec session's command (op "exec" with body), then ends the
// session: the connection is the command's until it exits.
func (p *Part) serveExec(c net.Conn, s *Session, body json.RawMessage) {
	ls := &lockedSession{s: s}
	fail := func(err error) { ls.send(Message{Op: "exit", Error: err.Error()}) }
	var req ExecRequest
	if err := json.Unmarshal(body, &req); err != nil || (req.Host == "") == !req.Rocelab || len(req.Argv) == 0 {
		fail(fmt.Errorf("exec: want a host or rocelab, and a command (%v)", err))
		return
	}
	if p.cfg.Exec == nil {
		fail(errors.New("exec: this part runs no commands for other machines"))
		return
	}
	cmd, err := p.cfg.Exec(req)
	if err != nil {
		fail(err)
		return
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fail(err)
		return
	}
	cmd.Stdout, cmd.Stderr = streamWriter{ls, "stdout"}, streamWriter{ls, "stderr"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fail(err)
		return
	}
	c.SetDeadline(time.Time{}) // a command may run and stay silent as long as it likes
	exited := make(chan struct{})
	go func() { // the CLI's side: stdin, signals, or the session breaking
		for {
			m, err := s.Receive()
			if err != nil {
				select {
				case <-exited:
				default:
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
				stdin.Close()
				return
			}
			switch m.Op {
			case "stdin":
				var b []byte
				if json.Unmarshal(m.Body, &b) == nil {
					stdin.Write(b)
				}
			case "stdin-eof":
				stdin.Close()
			case "signal":
				var name string
				if json.Unmarshal(m.Body, &name) == nil && signals[name] != 0 {
					syscall.Kill(-cmd.Process.Pid, signals[name])
				}
			}
		}
	}()
	err = cmd.Wait()
	close(exited)
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
		if code < 0 { // killed by a signal, as a shell reports it
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	case err != nil:
		fail(err)
		return
	}
	body, _ = json.Marshal(execExit{Code: code})
	ls.send(Message{Op: "exit", Body: body})
}

// RemoteExec runs req on the part on machine peer at address addr (an IP or
// DNS name) of lab, as machine self, relaying stdin, stdout and stderr; sigs, if not
// nil, forwards the ForwardedSignals it carries to the command. It returns the
// command's exit status.
func RemoteExec(addr string, secret []byte, lab, self, peer string, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) (int, error) {
	ip, err := resolve(addr)
	if err != nil {
		return 0, err
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(ControlPort)), handshake)
	if err != nil {
		return 0, fmt.Errorf("exec: part %s: %w", peer, err)
	}
	defer c.Close()
	return execOver(c, secret, lab, self, peer, req, stdin, stdout, stderr, sigs)
}

// execOver is RemoteExec on the connection c to the part.
func execOver(c net.Conn, secret []byte, lab, self, peer string, req ExecRequest, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) (int, error) {
	c.SetDeadline(time.Now().Add(handshake))
	s, err := Dial(c, secret, lab, self)
	if err != nil {
		return 0, fmt.Errorf("exec: part %s: %w", peer, err)
	}
	if s.Peer != peer {
		return 0, fmt.Errorf("exec: %s answers as machine %q, not %q", c.RemoteAddr(), s.Peer, peer)
	}
	c.SetDeadline(time.Time{})
	ls := &lockedSession{s: s}
	body, _ := json.Marshal(req)
	if err := ls.send(Message{Op: "exec", Body: body}); err != nil {
		return 0, err
	}
	go func() {
		if stdin != nil {
			io.Copy(streamWriter{ls, "stdin"}, stdin)
		}
		ls.send(Message{Op: "stdin-eof"})
	}()
	go func() {
		for sig := range sigs {
			name := signalName(sig)
			if name == "" {
				continue
			}
			b, _ := json.Marshal(name)
			if ls.send(Message{Op: "signal", Body: b}) != nil {
				return
			}
		}
	}()
	for {
		m, err := s.Receive()
		if err != nil {
			return 0, fmt.Errorf("exec: part %s: %w", peer, err)
		}
		var b []byte
		switch m.Op {
		case "stdout", "stderr":
			if json.Unmarshal(m.Body, &b) != nil {
				continue
			}
			if m.Op == "stdout" {
				stdout.Write(b)
			} else {
				stderr.Write(b)
			}
		case "exit":
			if m.Error != "" {
				return 0, fmt.Errorf("part %s: %s", peer, m.Error)
			}
			var e execExit
			err := json.Unmarshal(m.Body, &e)
			return e.Code, err
		}
	}
}
