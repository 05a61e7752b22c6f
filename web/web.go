// Package web serves a live view of a running lab: the topology as a graph with each
// link's utilization and queue depth, per-QP rates and HPCC++'s U and W for a selected
// host, and capture start/stop per port. The page (plain JS and SVG, embedded in the
// binary) follows the lab through server-sent events; the server reads the lab only
// through its control socket, so `rocelab up --web` and `rocelab web` are the same.
// Replay serves the same page for a finished virtual-time experiment, its series
// streamed as the same events over the run's simulated time.
package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

//go:embed assets
var assets embed.FS

// Interval is how often the page gets the lab's status.
const Interval = 500 * time.Millisecond

// Server serves the view of one lab.
type Server struct {
	store netns.Store
	lab   string
	dir   string // where captures started from the page are written
	token string // what a request that changes something must carry (Token)

	mu       sync.Mutex
	captures map[string]*capture // by port
}

type capture struct {
	conn *lab.Capture
	file string
	done chan struct{}
	res  *lab.CaptureStatus
	err  error
	// limit says which bound stopped the capture (MaxCaptureTime, MaxCaptureBytes);
	// under Server.mu.
	limit string
}

// A capture started from the page stops by itself after MaxCaptureTime or once its
// file passes MaxCaptureBytes: a page left open, or one that was not the user's,
// cannot fill the disk.
const (
	MaxCaptureTime  = 10 * time.Minute
	MaxCaptureBytes = 1 << 30
)

// New returns the view of lab in store; captures started from the page are written to
// captureDir as PORT-TIME.pcapng.
func New(store netns.Store, labName, captureDir string) (*Server, error) {
	dir, err := filepath.Abs(captureDir)
	if err != nil {
		return nil, err
	}
	return &Server{store: store, lab: labName, dir: dir, token: newToken(), captures: map[string]*capture{}}, nil
}

// Token is what requests that change something (captures) must carry, as ?token= or
// the X-Rocelab-Token header: the URL printed at start-up has it, and the page keeps
// it. Another site cannot learn it, so it cannot start a capture.
func (s *Server) Token() string { return s.token }

// Handler serves the page (/), its script, the status stream (/events), one status
// (/api/status) and captures (POST /api/capture?port=P&action=start|stop).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("/", http.FileServerFS(static))
	mux.HandleFunc("/events", s.events)
	mux.HandleFunc("/api/status", func(w http.ResponseWriter, r *http.Request) {
		v, err := s.view()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	})
	mux.HandleFunc("/api/capture", s.capture)
	return mux
}

// View is what the page draws: the lab's status and the captures started from it.
// A replay's views (Replay) carry the run's simulated time and where they stand.
type View struct {
	Time     int64                 `json:"time_ns"` // when the status was read
	Status   lab.Status            `json:"status"`
	Captures map[string]CaptureRef `json:"captures"`
	Replay   *ReplayInfo           `json:"replay,omitempty"`
}

// CaptureRef is a capture started from the page.
type CaptureRef struct {
	File    string             `json:"file"`
	Running bool               `json:"running"`
	Figures *lab.CaptureStatus `json:"figures,omitempty"`
	Error   string             `json:"error,omitempty"`
	Limit   string             `json:"limit,omitempty"` // the bound that stopped it
}

func (s *Server) view() (View, error) {
	reply, err := lab.Query(s.store, s.lab, lab.Request{Op: "status"})
	if err != nil {
		return View{}, err
	}
	// Every node of a lab over several machines: the other parts' too.
	v := View{Time: time.Now().UnixNano(), Status: reply.Status.WholeLab(), Captures: map[string]CaptureRef{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for port, c := range s.captures {
		ref := CaptureRef{File: c.file, Running: true, Limit: c.limit}
		select {
		case <-c.done:
			ref.Running, ref.Figures = false, c.res
			if c.err != nil {
				ref.Error = c.err.Error()
			}
		default:
		}
		v.Captures[port] = ref
	}
	return v, nil
}

// events streams the view every Interval as server-sent events until the page goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		v, err := s.view()
		if err != nil {
			fmt.Fprintf(w, "event: failure\ndata: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// capture starts or stops the capture of a port to a file in the capture directory.
func (s *Server) capture(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /api/capture?port=P&action=start|stop", http.StatusMethodNotAllowed)
		return
	}
	if !tokenOK(r, s.token) {
		http.Error(w, "forbidden: a capture needs the token of the URL rocelab printed (?token=...)", http.StatusForbidden)
		return
	}
	port, action := r.URL.Query().Get("port"), r.URL.Query().Get("action")
	var err error
	switch action {
	case "start":
		err = s.start(port)
	case "stop":
		err = s.stop(port)
	default:
		err = fmt.Errorf("action %q: want start or stop", action)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) start(port string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.captures[port]; c != nil {
		select {
		case <-c.done:
		default:
			return fmt.Errorf("%s is already being captured to %s", port, c.file)
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(s.dir, fmt.Sprintf("%s-%s.pcapng", strings.ReplaceAll(port, ":", "-"), time.Now().Format("20060102-150405")))
	conn, err := lab.StartCapture(s.store, s.lab, lab.Request{Port: port, File: file})
	if err != nil {
		return err
	}
	c := &capture{conn: conn, file: file, done: make(chan struct{})}
	s.captures[port] = c
	go func() {
		defer close(c.done)
		defer conn.Close()
		c.res, _, c.err = conn.Copy(io.Discard)
	}()
	go s.bound(c)
	return nil
}

// bound stops c at MaxCaptureTime or once its file passes MaxCaptureBytes.
func (s *Server) bound(c *capture) {
	deadline := time.NewTimer(MaxCaptureTime)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var limit string
		select {
		case <-c.done:
			return
		case <-deadline.C:
			limit = fmt.Sprintf("stopped after %v (MaxCaptureTime)", MaxCaptureTime)
		case <-tick.C:
			if fi, err := os.Stat(c.file); err == nil && fi.Size() > MaxCaptureBytes {
				limit = fmt.Sprintf("stopped at %d MiB (MaxCaptureBytes)", fi.Size()>>20)
			}
		}
		if limit != "" {
			s.mu.Lock()
			c.limit = limit
			s.mu.Unlock()
			c.conn.Stop()
			return
		}
	}
}

func (s *Server) stop(port string) error {
	s.mu.Lock()
	c := s.captures[port]
	s.mu.Unlock()
	if c == nil {
		return errors.New("no capture of " + port + " was started here")
	}
	// Ending our side ends the capture; the lab then sends its figures.
	if err := c.conn.Stop(); err != nil {
		return err
	}
	<-c.done
	return nil
}

// Close stops the captures started from the page.
func (s *Server) Close() {
	s.mu.Lock()
	ports := make([]string, 0, len(s.captures))
	for p := range s.captures {
		ports = append(ports, p)
	}
	s.mu.Unlock()
	for _, p := range ports {
		s.stop(p)
	}
}
