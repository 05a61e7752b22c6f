package link

import (
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// Endpoint is one end of a link, as the node attached to it sees it. A switch port and
// a soft-RNIC port attach the same way. Implementations: the in-process link of this
// package; a tunnel to another lab process later.
type Endpoint interface {
	// Attach connects the node: frames arriving at this end are handed to rx on
	// loop, and Send must be called from loop. Attach is called once, during setup,
	// before the clock runs.
	Attach(loop clock.Loop, rx Receiver)

	// Send transmits a batch of frames. Each frame's Time is the model time its last
	// bit left the sender; the sender serializes at Rate and so keeps Times
	// non-decreasing. Send takes ownership of every frame, including those the link
	// drops, and never blocks; the caller may reuse the slice when Send returns.
	Send(frames []*Frame)

	// Rate returns the line rate in bit/s both ends serialize at.
	Rate() uint64

	// MTU returns the largest IP packet the link carries; Send drops (and counts)
	// frames longer than MTU plus an Ethernet header with one VLAN tag.
	MTU() int

	// Stats returns the counters of frames sent from this end. Read them from the
	// attached loop, or while the clock is not running.
	Stats() *Stats
}

// Receiver consumes the frames that arrive at an endpoint.
type Receiver interface {
	// Receive is called on the attached loop with frames whose arrival Time is at or
	// before the loop's now, in arrival order. The receiver owns the frames (it must
	// Send, keep or Release each); the slice is reused after Receive returns.
	Receive(frames []*Frame)
}

// Stats counts what happened to the frames sent from one end of a link. Each fault has
// its own counter so a test can check a configured probability against it.
type Stats struct {
	Frames     uint64 `json:"frames"`     // handed to Send
	Bytes      uint64 `json:"bytes"`      // likewise
	Delivered  uint64 `json:"delivered"`  // handed to the far end's Receiver
	Oversize   uint64 `json:"oversize"`   // dropped: longer than the MTU allows
	Lost       uint64 `json:"lost"`       // dropped by the loss fault
	Down       uint64 `json:"down"`       // dropped while the link was down (flapping or SetUp(false))
	Corrupted  uint64 `json:"corrupted"`  // one bit flipped
	Duplicated uint64 `json:"duplicated"` // delivered twice
	Reordered  uint64 `json:"reordered"`  // held back so later frames overtake it
	Jittered   uint64 `json:"jittered"`   // delivered later than the propagation delay
}

// Faults is how many frames the link's faults touched: lost, dropped while down,
// corrupted, duplicated, reordered or delayed.
func (s Stats) Faults() uint64 {
	return s.Lost + s.Down + s.Corrupted + s.Duplicated + s.Reordered + s.Jittered
}

// Serialization returns how long n bytes occupy a link of rate bit/s, rounded up to the
// nanosecond, so that a sender at line rate never builds a queue by rounding. Frames
// occupy the wire for exactly their length, as in the HPCC reference simulator:
// preamble, FCS and inter-frame gap are not modelled. Every node serializes with it.
func Serialization(n int, rate uint64) time.Duration {
	return time.Duration((uint64(n)*8*1e9 + rate - 1) / rate)
}
