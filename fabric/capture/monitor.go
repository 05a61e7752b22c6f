package capture

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// MonitorBacklog is how many captured frames a Monitor holds for its writer; past it,
// frames are left out of the capture (and counted) rather than slowing the node.
const MonitorBacklog = 4096

// ErrBusy is returned by Monitor.Start while another capture of the same endpoint runs.
var ErrBusy = errors.New("capture: the endpoint is already being captured")

// A Monitor is a capture point a running lab switches on and off: it wraps an endpoint
// as Tap does, passes frames straight through while nobody captures, and while a
// capture runs hands copies of them to a writer goroutine, so that a slow consumer (a
// pipe into Wireshark) never stalls the node's loop. Start and Stop are safe from any
// goroutine.
type Monitor struct {
	link.Endpoint
	rx   link.Receiver
	name string
	sink atomic.Pointer[Session]
}

// NewMonitor wraps ep; name names the interface in the pcapng files it writes.
func NewMonitor(ep link.Endpoint, name string) *Monitor {
	return &Monitor{Endpoint: ep, name: name}
}

// Name returns the monitored interface's name.
func (m *Monitor) Name() string { return m.name }

// Attach implements link.Endpoint.
func (m *Monitor) Attach(loop clock.Loop, rx link.Receiver) {
	m.rx = rx
	m.Endpoint.Attach(loop, m)
}

// Send implements link.Endpoint: frames leaving the node.
func (m *Monitor) Send(frames []*link.Frame) {
	if s := m.sink.Load(); s != nil {
		s.record(frames, &outbound)
	}
	m.Endpoint.Send(frames)
}

// Receive implements link.Receiver: frames arriving at the node.
func (m *Monitor) Receive(frames []*link.Frame) {
	if s := m.sink.Load(); s != nil {
		s.record(frames, &inbound)
	}
	m.rx.Receive(frames)
}

// Start begins a capture of every frame crossing the endpoint, written to w as pcapng
// (model time t stamped as epoch+t) and flushed whenever the writer catches up, so a
// live reader sees frames as they pass. It fails with ErrBusy while another capture
// of the endpoint runs.
func (m *Monitor) Start(w io.Writer, epoch time.Time) (*Session, error) {
	cw, err := NewWriter(w, m.name, epoch)
	if err != nil {
		return nil, err
	}
	s := &Session{m: m, w: cw, ch: make(chan record, MonitorBacklog), stop: make(chan struct{}), done: make(chan struct{})}
	if !m.sink.CompareAndSwap(nil, s) {
		return nil, ErrBusy
	}
	go s.run()
	return s, nil
}

// A Session is one running capture of a Monitor.
type Session struct {
	m        *Monitor
	w        *Writer
	ch       chan record
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	frames   atomic.Uint64
	dropped  atomic.Uint64
	err      error // set by run before done closes
}

type record struct {
	t   clock.Time
	b   []byte
	dir *pcapgo.NgEpbFlags
}

// record runs on the node's loop.
func (s *Session) record(frames []*link.Frame, dir *pcapgo.NgEpbFlags) {
	for _, f := range frames {
		select {
		case s.ch <- record{f.Time, bytes.Clone(f.Bytes()), dir}:
		default:
			s.dropped.Add(1)
		}
	}
}

func (s *Session) run() {
	defer close(s.done)
	defer s.m.sink.CompareAndSwap(s, nil)
	for {
		select {
		case r := <-s.ch:
			s.w.write(r.t, r.b, r.dir)
			s.frames.Add(1)
			if len(s.ch) == 0 {
				if err := s.w.Flush(); err != nil {
					s.err = err
					return
				}
			}
		case <-s.stop:
			s.m.sink.CompareAndSwap(s, nil)
			// The node may have handed over a few more frames before it saw the
			// capture end: write them too.
			for len(s.ch) > 0 {
				r := <-s.ch
				s.w.write(r.t, r.b, r.dir)
				s.frames.Add(1)
			}
			s.err = s.w.Flush()
			return
		}
	}
}

// Stop ends the capture, writes what was captured so far and returns the writer's
// first error. It is safe to call more than once; a capture whose writer failed (the
// reader went away) has already stopped, and Stop returns that error.
func (s *Session) Stop() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	return s.err
}

// Done is closed when the capture has ended, by Stop or by a write error.
func (s *Session) Done() <-chan struct{} { return s.done }

// Frames returns how many frames the capture wrote; Dropped how many it left out
// because the writer fell MonitorBacklog frames behind.
func (s *Session) Frames() uint64  { return s.frames.Load() }
func (s *Session) Dropped() uint64 { return s.dropped.Load() }
