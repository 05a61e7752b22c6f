package capture

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// MonitorBacklog is how many bytes of captured frames a Monitor holds for its writer;
// past it, frames are left out of the capture (and counted: Session.Dropped, the
// pcapng's isb_ifdrop) rather than slowing the node. 256 MiB holds a whole default
// write_bw (5000 64 KiB messages) when the writer gets no CPU while it runs (the
// apps poll on the other cores); memory is taken only while the writer is behind.
const MonitorBacklog = 256 << 20

// monitorBatches bounds the batches (one per Send or Receive call) queued for the
// writer; the byte budget is the real bound.
const monitorBatches = 1 << 16

// flushInterval is how often a Monitor's writer wakes to write what the node handed
// over and flush it: the node never wakes the writer (a wake-up per batch would cost
// the node's loop more than the copy), and a live reader sees frames this late.
const flushInterval = 10 * time.Millisecond

// writeBuffer batches the pcapng blocks into large writes (few syscalls per second).
const writeBuffer = 1 << 20

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
	last atomic.Pointer[Session]
	// backlog is MonitorBacklog, smaller in tests.
	backlog int64
}

// NewMonitor wraps ep; name names the interface in the pcapng files it writes.
func NewMonitor(ep link.Endpoint, name string) *Monitor {
	return &Monitor{Endpoint: ep, name: name, backlog: MonitorBacklog}
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
// (model time t stamped as epoch+t) every flushInterval, so a live reader sees frames
// as they pass. snaplen > 0 keeps only each frame's first snaplen bytes (headers),
// which cuts what the writer must keep up with. It fails with ErrBusy while another
// capture of the endpoint runs.
func (m *Monitor) Start(w io.Writer, epoch time.Time, snaplen int) (*Session, error) {
	if snaplen < 0 {
		return nil, errors.New("capture: negative snaplen")
	}
	buf := bufio.NewWriterSize(w, writeBuffer)
	cw, err := NewWriter(buf, m.name, epoch)
	if err != nil {
		return nil, err
	}
	s := &Session{m: m, w: cw, out: buf, snaplen: snaplen, backlog: m.backlog, ch: make(chan []record, monitorBatches),
		stop: make(chan struct{}), done: make(chan struct{})}
	if !m.sink.CompareAndSwap(nil, s) {
		return nil, ErrBusy
	}
	m.last.Store(s)
	go s.run()
	return s, nil
}

// Last returns the endpoint's running capture, else the one that ran last; nil if none
// ever ran.
func (m *Monitor) Last() *Session { return m.last.Load() }

// A Session is one running capture of a Monitor.
type Session struct {
	m        *Monitor
	w        *Writer
	out      *bufio.Writer
	snaplen  int
	backlog  int64
	ch       chan []record
	queued   atomic.Int64 // bytes in ch
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	frames   atomic.Uint64
	dropped  atomic.Uint64
	lastTime clock.Time // of the last frame written; run's
	err      error      // set by run before done closes
}

type record struct {
	t       clock.Time
	b       []byte
	origLen int
	dir     *pcapgo.NgEpbFlags
}

// record runs on the node's loop: it copies the frames (up to snaplen bytes each) into
// one buffer and queues them as one batch, or counts them as dropped when the writer
// is MonitorBacklog bytes behind.
func (s *Session) record(frames []*link.Frame, dir *pcapgo.NgEpbFlags) {
	size := 0
	for _, f := range frames {
		size += s.kept(f.Len())
	}
	if s.queued.Load()+int64(size) > s.backlog {
		s.dropped.Add(uint64(len(frames)))
		return
	}
	buf := make([]byte, 0, size)
	batch := make([]record, len(frames))
	for i, f := range frames {
		start := len(buf)
		buf = append(buf, f.Bytes()[:s.kept(f.Len())]...)
		batch[i] = record{t: f.Time, b: buf[start:len(buf):len(buf)], origLen: f.Len(), dir: dir}
	}
	select {
	case s.ch <- batch:
		s.queued.Add(int64(size))
	default:
		s.dropped.Add(uint64(len(frames)))
	}
}

func (s *Session) kept(n int) int {
	if s.snaplen > 0 && n > s.snaplen {
		return s.snaplen
	}
	return n
}

// run is the writer: every flushInterval it writes what was queued and flushes; when
// the capture stops it writes the rest and the statistics block.
func (s *Session) run() {
	defer close(s.done)
	defer s.m.sink.CompareAndSwap(s, nil)
	tick := time.NewTicker(flushInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if s.drain(); s.err == nil {
				s.err = s.flush()
			}
			if s.err != nil {
				return
			}
		case <-s.stop:
			s.m.sink.CompareAndSwap(s, nil)
			// The node may have handed over more frames before it saw the capture
			// end: write them too.
			s.drain()
			s.w.writeStats(s.frames.Load()+s.dropped.Load(), s.dropped.Load(), s.lastTime)
			s.err = s.flush()
			return
		}
	}
}

// drain writes every queued batch.
func (s *Session) drain() {
	for {
		select {
		case batch := <-s.ch:
			size := 0
			for _, r := range batch {
				s.w.write(r.t, r.b, r.origLen, r.dir)
				s.lastTime = r.t
				size += len(r.b)
			}
			s.queued.Add(-int64(size))
			s.frames.Add(uint64(len(batch)))
		default:
			return
		}
	}
}

func (s *Session) flush() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	return s.out.Flush()
}

// Stop ends the capture, writes what was captured so far and the statistics block,
// and returns the writer's first error. It is safe to call more than once; a capture
// whose writer failed (the reader went away) has already stopped, and Stop returns
// that error.
func (s *Session) Stop() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	return s.err
}

// Done is closed when the capture has ended, by Stop or by a write error.
func (s *Session) Done() <-chan struct{} { return s.done }

// Running reports whether the capture still runs.
func (s *Session) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Frames returns how many frames the capture wrote. With Dropped, they are every frame
// that crossed the endpoint while the capture ran.
func (s *Session) Frames() uint64 { return s.frames.Load() }

// Dropped returns how many frames the capture left out because the writer fell
// MonitorBacklog bytes behind.
func (s *Session) Dropped() uint64 { return s.dropped.Load() }

// Snaplen returns the capture's snap length; 0 keeps whole frames.
func (s *Session) Snaplen() int { return s.snaplen }
