// Package ioam implements IOAM trace options (RFC 9197) carried in an IPv6 Hop-by-Hop
// Options header (RFC 9486): the pre-allocated and the incremental trace, every
// defined Trace-Type bit (the 4-byte and wide 8-byte formats and the opaque state
// snapshot), NodeLen, RemainingLen and the Overflow flag.
//
// The Hop-by-Hop header rocelab adds (Linux pads the same way, so the trace header is
// 4-byte aligned):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |  PadN (1)     |  0            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Type 0x31    |  Opt Data Len |   Reserved    | IOAM Opt-Type |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Namespace-ID           |NodeLen  | Flags |RemainingLen |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               IOAM-Trace-Type                 |  Reserved     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            node data list (newest node first) ...             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  [PadN 0x01 | 2 | 0 | 0] when the header needs 8-byte length  |
//
// IOAM Option-Type 0 is the pre-allocated trace (the encapsulating node reserves
// RemainingLen words; a node writes its data at the end of the free space), 1 the
// incremental trace (a node inserts its data right after the trace header). Either
// way a node that finds fewer than NodeLen words (plus its opaque snapshot) left sets
// the Overflow flag instead.
//
// Flags: Overflow (most significant), Loopback, Active (RFC 9322), reserved.
//
// Sources: RFC 9197 sections 4.4 (trace option, data fields) and 5; RFC 9486 section 3
// (IPv6 option 0x31); Linux net/ipv6/ioam6.c for the transit behaviour checked live.
package ioam

import (
	"encoding/binary"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Constants of the carriage.
const (
	OptionType       = 0x31 // IPv6 option type of IOAM (RFC 9486)
	PreAllocated     = 0    // IOAM Option-Type
	Incremental      = 1
	TraceHeaderSize  = 8
	optHeadSize      = 4 // option type, length, reserved, IOAM option-type
	leadPadSize      = 2 // PadN before the option so the trace header is 4-aligned
	FlagOverflow     = 0x8
	FlagLoopback     = 0x4
	FlagActive       = 0x2
	maxOptionDataLen = 255
)

// Trace-Type bits; bit 0 of RFC 9197 is the most significant of the 24.
const (
	TraceHopLimNodeID  uint32 = 1 << (23 - iota) // hop limit 8 + node ID 24
	TraceIfIDs                                   // ingress 16 + egress 16
	TraceTSSeconds                               // timestamp seconds 32
	TraceTSFraction                              // timestamp fraction 32
	TraceTransitDelay                            // transit delay 32
	TraceNSData                                  // namespace-specific data 32
	TraceQueueDepth                              // queue depth 32
	TraceChecksum                                // checksum complement 32
	TraceHopLimNodeIDW                           // hop limit 8 + node ID 56
	TraceIfIDsWide                               // ingress 32 + egress 32
	TraceNSDataWide                              // namespace-specific data 64
	TraceBufferOcc                               // buffer occupancy 32
)

// TraceOpaque is bit 22: the variable-length opaque state snapshot.
const TraceOpaque uint32 = 1 << 1

// traceWords[i] is the size in words of the data of Trace-Type bit i. Bits 12–21 are
// undefined: a transit node fills one word of 0xFFFFFFFF for each (RFC 9197 4.4.1).
// Bit 22 (opaque) is variable and outside NodeLen; bit 23 is reserved and empty.
var traceWords = [24]int{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}

// NodeLen returns the words of node data a Trace-Type asks of every node, without the
// opaque state snapshot (the definition of the NodeLen field).
func NodeLen(traceType uint32) int {
	n := 0
	for i := range 22 {
		if traceType&(1<<(23-i)) != 0 {
			n += traceWords[i]
		}
	}
	return n
}

// HPCCTraceType is rocelab's HPCC profile: hop limit + node ID (switch_ID), interface
// IDs (ingress, egress = port_ID), timestamp seconds and fraction (ts), transit delay,
// namespace data (B in Mb/s), queue depth (qlen in bytes), wide namespace data (tx
// bytes). NodeLen 9.
const HPCCTraceType = TraceHopLimNodeID | TraceIfIDs | TraceTSSeconds | TraceTSFraction |
	TraceTransitDelay | TraceNSData | TraceQueueDepth | TraceNSDataWide

// Trace is a view of the 8-byte trace header.
type Trace []byte

// Offsets of the trace header's fields.
const (
	traceNamespace = 0 // Namespace-ID (16 bits)
	traceLenFlags  = 2 // NodeLen (5 bits), Flags (4), RemainingLen (7): 16 bits
	traceType      = 4 // IOAM-Trace-Type (24 bits), reserved (8)
	remainingMask  = 0x7F
)

// Namespace returns the IOAM namespace ID.
func (t Trace) Namespace() uint16 { return binary.BigEndian.Uint16(t[traceNamespace:]) }

// NodeLen returns the length of one node's fixed data in 4-byte words.
func (t Trace) NodeLen() int { return int(t[traceLenFlags] >> 3) }

// Flags returns the 4 flag bits (FlagOverflow).
func (t Trace) Flags() uint8 { return uint8(binary.BigEndian.Uint16(t[traceLenFlags:]) >> 7 & 0xF) }

// RemainingLen returns the words left for the nodes still to come.
func (t Trace) RemainingLen() int {
	return int(binary.BigEndian.Uint16(t[traceLenFlags:]) & remainingMask)
}

// Type returns the trace type: which fields each node records.
func (t Trace) Type() uint32 { return binary.BigEndian.Uint32(t[traceType:]) >> 8 }

// SetOverflow sets the Overflow flag (the flags straddle the bytes of traceLenFlags).
func (t Trace) SetOverflow() { t[traceLenFlags] |= FlagOverflow >> 1 }

// SetRemainingLen sets the remaining length in words.
func (t Trace) SetRemainingLen(n int) {
	v := binary.BigEndian.Uint16(t[traceLenFlags:])
	binary.BigEndian.PutUint16(t[traceLenFlags:], v&^remainingMask|uint16(n)&remainingMask)
}

// Header holds the decoded option and trace header fields.
type Header struct {
	OptionType   uint8 // PreAllocated or Incremental
	Namespace    uint16
	NodeLen      int
	Flags        uint8
	Overflow     bool
	RemainingLen int
	TraceType    uint32
	DataLen      int // bytes of node data space (pre-allocated: filled and free)
}

// Codec adds, stamps, decodes and strips IOAM traces. The zero value is not ready:
// use New and adjust the fields.
type Codec struct {
	// Namespace is the Namespace-ID a source writes and a transit node serves.
	Namespace uint16
	// TraceType is the Trace-Type a source requests.
	TraceType uint32
	// Incremental selects the incremental trace (else pre-allocated).
	Incremental bool
	// Nodes is how many nodes' data the source makes room for.
	Nodes int
	// FractionMicros says the timestamp fraction counts microseconds (as Linux writes
	// it) rather than nanoseconds (PTP format, rocelab's default).
	FractionMicros bool
	// OpaqueSchema is the schema ID of the opaque state snapshot a node writes; its
	// data comes from the hop's Opaque bytes, padded to 4.
	OpaqueSchema uint32
	// OpaqueWords is the room a source reserves per node for the snapshot's data.
	OpaqueWords int
	// MTU bounds the IPv6 packet an incremental push may produce; 0 = buffer only.
	MTU int
}

// Signal is IOAM's mark: an IPv6 Hop-by-Hop options header (which namespace's trace
// it holds is the decoder's to tell).
func (c *Codec) Signal() telemetry.Signal {
	return telemetry.Signal{By: telemetry.SignalHopByHop}
}

// New returns a pre-allocated-trace codec with the HPCC profile in namespace 1, with
// room for 5 nodes: 9 words each, and one option's data holds at most 245 bytes.
func New() *Codec {
	return &Codec{Namespace: 1, TraceType: HPCCTraceType, Nodes: 5}
}

type located struct {
	l       roce.Layout
	hbh     int // offset of the Hop-by-Hop header
	hbhLen  int
	opt     int // offset of the IOAM option (its type byte)
	trace   Trace
	data    int // offset of the node data
	dataLen int
}

// find locates the first IOAM trace option in the Hop-by-Hop header.
func find(frame []byte) (located, error) {
	var x located
	l, err := telemetry.Locate(frame)
	if err != nil {
		return x, err
	}
	x.l = l
	if !l.IPv6() || l.Proto != telemetry.ProtoHopByHop {
		return x, telemetry.ErrNoTelemetry
	}
	x.hbh = l.L4
	if x.hbh+8 > l.End {
		return x, telemetry.Malformed("Hop-by-Hop header cut off")
	}
	x.hbhLen = 8 * (int(frame[x.hbh+1]) + 1)
	if x.hbh+x.hbhLen > l.End {
		return x, telemetry.Malformed("Hop-by-Hop length %d in %d bytes", x.hbhLen, l.End-x.hbh)
	}
	end := x.hbh + x.hbhLen
	for p := x.hbh + 2; p < end; {
		t := frame[p]
		if t == 0 { // Pad1
			p++
			continue
		}
		if p+2 > end || p+2+int(frame[p+1]) > end {
			return x, telemetry.Malformed("Hop-by-Hop option at %d overruns the header", p-x.hbh)
		}
		n := int(frame[p+1])
		if t == OptionType && n >= 2 && (frame[p+3] == PreAllocated || frame[p+3] == Incremental) {
			if n < 2+TraceHeaderSize {
				return x, telemetry.Malformed("IOAM trace option of %d bytes", n)
			}
			x.opt = p
			x.trace = Trace(frame[p+optHeadSize : p+optHeadSize+TraceHeaderSize])
			x.data = p + optHeadSize + TraceHeaderSize
			x.dataLen = n - 2 - TraceHeaderSize
			if x.dataLen%4 != 0 || x.trace.RemainingLen()*4 > x.dataLen && frame[p+3] == PreAllocated {
				return x, telemetry.Malformed("IOAM trace data of %d bytes with RemainingLen %d", x.dataLen, x.trace.RemainingLen())
			}
			return x, nil
		}
		p += 2 + n
	}
	return x, telemetry.ErrNoTelemetry
}

// Request adds a Hop-by-Hop header holding an empty trace after the IPv6 header: for
// the pre-allocated trace with room for c.Nodes nodes, for the incremental trace
// with no data and RemainingLen for c.Nodes nodes. IPv4 frames and frames that already
// have a Hop-by-Hop header are refused (telemetry.ErrUnsupported).
func (c *Codec) Request(frame []byte) ([]byte, error) {
	l, err := telemetry.Locate(frame)
	if err != nil {
		return frame, err
	}
	if !l.IPv6() || l.Proto == telemetry.ProtoHopByHop {
		return frame, telemetry.ErrUnsupported
	}
	nodeLen := NodeLen(c.TraceType)
	perNode := nodeLen
	if c.TraceType&TraceOpaque != 0 {
		perNode += 1 + c.OpaqueWords
	}
	room := perNode * c.Nodes
	if nodeLen > 31 || room > 127 {
		return frame, telemetry.Malformed("NodeLen %d words for %d nodes does not fit NodeLen (5 bits) or RemainingLen (7 bits)", nodeLen, c.Nodes)
	}
	data := 0
	if !c.Incremental {
		data = 4 * room
	}
	if 2+TraceHeaderSize+data > maxOptionDataLen {
		return frame, telemetry.Malformed("pre-allocated trace of %d bytes exceeds an option", data)
	}
	size := leadPadSize + 2 + optHeadSize + TraceHeaderSize + data
	size += -size & 7
	off := l.L4
	if frame, err = telemetry.Open(frame, off, size); err != nil {
		return frame, err
	}
	b := frame[off : off+size]
	b[0], b[1] = l.Proto, uint8(size/8-1)
	b[2], b[3] = 1, 0 // PadN with no data
	o := b[4:]
	o[0], o[1], o[2] = OptionType, uint8(2+TraceHeaderSize+data), 0
	o[3] = PreAllocated
	if c.Incremental {
		o[3] = Incremental
	}
	t := Trace(o[optHeadSize:])
	binary.BigEndian.PutUint16(t[0:], c.Namespace)
	binary.BigEndian.PutUint16(t[2:], uint16(nodeLen)<<11|uint16(room))
	binary.BigEndian.PutUint32(t[4:], c.TraceType<<8)
	if tail := 4 + optHeadSize + TraceHeaderSize + data; tail < size {
		putPadN(b[tail:])
	}
	l.AddIPLength(frame, size)
	l.SetProto(frame, telemetry.ProtoHopByHop)
	return frame, nil
}

// putPadN writes a PadN option filling b (at least 2 bytes).
func putPadN(b []byte) {
	b[0], b[1] = 1, uint8(len(b)-2)
	clear(b[2:])
}

// nodeSize is the bytes one node writes: NodeLen words plus the opaque snapshot.
func nodeSize(nodeLen int, traceType uint32, h *telemetry.Hop) int {
	n := 4 * nodeLen
	if traceType&TraceOpaque != 0 {
		n += 4 + (len(h.Opaque)+3)&^3
	}
	return n
}

// Push acts as an IOAM transit node of c.Namespace: it writes hop h into the trace if
// RemainingLen leaves room (pre-allocated: in place; incremental: inserted after the
// trace header), and otherwise sets the Overflow flag. Traces of other namespaces are
// ErrNoTelemetry to this node.
func (c *Codec) Push(frame []byte, h *telemetry.Hop) ([]byte, telemetry.Status, error) {
	x, err := find(frame)
	if err != nil {
		return frame, 0, err
	}
	if x.trace.Namespace() != c.Namespace {
		return frame, 0, telemetry.ErrNoTelemetry
	}
	tt, nodeLen := x.trace.Type(), x.trace.NodeLen()
	if nodeLen != NodeLen(tt) {
		return frame, 0, telemetry.Malformed("NodeLen %d for Trace-Type %#06x (needs %d)", nodeLen, tt, NodeLen(tt))
	}
	n := nodeSize(nodeLen, tt, h)
	if n == 0 {
		return frame, 0, telemetry.Malformed("Trace-Type %#06x asks a node for no data", tt)
	}
	rem := 4 * x.trace.RemainingLen()
	filled := frame[x.data : x.data+x.dataLen]
	if frame[x.opt+3] == PreAllocated {
		filled = filled[rem:]
	}
	if !wholeNodes(filled, tt, nodeLen) {
		return frame, 0, telemetry.Malformed("IOAM node data of %d bytes is not whole nodes of Trace-Type %#06x", len(filled), tt)
	}
	if frame[x.opt+3] == PreAllocated {
		if n > rem {
			x.trace.SetOverflow()
			return frame, telemetry.Overflow, nil
		}
		at := x.data + rem - n
		c.writeNode(frame[at:at+n], tt, h)
		x.trace.SetRemainingLen((rem - n) / 4)
		return frame, telemetry.Pushed, nil
	}
	// Incremental: insert n bytes after the trace header, keeping the Hop-by-Hop
	// length a multiple of 8 with a trailing 4-byte PadN.
	grow := n
	end := x.hbh + x.hbhLen
	trailingPad := x.opt+2+int(frame[x.opt+1]) == end-4 && frame[end-4] == 1 && frame[end-3] == 2
	if (x.hbhLen+n)%8 != 0 {
		if trailingPad {
			grow -= 4
		} else {
			grow += 4
		}
	}
	optLen := 2 + TraceHeaderSize + x.dataLen + n
	if n > rem || optLen > maxOptionDataLen || c.MTU > 0 && x.l.End-x.l.L3+grow > c.MTU || len(frame)+n+4 > cap(frame) {
		x.trace.SetOverflow()
		return frame, telemetry.Overflow, nil
	}
	frame, _ = telemetry.Open(frame, x.data, n) // capacity checked above
	end += n
	switch {
	case grow < n: // the trailing PadN is no longer needed
		frame = telemetry.Close(frame, end-4, 4)
	case grow > n:
		frame, _ = telemetry.Open(frame, end, 4)
		putPadN(frame[end : end+4])
	}
	c.writeNode(frame[x.data:x.data+n], tt, h)
	frame[x.opt+1] = uint8(optLen)
	frame[x.hbh+1] = uint8((x.hbhLen+grow)/8 - 1)
	Trace(frame[x.opt+optHeadSize:]).SetRemainingLen((rem - n) / 4)
	x.l.AddIPLength(frame, grow)
	return frame, telemetry.Pushed, nil
}

// wholeNodes reports whether b is a sequence of complete nodes' data for Trace-Type
// tt: what a node must find before it adds its own, or the trace it extends could not
// be read afterwards.
func wholeNodes(b []byte, tt uint32, nodeLen int) bool {
	for len(b) > 0 {
		n := 4 * nodeLen
		if tt&TraceOpaque != 0 {
			if len(b) < n+4 {
				return false
			}
			n += 4 + 4*int(b[n]) // the snapshot's length in words leads its header
		}
		if n == 0 || n > len(b) {
			return false
		}
		b = b[n:]
	}
	return true
}

// writeNode encodes one node's data in Trace-Type bit order.
func (c *Codec) writeNode(b []byte, tt uint32, h *telemetry.Hop) {
	p := 0
	put32 := func(v uint32) { binary.BigEndian.PutUint32(b[p:], v); p += 4 }
	put64 := func(v uint64) { binary.BigEndian.PutUint64(b[p:], v); p += 8 }
	for i := range 22 {
		bit := uint32(1) << (23 - i)
		if tt&bit == 0 {
			continue
		}
		switch bit {
		case TraceHopLimNodeID:
			put32(uint32(h.TTL)<<24 | h.SwitchID&0xFFFFFF)
		case TraceIfIDs:
			put32(uint32(telemetry.Saturate(uint64(h.IngressPort), 0xFFFE))<<16 |
				uint32(telemetry.Saturate(uint64(h.PortID), 0xFFFE)))
		case TraceTSSeconds:
			put32(uint32(h.TS / 1e9))
		case TraceTSFraction:
			frac := uint32(h.TS % 1e9)
			if c.FractionMicros {
				frac /= 1e3
			}
			put32(frac)
		case TraceTransitDelay:
			put32(h.HopLatency &^ (1 << 31)) // the top bit flags an overflowed delay
		case TraceNSData:
			put32(uint32(telemetry.Saturate(h.Rate/1e6, 0xFFFFFFFE)))
		case TraceQueueDepth:
			put32(uint32(telemetry.Saturate(h.QLen, 0xFFFFFFFE)))
		case TraceHopLimNodeIDW:
			id := uint64(h.SwitchID)
			if h.Has&telemetry.FieldWideSwitchID != 0 {
				id = h.WideSwitchID & wideNodeIDMask
			}
			put64(uint64(h.TTL)<<56 | id)
		case TraceIfIDsWide:
			put64(uint64(h.IngressPort)<<32 | uint64(h.PortID))
		case TraceNSDataWide:
			put64(h.TxBytes)
		case TraceBufferOcc:
			put32(h.BufferOcc)
		default: // checksum complement (not supplied) and undefined bits 12–21
			put32(0xFFFFFFFF)
		}
	}
	if tt&TraceOpaque != 0 {
		words := (len(h.Opaque) + 3) / 4
		put32(uint32(words)<<24 | c.OpaqueSchema&0xFFFFFF)
		copy(b[p:], h.Opaque)
		clear(b[p+len(h.Opaque) : p+4*words])
	}
}

// wideNodeIDMask covers the 56-bit node ID of the wide format.
const wideNodeIDMask = 1<<56 - 1

// readNode decodes one node's data from b and returns the bytes it used, or −1 when
// b is too short.
func (c *Codec) readNode(b []byte, tt uint32, nodeLen int, h *telemetry.Hop) int {
	*h = telemetry.Hop{}
	if len(b) < 4*nodeLen {
		return -1
	}
	p := 0
	get32 := func() uint32 { v := binary.BigEndian.Uint32(b[p:]); p += 4; return v }
	get64 := func() uint64 { v := binary.BigEndian.Uint64(b[p:]); p += 8; return v }
	// A field whose bits are all ones was not populated (RFC 9197 section 4.4.2): it is
	// left out of Has, and never overrides the same value read from another field (the
	// short and the wide node and interface IDs).
	var sec, frac uint32
	var haveSec, haveFrac bool
	for i := range 22 {
		bit := uint32(1) << (23 - i)
		if tt&bit == 0 {
			continue
		}
		switch bit {
		case TraceHopLimNodeID:
			v := get32()
			h.TTL = uint8(v >> 24)
			h.Has |= telemetry.FieldTTL
			if id := v & 0xFFFFFF; id != 0xFFFFFF {
				h.SwitchID = id
				h.Has |= telemetry.FieldSwitchID
			}
		case TraceIfIDs:
			v := get32()
			h.SetPort(telemetry.FieldIngressPort, v>>16, 0xFFFF)
			h.SetPort(telemetry.FieldEgressPort, v&0xFFFF, 0xFFFF)
		case TraceTSSeconds:
			sec = get32()
			haveSec = sec != 0xFFFFFFFF
		case TraceTSFraction:
			frac = get32()
			haveFrac = frac != 0xFFFFFFFF
		case TraceTransitDelay:
			if v := get32(); v != 0xFFFFFFFF {
				h.HopLatency = v
				h.Has |= telemetry.FieldHopLatency
			}
		case TraceNSData:
			if v := get32(); v != 0xFFFFFFFF {
				h.Rate = uint64(v) * 1e6
				h.Has |= telemetry.FieldRate
			}
		case TraceQueueDepth:
			if v := get32(); v != 0xFFFFFFFF {
				h.QLen = uint64(v)
				h.Has |= telemetry.FieldQLen
			}
		case TraceChecksum:
			if v := get32(); v != 0xFFFFFFFF {
				h.Checksum = v
				h.Has |= telemetry.FieldChecksum
			}
		case TraceHopLimNodeIDW:
			v := get64()
			h.TTL = uint8(v >> 56)
			h.Has |= telemetry.FieldTTL
			if id := v & wideNodeIDMask; id != wideNodeIDMask {
				h.SwitchID, h.WideSwitchID = uint32(id), id
				h.Has |= telemetry.FieldSwitchID | telemetry.FieldWideSwitchID
			}
		case TraceIfIDsWide:
			v := get64()
			h.SetPort(telemetry.FieldIngressPort, uint32(v>>32), 0xFFFFFFFF)
			h.SetPort(telemetry.FieldEgressPort, uint32(v), 0xFFFFFFFF)
		case TraceNSDataWide:
			if v := get64(); v != 0xFFFFFFFFFFFFFFFF {
				h.TxBytes = v
				h.Has |= telemetry.FieldTxBytes
			}
		case TraceBufferOcc:
			if v := get32(); v != 0xFFFFFFFF {
				h.BufferOcc = v
				h.Has |= telemetry.FieldBufferOcc
			}
		default:
			p += 4
		}
	}
	if haveSec || haveFrac {
		h.TS = 0
		if haveSec {
			h.TS = uint64(sec) * 1e9
		}
		if haveFrac {
			f := uint64(frac)
			if c.FractionMicros {
				f *= 1e3
			}
			h.TS += f
		}
		h.Has |= telemetry.FieldTS
	}
	if tt&TraceOpaque != 0 {
		if p+4 > len(b) {
			return -1
		}
		v := get32()
		words := int(v >> 24)
		if p+4*words > len(b) {
			return -1
		}
		h.OpaqueID, h.Opaque = v&0xFFFFFF, b[p:p+4*words]
		h.Has |= telemetry.FieldOpaque
		p += 4 * words
	}
	return p
}

// Decode reads the first IOAM trace option of frame's Hop-by-Hop header into a Header
// and its node data into st, first node first. Any namespace decodes.
func (c *Codec) Decode(frame []byte, st *telemetry.Stack) (Header, error) {
	x, err := find(frame)
	if err != nil {
		return Header{}, err
	}
	t := x.trace
	fl := t.Flags()
	hd := Header{OptionType: frame[x.opt+3], Namespace: t.Namespace(), NodeLen: t.NodeLen(), Flags: fl,
		Overflow: fl&FlagOverflow != 0, RemainingLen: t.RemainingLen(), TraceType: t.Type(), DataLen: x.dataLen}
	st.Format, st.N, st.Truncated = telemetry.FormatIOAM, 0, false
	data := frame[x.data : x.data+x.dataLen]
	if hd.OptionType == PreAllocated {
		data = data[4*hd.RemainingLen:]
	}
	if hd.NodeLen != NodeLen(hd.TraceType) {
		return hd, telemetry.Malformed("NodeLen %d for Trace-Type %#06x (needs %d)", hd.NodeLen, hd.TraceType, NodeLen(hd.TraceType))
	}
	if hd.NodeLen == 0 && hd.TraceType&TraceOpaque == 0 {
		if len(data) != 0 {
			return hd, telemetry.Malformed("%d bytes of node data with NodeLen 0", len(data))
		}
		return hd, nil
	}
	return hd, st.ReadHops(data, "node", func(b []byte, h *telemetry.Hop) int {
		return c.readNode(b, hd.TraceType, hd.NodeLen, h)
	})
}

// Strip removes the Hop-by-Hop header carrying the trace and restores the IPv6 next
// header and payload length. A Hop-by-Hop header that carries options other than
// padding and IOAM is refused (telemetry.ErrUnsupported): removing it would drop them.
func (c *Codec) Strip(frame []byte) ([]byte, error) {
	x, err := find(frame)
	if err != nil {
		return frame, err
	}
	end := x.hbh + x.hbhLen
	for p := x.hbh + 2; p < end; {
		switch t := frame[p]; {
		case t == 0:
			p++
			continue
		case t != 1 && t != OptionType:
			return frame, telemetry.ErrUnsupported
		}
		p += 2 + int(frame[p+1])
	}
	next := frame[x.hbh]
	frame = telemetry.Close(frame, x.hbh, x.hbhLen)
	x.l.AddIPLength(frame, -x.hbhLen)
	x.l.SetProto(frame, next)
	return frame, nil
}

// Payload returns the offset of the header after the Hop-by-Hop header and its
// protocol number, so a decoder can read whatever the IPv6 packet carries.
func Payload(frame []byte) (off int, proto uint8, err error) {
	x, err := find(frame)
	if err != nil {
		return 0, 0, err
	}
	return x.hbh + x.hbhLen, frame[x.hbh], nil
}
