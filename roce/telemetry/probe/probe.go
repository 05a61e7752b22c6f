// Package probe defines the bodies of rocelab's telemetry request and response
// packets: RoCEv2 packets with the manufacturer-specific BTH opcodes
// roce.OpTelemetryRequest (0xC0) and roce.OpTelemetryResponse (0xC1), sent on the
// flow's own IP/UDP header (same addresses, ports and DSCP) so that switches hash
// and queue them as the flow's data and stamp the same telemetry.
//
// The body is the BTH payload; the packet ends with pad and ICRC as any RoCEv2
// packet. The telemetry itself travels in the request's network headers (INT-MD,
// IOAM, IFA or the HPCC block), where switches push it; the response carries hops
// back to the sender in its body, in network byte order.
//
// Request body (16 bytes):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Ver  |Flags|A|                   Reserved                    |
//	|                        Sequence number                        |
//	|                  Send timestamp (ns, 64 bits)                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A (all hops): the sender asks for every hop rather than the most loaded one.
//
// Response body (16 bytes, then Records × 48 bytes):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Ver  |Flags|A|   Path hops   |    Records    |   Reserved    |
//	|                 Sequence number (echoed)                      |
//	|             Send timestamp (echoed, ns, 64 bits)              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	record:
//	|   Hop index   |           Reserved            |  Field mask   |
//	|                         Ingress port                          |
//	|                 Egress timestamp (ns, 64 bits)                |
//	|                 Queue length (bytes, 64 bits)                 |
//	|                 Tx bytes (cumulative, 64 bits)                |
//	|                 Line rate (bit/s, 64 bits)                    |
//	|                          Switch ID                            |
//	|                          Egress port                          |
//
// Path hops is how many hops the request collected; Hop index is a record's position
// on the path (0 = first switch), so a single most-loaded hop keeps its identity.
// Field mask says which of the four HPCC measurements the format supplied: bit 0 ts,
// 1 qlen, 2 tx bytes, 3 rate.
package probe

import (
	"encoding/binary"
	"fmt"

	"github.com/rocelab/rocelab/roce/telemetry"
)

// Sizes and constants.
const (
	Version      = 1
	RequestSize  = 16
	ResponseSize = 16
	RecordSize   = 48
	FlagAllHops  = 0x1
	MaxRecords   = telemetry.MaxHops
)

// Request is a telemetry request body.
type Request struct {
	AllHops bool
	Seq     uint32
	SendTS  uint64
}

// Put writes the request body into b (RequestSize bytes) and returns RequestSize.
func (r *Request) Put(b []byte) int {
	b[0] = Version << 4
	if r.AllHops {
		b[0] |= FlagAllHops
	}
	b[1], b[2], b[3] = 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], r.Seq)
	binary.BigEndian.PutUint64(b[8:], r.SendTS)
	return RequestSize
}

// Parse reads a request body.
func (r *Request) Parse(b []byte) error {
	if len(b) < RequestSize {
		return fmt.Errorf("probe: request body of %d bytes, need %d", len(b), RequestSize)
	}
	if v := b[0] >> 4; v != Version {
		return fmt.Errorf("probe: request version %d", v)
	}
	*r = Request{AllHops: b[0]&FlagAllHops != 0, Seq: binary.BigEndian.Uint32(b[4:]), SendTS: binary.BigEndian.Uint64(b[8:])}
	return nil
}

// Record is one hop of a response.
type Record struct {
	Index uint8 // position on the path, 0 = first switch
	Mask  uint8 // MaskTS | MaskQLen | MaskTxBytes | MaskRate
	Hop   telemetry.Hop
}

// Field mask bits of a Record.
const (
	MaskTS = 1 << iota
	MaskQLen
	MaskTxBytes
	MaskRate
)

// Response is a telemetry response body.
type Response struct {
	AllHops  bool
	PathHops uint8
	Seq      uint32
	SendTS   uint64
	Records  [MaxRecords]Record
	N        int // Records[:N] are valid
}

// Size returns the body length of the response.
func (r *Response) Size() int { return ResponseSize + r.N*RecordSize }

// Put writes the response body into b (Size bytes) and returns its length.
func (r *Response) Put(b []byte) int {
	b[0] = Version << 4
	if r.AllHops {
		b[0] |= FlagAllHops
	}
	b[1], b[2], b[3] = r.PathHops, uint8(r.N), 0
	binary.BigEndian.PutUint32(b[4:], r.Seq)
	binary.BigEndian.PutUint64(b[8:], r.SendTS)
	for i := range r.N {
		putRecord(b[ResponseSize+i*RecordSize:], &r.Records[i])
	}
	return r.Size()
}

func putRecord(b []byte, rec *Record) {
	be := binary.BigEndian
	h := &rec.Hop
	b[0], b[1], b[2], b[3] = rec.Index, 0, 0, rec.Mask
	be.PutUint32(b[4:], h.IngressPort)
	be.PutUint64(b[8:], h.TS)
	be.PutUint64(b[16:], h.QLen)
	be.PutUint64(b[24:], h.TxBytes)
	be.PutUint64(b[32:], h.Rate)
	be.PutUint32(b[40:], h.SwitchID)
	be.PutUint32(b[44:], h.PortID)
}

// Parse reads a response body.
func (r *Response) Parse(b []byte) error {
	if len(b) < ResponseSize {
		return fmt.Errorf("probe: response body of %d bytes, need %d", len(b), ResponseSize)
	}
	if v := b[0] >> 4; v != Version {
		return fmt.Errorf("probe: response version %d", v)
	}
	n := int(b[2])
	if n > MaxRecords || len(b) < ResponseSize+n*RecordSize {
		return fmt.Errorf("probe: %d records in a %d-byte body", n, len(b))
	}
	be := binary.BigEndian
	r.AllHops, r.PathHops, r.N = b[0]&FlagAllHops != 0, b[1], n
	r.Seq, r.SendTS = be.Uint32(b[4:]), be.Uint64(b[8:])
	for i := range n {
		p := b[ResponseSize+i*RecordSize:]
		rec := &r.Records[i]
		*rec = Record{Index: p[0], Mask: p[3]}
		h := &rec.Hop
		h.IngressPort = be.Uint32(p[4:])
		h.TS, h.QLen, h.TxBytes, h.Rate = be.Uint64(p[8:]), be.Uint64(p[16:]), be.Uint64(p[24:]), be.Uint64(p[32:])
		h.SwitchID, h.PortID = be.Uint32(p[40:]), be.Uint32(p[44:])
		h.Has = telemetry.FieldSwitchID | telemetry.FieldEgressPort | telemetry.FieldIngressPort
		for bit, f := range [...]telemetry.Field{telemetry.FieldTS, telemetry.FieldQLen, telemetry.FieldTxBytes, telemetry.FieldRate} {
			if rec.Mask&(1<<bit) != 0 {
				h.Has |= f
			}
		}
	}
	return nil
}

func maskOf(h *telemetry.Hop) uint8 {
	var m uint8
	for bit, f := range [...]telemetry.Field{telemetry.FieldTS, telemetry.FieldQLen, telemetry.FieldTxBytes, telemetry.FieldRate} {
		if h.Has&f != 0 {
			m |= 1 << bit
		}
	}
	return m
}

// Answer fills r as the responder to req whose telemetry decoded into st: every hop
// when the request asks for all hops, else the hop with the highest inflight.
// prev is the previous request's stack of the same flow (nil for the first): the
// inflight of hop j is qlen/(B·baseRTT) + txRate/B (HPCC, eq. 2), and the tx rate
// needs two samples; without one a hop's inflight is its queue term alone.
func (r *Response) Answer(req *Request, st, prev *telemetry.Stack, baseRTT uint64) {
	*r = Response{AllHops: req.AllHops, PathHops: uint8(st.N), Seq: req.Seq, SendTS: req.SendTS}
	if req.AllHops {
		for i, h := range st.HopList() {
			r.Records[i] = Record{Index: uint8(i), Mask: maskOf(&h), Hop: h}
		}
		r.N = st.N
		return
	}
	if st.N == 0 {
		return
	}
	best, bestU := 0, -1.0
	for i := range st.N {
		if u := inflight(&st.Hops[i], prev, i, baseRTT); u > bestU {
			best, bestU = i, u
		}
	}
	h := st.Hops[best]
	r.Records[0] = Record{Index: uint8(best), Mask: maskOf(&h), Hop: h}
	r.N = 1
}

// inflight is HPCC's normalized inflight bytes of hop i: queue over the bandwidth-delay
// product plus the tx rate over the line rate.
func inflight(h *telemetry.Hop, prev *telemetry.Stack, i int, baseRTT uint64) float64 {
	if h.Rate == 0 {
		return 0
	}
	bps := float64(h.Rate) / 8 // bytes per second
	u := 0.0
	if baseRTT > 0 {
		u = float64(h.QLen) / (bps * float64(baseRTT) / 1e9)
	}
	if prev != nil && i < prev.N {
		p := &prev.Hops[i]
		if dt := h.TS - p.TS; h.TS > p.TS && h.TxBytes >= p.TxBytes {
			u += float64(h.TxBytes-p.TxBytes) / (bps * float64(dt) / 1e9)
		}
	}
	return u
}
