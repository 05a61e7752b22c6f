package tunnel

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The control channel between two parts runs over TCP. Every message is framed as a
// 4-byte big-endian length and that many bytes; after the handshake each message also
// ends in an HMAC-SHA256 over the direction, its sequence number and its bytes, under a
// key derived from the lab's secret and both sides' nonces, so that nobody without the
// secret can speak on the channel, replay a message into another session or reorder
// messages in one. The secret itself never crosses the wire; the channel is
// authenticated, not encrypted (it carries status and commands, no secrets).
//
// Handshake (c: the dialling part, s: the listening one):
//
//	c → s  hello{lab, machine, nonce_c}
//	s → c  hello{lab, machine, nonce_s, mac_s = HMAC(secret, "s"|lab|nonce_c|nonce_s|machine_s)}
//	c → s  proof{mac_c = HMAC(secret, "c"|lab|nonce_s|nonce_c|machine_c)}
//	key    = HMAC(secret, "k"|nonce_c|nonce_s)
//
// Each side proves it holds the secret over the other's fresh nonce before it is
// believed, so neither a replayed handshake nor a relayed one opens a session.

// Bounds of what a reader accepts.
const (
	// MaxHello bounds a handshake message: unauthenticated input allocates no more.
	MaxHello = 1 << 10
	// MaxMessage bounds an authenticated message (a part's status).
	MaxMessage = 16 << 20
	nonceLen   = 32
	macLen     = sha256.Size
)

// Message is what parts exchange once authenticated.
type Message struct {
	Op string `json:"op"`
	// T0Ns and T1Ns are op "ping"'s: the asker's wall clock when it asked, and the
	// answerer's when it answered (ns, Unix time).
	T0Ns int64 `json:"t0_ns,omitempty"`
	T1Ns int64 `json:"t1_ns,omitempty"`
	// Body is an op's argument or answer, for the lab to interpret.
	Body  json.RawMessage `json:"body,omitempty"`
	Error string          `json:"error,omitempty"`
}

type hello struct {
	Lab     string `json:"lab"`
	Machine string `json:"machine"`
	Nonce   []byte `json:"nonce"`
	MAC     []byte `json:"mac,omitempty"`
}

// ErrAuth is a failed handshake or a message whose MAC does not verify.
var ErrAuth = errors.New("tunnel: control peer failed authentication (a different lab secret, or not a part of this lab)")

// readFrame reads one length-prefixed frame of at most limit bytes.
func readFrame(r io.Reader, limit int) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > uint32(limit) {
		return nil, fmt.Errorf("tunnel: control message of %d bytes, more than %d", size, limit)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w io.Writer, b []byte) error {
	out := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(out, uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		m.Write(n[:]) // length-prefixed: no two part lists hash alike
		m.Write(p)
	}
	return m.Sum(nil)
}

// Session is an authenticated control connection.
type Session struct {
	rw        io.ReadWriter
	key       []byte
	Peer      string // the other part's machine name, as it proved
	dialler   bool
	sent, got uint64
}

func nonce() []byte {
	b := make([]byte, nonceLen)
	rand.Read(b)
	return b
}

func readHello(r io.Reader, lab string) (hello, error) {
	b, err := readFrame(r, MaxHello)
	if err != nil {
		return hello{}, err
	}
	var h hello
	if err := json.Unmarshal(b, &h); err != nil {
		return hello{}, fmt.Errorf("tunnel: control handshake: %w", err)
	}
	if h.Lab != lab {
		return hello{}, fmt.Errorf("tunnel: control peer is of lab %q, not %q", h.Lab, lab)
	}
	if len(h.Nonce) != nonceLen {
		return hello{}, errors.New("tunnel: control handshake without a nonce")
	}
	return h, nil
}

func writeJSON(w io.Writer, v any) error {
	b, _ := json.Marshal(v)
	return writeFrame(w, b)
}

// Dial runs the dialling side of the handshake on rw as machine self of lab.
func Dial(rw io.ReadWriter, secret []byte, lab, self string) (*Session, error) {
	nc := nonce()
	if err := writeJSON(rw, hello{Lab: lab, Machine: self, Nonce: nc}); err != nil {
		return nil, err
	}
	h, err := readHello(rw, lab)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(h.MAC, mac(secret, []byte("s"), []byte(lab), nc, h.Nonce, []byte(h.Machine))) {
		return nil, ErrAuth
	}
	proof := mac(secret, []byte("c"), []byte(lab), h.Nonce, nc, []byte(self))
	if err := writeJSON(rw, hello{Lab: lab, Machine: self, Nonce: nc, MAC: proof}); err != nil {
		return nil, err
	}
	return &Session{rw: rw, key: mac(secret, []byte("k"), nc, h.Nonce), Peer: h.Machine, dialler: true}, nil
}

// Accept runs the listening side of the handshake on rw as machine self of lab.
func Accept(rw io.ReadWriter, secret []byte, lab, self string) (*Session, error) {
	h, err := readHello(rw, lab)
	if err != nil {
		return nil, err
	}
	ns := nonce()
	if err := writeJSON(rw, hello{Lab: lab, Machine: self, Nonce: ns,
		MAC: mac(secret, []byte("s"), []byte(lab), h.Nonce, ns, []byte(self))}); err != nil {
		return nil, err
	}
	p, err := readHello(rw, lab)
	if err != nil {
		return nil, err
	}
	if p.Machine != h.Machine || !hmac.Equal(p.MAC, mac(secret, []byte("c"), []byte(lab), ns, h.Nonce, []byte(h.Machine))) {
		return nil, ErrAuth
	}
	return &Session{rw: rw, key: mac(secret, []byte("k"), h.Nonce, ns), Peer: h.Machine}, nil
}

// direction names who sent a message, so that one side's message is never taken for
// the other's.
func (s *Session) direction(sending bool) []byte {
	if sending == s.dialler {
		return []byte("c")
	}
	return []byte("s")
}

func seqBytes(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Send writes one authenticated message.
func (s *Session) Send(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.sent++
	return writeFrame(s.rw, append(b, mac(s.key, s.direction(true), seqBytes(s.sent), b)...))
}

// Receive reads one message and checks its MAC; any failure ends the session.
func (s *Session) Receive() (Message, error) {
	b, err := readFrame(s.rw, MaxMessage+macLen)
	if err != nil {
		return Message{}, err
	}
	return s.open(b)
}

// open checks and decodes one framed message's bytes.
func (s *Session) open(b []byte) (Message, error) {
	if len(b) < macLen {
		return Message{}, ErrAuth
	}
	body, sum := b[:len(b)-macLen], b[len(b)-macLen:]
	s.got++
	if !hmac.Equal(sum, mac(s.key, s.direction(false), seqBytes(s.got), body)) {
		return Message{}, ErrAuth
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return Message{}, fmt.Errorf("tunnel: control message: %w", err)
	}
	return m, nil
}
