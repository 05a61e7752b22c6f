package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/capture"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
)

func (l *Lab) listenControl() error {
	path := ControlPath(l.cfg.Store, l.cfg.Name)
	if err := l.cfg.Store.Update(l.cfg.Name, func(r *netns.Lab) error {
		r.Sockets = append(r.Sockets, path)
		return nil
	}); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("lab: control socket: %w", err)
	}
	// bind(2) gives the socket 0777 less the umask; the state directory (0700) already
	// keeps others out, and the socket's own mode says the same.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("lab: control socket: %w", err)
	}
	l.ctl = ln
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		// Out of descriptors (EMFILE), accept fails until some are closed: back off
		// and go on, as the verbs service does, rather than leave status unanswered
		// for the rest of the lab's life.
		var backoff time.Duration
		for {
			c, err := ln.AcceptUnix()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				if backoff = min(max(2*backoff, 5*time.Millisecond), time.Second); backoff == 5*time.Millisecond {
					l.log.Warn("control socket: accept failed (backing off)", zap.Error(err))
				}
				time.Sleep(backoff)
				continue
			}
			backoff = 0
			go l.serve(c)
		}
	}()
	return nil
}

// controlTimeout bounds how long a control client may take to send its request, and
// to read a reply (a capture's stream excepted).
const controlTimeout = 5 * time.Second

// QueryTimeout bounds a control call (Query) from dialling to its reply: a lab that
// cannot answer a status in this long is wedged or starved, and its caller should say
// so instead of hanging. (A variable: tests shorten it.)
var QueryTimeout = 15 * time.Second

func (l *Lab) serve(c *net.UnixConn) {
	defer c.Close()
	// The request is read (bounded in size and time) before the peer check, so that a
	// refused client reads its refusal instead of a broken pipe on its write.
	c.SetReadDeadline(time.Now().Add(controlTimeout))
	var req Request
	reqErr := json.NewDecoder(bufio.NewReader(io.LimitReader(c, 4096))).Decode(&req)
	if err := controlPeerAllowed(c); err != nil {
		l.log.Warn("control socket: peer refused", zap.Error(err))
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if reqErr != nil {
		writeReply(c, Reply{Error: "bad request: " + reqErr.Error()})
		return
	}
	if req.Op != "capture" { // a client that stops reading must not hold this goroutine
		c.SetWriteDeadline(time.Now().Add(controlTimeout))
	}
	switch req.Op {
	case "status":
		st := l.StatusOfParts()
		writeReply(c, Reply{Status: &st})
	case "down-parts":
		told, unreachable := l.DownParts()
		writeReply(c, Reply{Told: told, Unreachable: unreachable})
	case "counters":
		cs := l.Counters()
		writeReply(c, Reply{Counters: &cs})
	case "capture":
		l.serveCapture(c, req)
	case "hold":
		held, err := l.Hold(req.Hosts, time.Duration(req.HoldNs))
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		writeReply(c, Reply{Held: held})
	case "record", "recorded":
		var rows []Counters
		var dropped uint64
		var err error
		if req.Op == "record" {
			rows, dropped, err = l.Record(time.Duration(req.EveryNs))
		} else {
			rows, dropped, err = l.Recorded()
		}
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		writeReply(c, Reply{Recorded: rows, RecordDropped: dropped})
	default:
		writeReply(c, Reply{Error: fmt.Sprintf("unknown op %q: want status, down-parts, counters, record, recorded, capture or hold", req.Op)})
	}
}

// Hold holds the named hosts' RC and UC request packets for d from now, or releases
// them (d = 0) releaseLead from now (rnic.Device.HoldRequests), and reports for each
// whether the hold keeps back a request already posted. `rocelab experiment --lab`
// holds the senders while their applications start, polls until every one has
// posted, then releases them together.
//
// Every host gets the same deadline, read once from the lab's clock: the hosts are
// reached one loop call after another, and a release "now" on each let a host
// reached a few milliseconds later (a loaded machine) start that much later. A
// release reaching a host after its deadline is an error that says by how much.
func (l *Lab) Hold(hosts []string, d time.Duration) (map[string]bool, error) {
	if d < 0 || d > MaxHold {
		return nil, fmt.Errorf("hold for %v: want 0 (release) up to %v", d, MaxHold)
	}
	var devs []*network.Host
	for _, name := range hosts {
		h := l.Network.Host(name)
		if h == nil {
			return nil, fmt.Errorf("hold: no host %q in lab %s", name, l.Name())
		}
		devs = append(devs, h)
	}
	lead := d
	if d == 0 {
		lead = releaseLead
	}
	until := l.clk.Now().Add(lead)
	type answer struct {
		held bool
		late time.Duration
	}
	held := map[string]bool{}
	var late []string
	for _, h := range devs {
		ch := make(chan answer, 1)
		h.Device.Do(func() {
			h.Device.HoldRequests(until)
			ch <- answer{h.Device.RequestsHeld(), time.Duration(h.Device.Now() - until)}
		})
		select {
		case a := <-ch:
			held[h.Name] = a.held
			if d == 0 && a.late > 0 {
				late = append(late, fmt.Sprintf("%s %v late", h.Name, a.late))
			}
		case <-time.After(2 * time.Second):
			return nil, fmt.Errorf("hold: host %s's loop did not answer", h.Name)
		}
	}
	if len(late) > 0 {
		return held, fmt.Errorf("hold: released %s after the common start (%v after the call): %s",
			strings.Join(hosts, ", "), releaseLead, strings.Join(late, ", "))
	}
	return held, nil
}

// releaseLead is how far ahead of the call Hold releases its hosts: room for a loop
// call per host on a loaded machine (each takes microseconds on a quiet one).
const releaseLead = 20 * time.Millisecond

// controlPeerAllowed admits the lab's own user and root (SO_PEERCRED), whatever the
// socket's mode: a lab's control socket captures every frame of the lab.
func controlPeerAllowed(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && cred.Uid != uint32(os.Getuid()) {
		return fmt.Errorf("uid %d may not use this lab's control socket (only its owner, uid %d, and root)", cred.Uid, os.Getuid())
	}
	return nil
}

func writeReply(w io.Writer, r Reply) error {
	b, _ := json.Marshal(r)
	_, err := w.Write(append(b, '\n'))
	return err
}

func (l *Lab) serveCapture(c net.Conn, req Request) {
	m, err := l.monitor(req.Port)
	if err != nil {
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if req.Snaplen < 0 {
		writeReply(c, Reply{Error: fmt.Sprintf("snaplen %d: want 0 (whole frames) or more", req.Snaplen)})
		return
	}
	var out io.Writer = chunkWriter{c}
	if req.File != "" {
		if !filepath.IsAbs(req.File) {
			writeReply(c, Reply{Error: fmt.Sprintf("capture file %q: want an absolute path", req.File)})
			return
		}
		f, err := os.Create(req.File)
		if err != nil {
			writeReply(c, Reply{Error: err.Error()})
			return
		}
		defer f.Close()
		out = f
	}
	s, err := m.Start(out, l.epoch, req.Snaplen)
	if err != nil {
		writeReply(c, Reply{Error: err.Error()})
		return
	}
	if err := writeReply(c, Reply{}); err != nil {
		s.Stop()
		return
	}
	// The client ends a capture by shutting down its side: a read then ends.
	go func() {
		io.Copy(io.Discard, c)
		s.Stop()
	}()
	<-s.Done()
	err = s.Stop()
	l.log.Info("capture ended", zap.String("port", req.Port), zap.Uint64("frames", s.Frames()),
		zap.Uint64("dropped", s.Dropped()), zap.Error(err))
	// The figures end the stream; after a failed write to the connection they reach
	// nobody, but a failed file (disk full) is reported.
	reply := Reply{Capture: captureStatus(s)}
	if err != nil {
		reply.Error = err.Error()
	}
	if _, err := c.Write(make([]byte, 4)); err == nil {
		writeReply(c, reply)
	}
}

// monitor finds the capture point named like "s1:p3" or "h1".
func (l *Lab) monitor(name string) (*capture.Monitor, error) {
	node, port, err := splitPort(name)
	if err != nil {
		return nil, err
	}
	if h := l.Network.Host(node); h != nil {
		if port != 0 {
			return nil, fmt.Errorf("host %s has one port, p0", node)
		}
		return h.Monitor, nil
	}
	if x := l.Network.External(node); x != nil {
		if port != 0 {
			return nil, fmt.Errorf("host %s has one port, p0", node)
		}
		return x.Monitor, nil
	}
	s := l.Network.Switch(node)
	if s == nil {
		return nil, fmt.Errorf("no node %q in lab %s", node, l.cfg.Name)
	}
	if port >= len(s.Monitors) {
		return nil, fmt.Errorf("switch %s has ports p0–p%d, not p%d", node, len(s.Monitors)-1, port)
	}
	return s.Monitors[port], nil
}
