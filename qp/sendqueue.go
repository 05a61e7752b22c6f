package qp

import (
	"math/bits"

	"github.com/rocelab/rocelab/roce"
)

// sendWQE is a posted send work request and its transport progress.
type sendWQE struct {
	wr     SendWR
	length uint32 // message length: the SGL's bytes

	// PSNs, assigned when the requester starts the WQE. A READ spans one PSN per
	// response packet; everything else one per request packet.
	started           bool
	firstPSN, lastPSN roce.PSN
	nextPSN           roce.PSN // the next PSN to transmit; lastPSN+1 when all is sent

	done     bool     // acknowledged (RC) or transmitted (UC, UD)
	status   WCStatus // the error it completes with, if any
	rdAtomic bool     // counted in requester.rdAtomic until it completes

	// For the in-flight byte count: request payload bytes transmitted and acknowledged
	// (SEND and WRITE), or READ response bytes received.
	sent, acked uint32
}

// sendQueue is the send queue: a ring of WQEs between three free-running indices.
// [head, next) are started (being transmitted or awaiting acknowledgement), [next, tail)
// wait for the requester. The ring's length is a power of two, so that an index wraps
// with a mask rather than a division (2.4 % of a simulated incast's CPU); it holds
// the queue's depth, which bounds the WQEs posted.
type sendQueue struct {
	wqes             []sendWQE
	depth            uint64
	head, next, tail uint64
}

func (s *sendQueue) init(n int) {
	s.wqes, s.depth = make([]sendWQE, 1<<bits.Len(uint(max(n, 1)-1))), uint64(n)
}
func (s *sendQueue) at(i uint64) *sendWQE { return &s.wqes[i&uint64(len(s.wqes)-1)] }
func (s *sendQueue) full() bool           { return s.tail-s.head == s.depth }
func (s *sendQueue) push() *sendWQE       { w := s.at(s.tail); s.tail++; return w }
func (s *sendQueue) clear()               { clear(s.wqes); s.head, s.next, s.tail = 0, 0, 0 }

// npkts is the number of PSNs a message of n bytes takes at path MTU mtu.
func npkts(n uint32, mtu int) int {
	if n == 0 {
		return 1
	}
	return int((uint64(n) + uint64(mtu) - 1) / uint64(mtu))
}
