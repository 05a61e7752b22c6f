// Package tuntest is an in-memory stand-in for a host's TAP, for the lab runtime's
// tests that need no kernel (after wireguard-go's tun/tuntest.ChannelTUN): the test
// plays the host's kernel through two channels. *ChannelTAP implements lab.Device.
package tuntest

import (
	"fmt"
	"os"
	"sync"
)

// QueueLen is how many frames each direction holds before a send waits, like a TAP's
// transmit queue.
const QueueLen = 1024

// ChannelTAP is a host's device whose kernel is the test.
type ChannelTAP struct {
	// Inbound carries the frames the host's kernel sends: what the test puts here, Read
	// returns. The lab does not keep the slices.
	Inbound chan []byte
	// Outbound carries the frames written to the host's kernel, one copy per frame.
	// Write waits while it is full, so a test that expects frames must take them.
	Outbound chan []byte

	closed    chan struct{}
	closeOnce sync.Once
}

// New returns an open device with empty queues.
func New() *ChannelTAP {
	return &ChannelTAP{
		Inbound:  make(chan []byte, QueueLen),
		Outbound: make(chan []byte, QueueLen),
		closed:   make(chan struct{}),
	}
}

// Read waits for a frame on Inbound, then takes up to len(bufs) frames queued there
// without waiting again, frame i into bufs[i] (truncated to it) with its length in
// sizes[i]. After Close it returns an error wrapping os.ErrClosed.
func (t *ChannelTAP) Read(bufs [][]byte, sizes []int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	select {
	case f := <-t.Inbound:
		sizes[0] = copy(bufs[0], f)
	case <-t.closed:
		return 0, fmt.Errorf("tuntest: read: %w", os.ErrClosed)
	}
	n := 1
	for ; n < len(bufs); n++ {
		select {
		case f := <-t.Inbound:
			sizes[n] = copy(bufs[n], f)
		default:
			return n, nil
		}
	}
	return n, nil
}

// Write puts a copy of each of bufs on Outbound, waiting while it is full, and returns
// how many it put there. After Close it returns an error wrapping os.ErrClosed.
func (t *ChannelTAP) Write(bufs [][]byte) (int, error) {
	for i, b := range bufs {
		select {
		case t.Outbound <- append([]byte(nil), b...):
		case <-t.closed:
			return i, fmt.Errorf("tuntest: write: %w", os.ErrClosed)
		}
	}
	return len(bufs), nil
}

// Close wakes a blocked Read or Write; later ones fail. Closing twice is harmless.
func (t *ChannelTAP) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return nil
}
