package capture

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

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
func monitored(t *testing.T) (*clock.Virtual, *Monitor, link.Endpoint, *sink, *sink, *link.Pool) {
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
	s, err := m.Start(&buf, time.Unix(1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(io.Discard, time.Time{}); !errors.Is(err, ErrBusy) {
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

	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var tags []byte
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.Timestamp.Before(time.Unix(1000, 0)) {
			t.Errorf("timestamp %v before the epoch", ci.Timestamp)
		}
		tags = append(tags, data[0])
	}
	if string(tags) != "\xbb\xbb\xbb\xbb\xcc\xcc" || s.Frames() != 6 || s.Dropped() != 0 {
		t.Errorf("captured %x (%d frames, %d dropped), want 4 outbound 0xbb then 2 inbound 0xcc", tags, s.Frames(), s.Dropped())
	}
	if s2, err := m.Start(io.Discard, time.Time{}); err != nil {
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
	s, err := m.Start(&failingWriter{after: 0}, time.Time{})
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
	if s2, err := m.Start(io.Discard, time.Time{}); err != nil {
		t.Errorf("the endpoint stayed busy after the failed capture: %v", err)
	} else {
		_ = s2.Stop()
	}
}
