package qp

import "github.com/rocelab/rocelab/roce"

// The responder's transmit side: a FIFO of responses that NextResponse drains, one
// packet per call. Responses leave in PSN order, as IBTA requires; a READ response
// entry yields one packet per path MTU and reads memory as it goes (as rxe does).

type respKind uint8

const (
	respAck    respKind = iota + 1 // ACK or NAK (the syndrome says which)
	respRead                       // RDMA READ response packets
	respAtomic                     // atomic ACK
)

type response struct {
	kind     respKind
	psn      roce.PSN // the (next) packet's PSN
	syndrome roce.Syndrome
	msn      uint32
	// READ: the remaining range
	rkey           uint32
	va             uint64
	length, offset uint32
	// READ: the memory the request named, kept because an XRC target's (the memory of
	// the request's XRC SRQ's PD) may change with the next request
	mem  Memory
	orig uint64 // atomic: the original value
}

// respSlack is room for ACKs and NAKs beside max_dest_rd_atomic READ/atomic entries.
const respSlack = 8

// respCapacity is the most responses a QP queues: the READs and atomics its
// max_dest_rd_atomic may allow, and respSlack ACKs and NAKs beside them.
const respCapacity = MaxRdAtomicLimit + respSlack

// respQueue is a ring that grows as it fills, up to respCapacity. Most QPs queue only
// ACKs, a few at a time: reserved whole up front, a QP's 136 entries were 8.7 KB, and
// with the atomic replay cache two thirds of a simulated flow's memory.
type respQueue struct {
	items      []response
	head, size int
	rdAtomic   int // READ and atomic entries queued
}

// full reports whether the queue holds respCapacity responses.
func (r *respQueue) full() bool { return r.size == respCapacity }

// grow enlarges a full ring, keeping its order: to twice its size, at least
// respSlack, at most respCapacity.
func (r *respQueue) grow() {
	items := make([]response, min(max(2*len(r.items), respSlack), respCapacity))
	n := copy(items, r.items[r.head:])
	copy(items[n:], r.items[:r.head])
	r.items, r.head = items, 0
}

func (r *respQueue) clear() {
	clear(r.items)
	r.head, r.size, r.rdAtomic = 0, 0, 0
}

func (r *respQueue) front() *response { return &r.items[r.head] }

func (r *respQueue) tail() *response {
	return &r.items[(r.head+r.size-1)%len(r.items)]
}

// push appends e, or reports false when the queue is full.
func (r *respQueue) push(e response) bool {
	if r.full() {
		return false
	}
	if r.size == len(r.items) {
		r.grow()
	}
	r.items[(r.head+r.size)%len(r.items)] = e
	r.size++
	if e.kind != respAck {
		r.rdAtomic++
	}
	return true
}

func (r *respQueue) pop() {
	if r.front().kind != respAck {
		r.rdAtomic--
	}
	r.items[r.head] = response{}
	r.head = (r.head + 1) % len(r.items)
	r.size--
}

// HasResponse reports whether NextResponse would produce a packet.
func (q *QP) HasResponse() bool { return q.resp.queue.size > 0 }

// NextResponse builds the next response packet (ACK, NAK, READ response or atomic ACK)
// into buf and returns its length, or ok=false when none is pending. The rnic drains
// responses before requests: they free the peer's window and never wait for credit.
func (q *QP) NextResponse(buf []byte) (n int, ok bool) {
	rq := &q.resp.queue
	for rq.size > 0 {
		r := rq.front()
		b := &q.tx
		b.Payload = nil
		b.BTH.PSN = r.psn
		b.BTH.AckReq, b.BTH.SE = false, false
		b.AETH = roce.AETHFields{Syndrome: r.syndrome, MSN: r.msn & roce.QPNMask}
		done := true
		switch r.kind {
		case respAck:
			b.BTH.Opcode = q.opcodeBase() + roce.OpRCAck
		case respAtomic:
			b.BTH.Opcode = q.opcodeBase() + roce.OpRCAtomicAck
			b.AtomicAck = r.orig
		case respRead:
			mtu := uint32(q.pathMTU())
			n := min(mtu, r.length-r.offset)
			first, last := r.offset == 0, r.offset+n == r.length
			b.BTH.Opcode = q.opcodeBase() + readResponseOpcode(first, last)
			payload, err := q.payloadIn(b, buf, n)
			if err != nil {
				return 0, false // a buffer smaller than FrameSize: the caller's bug
			}
			if err := r.mem.Read(r.rkey, r.va+uint64(r.offset), payload, AccessRemoteRead); err != nil {
				// The region changed since the request was checked.
				psn := r.psn
				rq.clear()
				q.responderError(psn, roce.NAKRemoteAccessError, 0)
				continue
			}
			b.Payload = payload
			r.offset += n
			r.psn = r.psn.Add(1)
			done = last
		}
		n, err := b.Build(buf)
		if err != nil {
			return 0, false // a buffer smaller than FrameSize: the caller's bug
		}
		if done {
			rq.pop()
		}
		q.ctr.TxResponses++
		return n, true
	}
	return 0, false
}

func readResponseOpcode(first, last bool) roce.Opcode {
	switch {
	case first && last:
		return roce.OpRCReadResponseOnly
	case first:
		return roce.OpRCReadResponseFirst
	case last:
		return roce.OpRCReadResponseLast
	}
	return roce.OpRCReadResponseMiddle
}
