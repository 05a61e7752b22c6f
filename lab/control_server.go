package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	srv := l.controlServer()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		// Serve returns when the listener closes (Close); it backs off on accept
		// errors such as EMFILE by itself.
		srv.Serve(ln)
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

// maxRequestBody bounds a control request's JSON body.
const maxRequestBody = 4096

// connKey carries a request's connection into its handler (http.Server.ConnContext),
// for the peer check.
type connKey struct{}

// controlServer is the HTTP server of the control socket: one handler per op.
func (l *Lab) controlServer() *http.Server {
	mux := http.NewServeMux()
	ops := map[string]func(w http.ResponseWriter, r *http.Request, req Request){
		"status": func(w http.ResponseWriter, _ *http.Request, _ Request) {
			st := l.StatusOfParts()
			reply(w, Reply{Status: &st})
		},
		"down-parts": l.serveDownParts,
		"counters": func(w http.ResponseWriter, _ *http.Request, _ Request) {
			cs := l.Counters()
			reply(w, Reply{Counters: &cs})
		},
		"hold":     l.serveHold,
		"record":   l.serveRecord,
		"recorded": l.serveRecord,
		"capture":  l.serveCapture,
	}
	for op, handle := range ops {
		mux.HandleFunc("/"+op, func(w http.ResponseWriter, r *http.Request) {
			if err := controlPeerAllowed(r.Context().Value(connKey{}).(*net.UnixConn)); err != nil {
				l.log.Warn("control socket: peer refused", zap.Error(err))
				refuse(w, http.StatusForbidden, err.Error())
				return
			}
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				refuse(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s /%s: want POST", r.Method, op))
				return
			}
			// One JSON value, not the body to its end: a capture's body stays open
			// while it runs (serveCapture). An empty body is the zero Request.
			// The request, bounded in time as in size: a client that trickles it
			// must not hold a handler. A capture's body is then its own to end.
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(controlTimeout))
			var req Request
			err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&req)
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				refuse(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxRequestBody))
				return
			case err != nil && err != io.EOF:
				refuse(w, http.StatusBadRequest, "bad request: "+err.Error())
				return
			}
			req.Op = op
			if op == "capture" {
				rc.SetReadDeadline(time.Time{})
			} else { // a client that stops reading must not hold this handler
				rc.SetWriteDeadline(time.Now().Add(controlTimeout))
			}
			handle(w, r, req)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		names := slices.Sorted(maps.Keys(ops))
		refuse(w, http.StatusNotFound, fmt.Sprintf("unknown op %q: want POST to /%s", strings.TrimPrefix(r.URL.Path, "/"), strings.Join(names, ", /")))
	})
	return &http.Server{Handler: mux, ReadHeaderTimeout: controlTimeout, IdleTimeout: controlTimeout, MaxHeaderBytes: 16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:    zap.NewStdLog(l.log)}
}

// reply writes r as the answer, 400 when it carries an error.
func reply(w http.ResponseWriter, r Reply) {
	w.Header().Set("Content-Type", "application/json")
	if r.Error != "" {
		w.WriteHeader(http.StatusBadRequest)
	}
	json.NewEncoder(w).Encode(r)
}

// refuse answers with status and a Reply naming the problem.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(Reply{Error: msg})
}

func (l *Lab) serveDownParts(w http.ResponseWriter, _ *http.Request, _ Request) {
	told, unreachable := l.DownParts()
	reply(w, Reply{Told: told, Unreachable: unreachable})
}

func (l *Lab) serveHold(w http.ResponseWriter, _ *http.Request, req Request) {
	held, err := l.Hold(req.Hosts, time.Duration(req.HoldNs))
	if err != nil {
		reply(w, Reply{Error: err.Error()})
		return
	}
	reply(w, Reply{Held: held})
}

// serveRecord starts or stops recording (op record) or drains (op recorded).
func (l *Lab) serveRecord(w http.ResponseWriter, _ *http.Request, req Request) {
	var rows []Counters
	var dropped uint64
	var err error
	if req.Op == "record" {
		rows, dropped, err = l.Record(time.Duration(req.EveryNs))
	} else {
		rows, dropped, err = l.Recorded()
	}
	if err != nil {
		reply(w, Reply{Error: err.Error()})
		return
	}
	reply(w, Reply{Recorded: rows, RecordDropped: dropped})
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

// CaptureTrailer is the HTTP trailer that ends a capture's stream: a JSON Reply with
// the capture's figures (Capture), and Error if writing it failed (a full disk).
const CaptureTrailer = "Rocelab-Capture"

// serveCapture streams a port's capture as the response body (pcapng, chunked by
// net/http) until the client ends its request body (or goes away), then sends the
// figures as the trailer. With File, the lab writes the pcapng itself (one copy of
// each frame fewer, no second process to keep up) and the body is empty.
func (l *Lab) serveCapture(w http.ResponseWriter, r *http.Request, req Request) {
	m, err := l.monitor(req.Port)
	if err != nil {
		reply(w, Reply{Error: err.Error()})
		return
	}
	if req.Snaplen < 0 {
		reply(w, Reply{Error: fmt.Sprintf("snaplen %d: want 0 (whole frames) or more", req.Snaplen)})
		return
	}
	rc := http.NewResponseController(w)
	// The client's request body stays open while the capture runs: closing it ends
	// the capture, and its figures still reach the client in the trailer.
	if err := rc.EnableFullDuplex(); err != nil {
		reply(w, Reply{Error: err.Error()})
		return
	}
	fw := &flushWriter{w: w, rc: rc}
	var out io.Writer = fw
	if req.File != "" {
		if !filepath.IsAbs(req.File) {
			reply(w, Reply{Error: fmt.Sprintf("capture file %q: want an absolute path", req.File)})
			return
		}
		f, err := os.Create(req.File)
		if err != nil {
			reply(w, Reply{Error: err.Error()})
			return
		}
		defer f.Close()
		out = f
	}
	w.Header().Set("Trailer", CaptureTrailer)
	w.Header().Set("Content-Type", "application/x-pcapng")
	s, err := m.Start(out, l.epoch, req.Snaplen)
	if err != nil {
		reply(w, Reply{Error: err.Error()})
		return
	}
	// The capture's writer may flush its first bytes already: the head goes out
	// under the writer's lock.
	fw.mu.Lock()
	w.WriteHeader(http.StatusOK)
	err = rc.Flush()
	fw.mu.Unlock()
	if err != nil {
		s.Stop()
		return
	}
	go func() { // the client ends a capture by ending its request body
		io.Copy(io.Discard, r.Body)
		s.Stop()
	}()
	select {
	case <-s.Done():
	case <-r.Context().Done(): // the client went away
	}
	err = s.Stop()
	l.log.Info("capture ended", zap.String("port", req.Port), zap.Uint64("frames", s.Frames()),
		zap.Uint64("dropped", s.Dropped()), zap.Error(err))
	figures := Reply{Capture: captureStatus(s)}
	if err != nil {
		figures.Error = err.Error()
	}
	b, _ := json.Marshal(figures)
	w.Header().Set(CaptureTrailer, string(b))
}

// flushWriter sends each write of a capture's stream at once (the capture's writer
// batches, so writes are large). mu orders its writes with the handler's own.
type flushWriter struct {
	mu sync.Mutex
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
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
