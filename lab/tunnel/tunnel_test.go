package tunnel

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

func TestDatagramRoundTrip(t *testing.T) {
	frame := bytes.Repeat([]byte{0xab}, 60)
	b := Append(nil, 5, 7, 123456789, frame)
	if b[0] != 0x08 || len(b) != len(frame)+Overhead {
		t.Fatalf("header %x, length %d", b[:8], len(b))
	}
	d, err := Decode(b)
	if err != nil || d.VNI != 5 || d.Seq != 7 || d.Arrival != 123456789 || !bytes.Equal(d.Frame, frame) {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
	if _, err := Decode(b[:20]); !errors.Is(err, ErrShort) {
		t.Errorf("short datagram: %v", err)
	}
	b[len(b)-TrailerLen] ^= 1
	if _, err := Decode(b); !errors.Is(err, ErrTrailer) {
		t.Errorf("bad trailer: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, 5, 1, 1, make([]byte, 60)))
	f.Add([]byte{0x08, 0, 0, 0, 0, 0, 5, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err == nil && len(d.Frame) < minFrame {
			t.Fatalf("accepted a %d-byte frame", len(d.Frame))
		}
	})
}

// runHandshake runs both sides of the control handshake over a pipe.
func runHandshake(t *testing.T, dialSecret, acceptSecret string) (*Session, *Session, error, error) {
	t.Helper()
	c, s := net.Pipe()
	t.Cleanup(func() { c.Close(); s.Close() })
	type res struct {
		s   *Session
		err error
	}
	ch := make(chan res, 1)
	go func() {
		ss, err := Accept(s, []byte(acceptSecret), "lab", "b")
		if err != nil {
			s.Close()
		}
		ch <- res{ss, err}
	}()
	cs, cerr := Dial(c, []byte(dialSecret), "lab", "a")
	if cerr != nil {
		c.Close()
	}
	r := <-ch
	return cs, r.s, cerr, r.err
}

func TestControlAuthentication(t *testing.T) {
	cs, ss, cerr, serr := runHandshake(t, "secret", "secret")
	if cerr != nil || serr != nil || cs.Peer != "b" || ss.Peer != "a" {
		t.Fatalf("same secret: %v, %v", cerr, serr)
	}
	go cs.Send(Message{Op: "status"})
	if m, err := ss.Receive(); err != nil || m.Op != "status" {
		t.Fatalf("Receive = %+v, %v", m, err)
	}
	if _, _, cerr, serr := runHandshake(t, "secret", "other"); !errors.Is(cerr, ErrAuth) || serr == nil {
		t.Fatalf("different secrets: dialler %v, acceptor %v", cerr, serr)
	}
}

func FuzzSessionOpen(f *testing.F) {
	f.Add([]byte(`{"op":"status"}`))
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &Session{key: []byte("k")}
		if _, err := s.open(b); err == nil {
			t.Fatal("an unauthenticated message was accepted")
		}
	})
}
