package tunnel

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/net/ipv4"
)

// The underlay's I/O is batched as wireguard-go batches its UDP: one sendmmsg or
// recvmmsg moves up to batchSize datagrams. The nodes' loops never make a system call
// for the underlay: a loop queues its datagrams (sender.queue) and the part's writer
// goroutine sends them, so a send that runs the peer's receive path in the kernel (a
// veth does) costs the loop nothing.
const (
	batchSize = 64
	// maxDatagram bounds a received datagram: a jumbo inner frame (9,000 bytes and its
	// Ethernet header) with the VXLAN header and the trailer fit.
	maxDatagram = 9216 + Overhead
	// maxQueued bounds the datagrams waiting for the writer, as a NIC's transmit ring
	// does: beyond it a datagram is dropped and counted (Stats.SendErrors).
	maxQueued = 4096
)

// outgoing is a datagram waiting for the writer.
type outgoing struct {
	b     []byte
	to    netip.AddrPort
	stats *Stats
}

// sender queues datagrams from the nodes' loops for the writer goroutine.
type sender struct {
	mu      sync.Mutex
	queue   []outgoing
	wake    chan struct{}
	buffers sync.Pool // *[]byte of up to maxDatagram
}

func newSender() *sender {
	s := &sender{wake: make(chan struct{}, 1)}
	s.buffers.New = func() any { b := make([]byte, 0, maxDatagram); return &b }
	return s
}

// buffer returns an empty datagram buffer for enqueue.
func (s *sender) buffer() []byte { return (*s.buffers.Get().(*[]byte))[:0] }

// enqueue hands b (from buffer) to the writer, or drops it when the queue is full.
func (s *sender) enqueue(b []byte, to netip.AddrPort, st *Stats) {
	s.mu.Lock()
	full := len(s.queue) >= maxQueued
	if !full {
		s.queue = append(s.queue, outgoing{b, to, st})
	}
	first := len(s.queue) == 1
	s.mu.Unlock()
	if full {
		st.SendErrors.Add(1)
		s.release(b)
		return
	}
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *sender) release(b []byte) {
	if cap(b) == maxDatagram {
		s.buffers.Put(&b)
	}
}

// write sends the queued datagrams on conn until stop is closed.
func (s *sender) write(conn *net.UDPConn, stop <-chan struct{}) {
	pc := ipv4.NewPacketConn(conn) // sendmmsg on either family: the kernel reads the address
	msgs := make([]ipv4.Message, batchSize)
	addrs := make([]net.UDPAddr, batchSize)
	var batch []outgoing
	for {
		select {
		case <-stop:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), batchSize)
			for i, o := range batch[:n] {
				addrs[i] = net.UDPAddr{IP: o.to.Addr().AsSlice(), Port: int(o.to.Port())}
				msgs[i] = ipv4.Message{Buffers: [][]byte{o.b}, Addr: &addrs[i]}
			}
			sent := 0
			for sent < n {
				k, err := pc.WriteBatch(msgs[sent:n], 0)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					// The first datagram was refused (no route, buffer full): count it
					// and go on with the rest.
					batch[sent].stats.SendErrors.Add(1)
					k = 1
				} else {
					for _, o := range batch[sent : sent+k] {
						o.stats.Sent.Add(1)
					}
				}
				sent += k
			}
			for _, o := range batch[:n] {
				s.release(o.b)
			}
			clear(batch[:n])
			batch = batch[n:]
		}
	}
}

// reader receives datagrams in batches.
type reader struct {
	pc   *ipv4.PacketConn
	msgs []ipv4.Message
}

func newReader(conn *net.UDPConn) *reader {
	r := &reader{pc: ipv4.NewPacketConn(conn), msgs: make([]ipv4.Message, batchSize)}
	for i := range r.msgs {
		r.msgs[i].Buffers = [][]byte{make([]byte, maxDatagram)}
	}
	return r
}

// read blocks for the next batch and calls fn for each datagram (b valid during the
// call only).
func (r *reader) read(fn func(b []byte, from netip.AddrPort)) error {
	n, err := r.pc.ReadBatch(r.msgs, 0)
	if err != nil {
		return err
	}
	for _, m := range r.msgs[:n] {
		ua, ok := m.Addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		fn(m.Buffers[0][:m.N], ua.AddrPort())
	}
	return nil
}
