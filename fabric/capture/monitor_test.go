package capture

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

type sink struct{ n int }

func (s *sink) Receive(frames []*link.Frame) {
	s.n += len(frames)
	for _, f := range frames {
		f.Release()
	}
}

// monitored is a link whose end a is monitored; both ends count what they receive.
func monitored(t testing.TB) (*clock.Virtual, *Monitor, link.Endpoint, *sink, *sink, *link.Pool) {
	t.Helper()
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMonitor(a, "s1:p0")
	ra, rb := &sink{}, &sink{}
	m.Attach(v.NewLoop("a"), ra)
	b.Attach(v.NewLoop("b"), rb)
	return v, m, b, ra, rb, link.NewPool(1518)
}

func frames(pool *link.Pool, n int, at clock.Time, tag byte) []*link.Frame {
	out := make([]*link.Frame, n)
	for i := range out {
		out[i] = pool.Get()
		b := bytes.Repeat([]byte{tag}, 60)
		b[59] = byte(i)
		if err := out[i].SetBytes(b); err != nil {
			panic(err)
		}
		out[i].Time = at
	}
	return out
}

// TestMonitor: nothing is recorded while no capture runs; during one, both directions
// are, with their direction flag; after Stop nothing more; a second concurrent capture
// is refused.
func TestMonitor(t *testing.T) {
	v, m, b, ra, rb, pool := monitored(t)
	m.Send(frames(pool, 3, 0, 0xaa)) // before any capture
	v.Run()

	var buf bytes.Buffer
	s, err := m.Start(&buf, time.Unix(1000, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(io.Discard, time.Time{}, 0); !errors.Is(err, ErrBusy) {
		t.Errorf("second capture: %v, want ErrBusy", err)
	}
	m.Send(frames(pool, 4, v.Now(), 0xbb))
	b.Send(frames(pool, 2, v.Now(), 0xcc))
	v.Run()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	m.Send(frames(pool, 5, v.Now(), 0xdd)) // after the capture
	v.Run()
	if ra.n != 2 || rb.n != 12 {
		t.Fatalf("delivered %d and %d frames, want 2 and 12: the monitor must pass everything", ra.n, rb.n)
	}

	got := readCapture(t, &buf)
	var tags []byte
	for i, data := range got.frames {
		if got.infos[i].Timestamp.Before(time.Unix(1000, 0)) {
			t.Errorf("timestamp %v before the epoch", got.infos[i].Timestamp)
		}
		tags = append(tags, data[0])
	}
	if string(tags) != "\xbb\xbb\xbb\xbb\xcc\xcc" || s.Frames() != 6 || s.Dropped() != 0 {
		t.Errorf("captured %x (%d frames, %d dropped), want 4 outbound 0xbb then 2 inbound 0xcc", tags, s.Frames(), s.Dropped())
	}
	if len(got.stats) != 1 || got.stats[0].PacketsReceived != 6 || got.stats[0].PacketsDropped != 0 {
		t.Errorf("statistics blocks %+v, want one with isb_ifrecv 6, isb_ifdrop 0", got.stats)
	}
	if m.Last() != s || s.Running() {
		t.Errorf("Last() = %p running %v, want the stopped session %p", m.Last(), s.Running(), s)
	}
	if s2, err := m.Start(io.Discard, time.Time{}, 0); err != nil {
		t.Errorf("a capture after the first stopped: %v", err)
	} else {
		_ = s2.Stop()
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, io.ErrClosedPipe
	}
	w.after--
	return len(p), nil
}

// TestMonitorReaderGone: when the reader goes away (a closed pipe), the capture ends by
// itself, reports the error and frees the endpoint for the next one; traffic never
// notices.
func TestMonitorReaderGone(t *testing.T) {
	v, m, _, _, rb, pool := monitored(t)
	s, err := m.Start(&failingWriter{after: 0}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err) // the section header is buffered, not written yet
	}
	m.Send(frames(pool, 2, 0, 1))
	v.Run()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the capture did not end after its writer failed")
	}
	if err := s.Stop(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Stop: %v, want the writer's error", err)
	}
	if rb.n != 2 {
		t.Errorf("delivered %d frames, want 2", rb.n)
	}
	if s2, err := m.Start(io.Discard, time.Time{}, 0); err != nil {
		t.Errorf("the endpoint stayed busy after the failed capture: %v", err)
	} else {
		_ = s2.Stop()
	}
}

type captured struct {
	frames [][]byte
	infos  []gopacket.CaptureInfo
	stats  []pcapgo.NgInterfaceStatistics
}

// readCapture reads a pcapng file's frames and its Interface Statistics Blocks.
func readCapture(t *testing.T, r io.Reader) captured {
	t.Helper()
	var c captured
	ng, err := pcapgo.NewNgReader(r, pcapgo.NgReaderOptions{StatisticsCallback: func(_ int, st pcapgo.NgInterfaceStatistics) {
		c.stats = append(c.stats, st)
	}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, ci, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return c
		}
		if err != nil {
			t.Fatal(err)
		}
		c.frames = append(c.frames, data)
		c.infos = append(c.infos, ci)
	}
}

// TestMonitorSnaplen: --snaplen keeps each frame's first bytes and records its length
// on the wire.
func TestMonitorSnaplen(t *testing.T) {
	v, m, _, _, _, pool := monitored(t)
	var buf bytes.Buffer
	s, err := m.Start(&buf, time.Time{}, 16)
	if err != nil {
		t.Fatal(err)
	}
	m.Send(frames(pool, 3, 0, 0xab))
	v.Run()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	got := readCapture(t, &buf)
	if len(got.frames) != 3 {
		t.Fatalf("captured %d frames, want 3", len(got.frames))
	}
	for i, ci := range got.infos {
		if ci.CaptureLength != 16 || ci.Length != 60 || !bytes.Equal(got.frames[i], bytes.Repeat([]byte{0xab}, 16)) {
			t.Errorf("frame %d: kept %d of %d bytes (%x), want the first 16 of 60", i, ci.CaptureLength, ci.Length, got.frames[i])
		}
	}
	if _, err := m.Start(io.Discard, time.Time{}, -1); err == nil {
		t.Error("a negative snaplen was accepted")
	}
}

// blockedWriter holds every write until release is closed.
type blockedWriter struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.buf.Write(p)
}

// TestMonitorDrops: a writer that cannot keep up loses frames, but never silently:
// the session counts them, and the file's statistics block says how many crossed the
// port (isb_ifrecv) and how many the file lacks (isb_ifdrop). The node is never slowed.
func TestMonitorDrops(t *testing.T) {
	v, m, _, _, rb, pool := monitored(t)
	m.backlog = 4 << 20
	w := &blockedWriter{release: make(chan struct{})}
	s, err := m.Start(w, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Twice the backlog in 1500-byte frames, a batch at a time.
	const size, batch = 1500, 64
	sent := 0
	for sent*size < 2*int(m.backlog) {
		fs := frames(pool, batch, v.Now(), 0x11)
		for _, f := range fs {
			if _, err := f.SetLen(size); err != nil {
				t.Fatal(err)
			}
		}
		m.Send(fs)
		v.Run()
		sent += batch
	}
	close(w.release)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if rb.n != sent {
		t.Errorf("delivered %d of %d frames: the capture slowed or dropped traffic", rb.n, sent)
	}
	if s.Dropped() == 0 || s.Frames()+s.Dropped() != uint64(sent) {
		t.Fatalf("%d written + %d dropped, want %d in all with some dropped", s.Frames(), s.Dropped(), sent)
	}
	got := readCapture(t, &w.buf)
	if uint64(len(got.frames)) != s.Frames() {
		t.Errorf("file has %d frames, the session says it wrote %d", len(got.frames), s.Frames())
	}
	if len(got.stats) != 1 || got.stats[0].PacketsReceived != uint64(sent) || got.stats[0].PacketsDropped != s.Dropped() {
		t.Errorf("statistics blocks %+v, want isb_ifrecv %d, isb_ifdrop %d", got.stats, sent, s.Dropped())
	}
}
