package lab

import (
	"github.com/rocelab/rocelab/netns"
)

// Device is a host's network device on the kernel side, as the lab runtime uses it:
// one TAP queue (netns.TAP) in a lab, an in-memory double (lab/tuntest) in tests that
// need no kernel. The lab reads it from one relay goroutine and writes it from one
// node loop; Close may come from any goroutine.
type Device interface {
	// Read waits for at least one frame the host's kernel sent, then takes up to
	// len(bufs) frames already queued without waiting again (one wake-up serves a
	// burst): frame i into bufs[i], its length into sizes[i]. It returns how many it
	// read. A frame longer than its buffer is truncated: the lab's buffers hold
	// link.MaxFrame bytes. After Close, Read returns an error wrapping os.ErrClosed.
	Read(bufs [][]byte, sizes []int) (n int, err error)
	// Write hands each of bufs, one Ethernet frame without FCS, to the host's kernel
	// and returns how many it handed over before the first error. It keeps none of
	// bufs. It may wait while the kernel's queue is full, never for a Read.
	Write(bufs [][]byte) (int, error)
	// Close releases the device and wakes a blocked Read. The lab calls it once.
	Close() error
}

// AddHostFunc creates a host's kernel side in the lab named lab and returns its
// device. netns.AddHost is the real one (AddTAPHost).
type AddHostFunc func(store netns.Store, lab string, h netns.HostConfig) (Device, error)

// AddTAPHost creates the host's namespace and TAP and records them in store
// (netns.AddHost); the lab uses the TAP's first queue.
func AddTAPHost(store netns.Store, lab string, h netns.HostConfig) (Device, error) {
	tap, err := netns.AddHost(store, lab, h)
	if err != nil {
		return nil, err
	}
	return tapQueue{tap}, nil
}

// tapQueue is queue 0 of a TAP as a Device.
type tapQueue struct{ tap *netns.TAP }

func (q tapQueue) Read(bufs [][]byte, sizes []int) (int, error) { return q.tap.Read(0, bufs, sizes) }
func (q tapQueue) Write(bufs [][]byte) (int, error)             { return q.tap.Write(0, bufs) }
func (q tapQueue) Close() error                                 { return q.tap.Close() }
