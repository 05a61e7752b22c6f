// Package ifa implements Inband Flow Analyzer 2.0 (draft-kumar-ippm-ifa): an IFA header
// between the IP header and the L4 header, signalled by an IP protocol number (253 by
// default, configurable), and a metadata header plus a stack of 32-byte hop records
// after the L4 (UDP) header.
//
// IFA header (4 bytes, after IP; the IP protocol becomes the IFA protocol number):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Ver  |  GNS  |  Next Header  |R|R|R|M|T|I|T|C|  Max Length   |
//	|       |       |               | | | |F|S| |A| |               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Metadata header (4 bytes, after the UDP header), then the stack, newest hop first:
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Request Vector| Action Vector |   Hop Limit   | Current Length|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Hop record (32 bytes):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  LNS  |            Device ID                  |    IP TTL     |
//	| Speed |Cng|  Queue ID |       Rx Timestamp seconds (20)       |
//	|         Egress Port           |         Ingress Port          |
//	|                 Rx Timestamp nanoseconds                      |
//	|                   Residence time (ns)                         |
//	|                        Opaque 0                               |
//	|                        Opaque 1                               |
//	|                        Opaque 2                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Max Length and Current Length count 4-byte words of the metadata stack. A node
// whose record would take Current Length past Max Length (or the packet past the
// MTU) sets MF and forwards; one that finds Hop Limit 0 adds nothing; otherwise it
// decrements Hop Limit. rocelab updates the UDP length with the metadata (it sits in
// the UDP payload), and Strip restores it.
//
// rocelab's HPCC profile of the opaque words: 0 = egress cumulative tx bytes modulo
// 2^32, 1 = queue depth in bytes, 2 = line rate in Mb/s (the port-speed code is too
// coarse for B).
package ifa

import (
	"encoding/binary"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Constants of the format.
const (
	HeaderSize   = 4
	MDHeaderSize = 4
	HopSize      = 32
	Version      = 2

	// DefaultProtocol is the IP protocol number rocelab uses for IFA (253 is
	// reserved for experimentation, RFC 3692).
	DefaultProtocol = 253

	FlagMF = 0x10 // metadata fragment: a node could not add its record
	FlagTS = 0x08 // tail stamp
	FlagI  = 0x04 // inband
	FlagTA = 0x02 // turn around
	FlagC  = 0x01 // checksum
)

// PortSpeeds maps the 4-bit port speed code to bit/s.
var PortSpeeds = [16]uint64{10e9, 25e9, 40e9, 50e9, 100e9, 200e9, 400e9}

// SpeedCode returns the port speed code of a line rate (15 when it has none).
func SpeedCode(bps uint64) uint8 {
	for i, s := range PortSpeeds {
		if s != 0 && s == bps {
			return uint8(i)
		}
	}
	return 15
}

// Header holds the decoded IFA header and metadata header.
type Header struct {
	Version       uint8
	GNS           uint8
	NextHeader    uint8
	Flags         uint8
	MaxLength     int // words
	RequestVector uint8
	ActionVector  uint8
	HopLimit      uint8
	CurrentLength int // words
}

// Codec adds, stamps, decodes and strips IFA. Use New and adjust the fields.
type Codec struct {
	// Protocol is the IP protocol number that signals IFA.
	Protocol uint8
	// GNS, MaxLength (words), HopLimit, RequestVector and ActionVector are what an
	// initiator writes.
	GNS                         uint8
	MaxLength                   uint8
	HopLimit                    uint8
	RequestVector, ActionVector uint8
	// LNS is the local namespace a transit node writes in its records.
	LNS uint8
	// MTU bounds the IP packet a push may produce; 0 = buffer only.
	MTU int
}

// Signal is IFA's mark: its IP protocol.
func (c *Codec) Signal() telemetry.Signal {
	return telemetry.Signal{By: telemetry.SignalProtocol, Value: c.Protocol}
}

// New returns a codec on protocol 253 with room for 8 hops (Max Length 64 words) and
// Hop Limit 8.
func New() *Codec {
	return &Codec{Protocol: DefaultProtocol, GNS: 0xF, MaxLength: 8 * HopSize / 4, HopLimit: 8}
}

type located struct {
	l     roce.Layout
	ifa   int // IFA header offset
	udp   int
	md    int // metadata header offset
	stack int // bytes of stack
}

// find locates frame and finds the headers in it.
func (c *Codec) find(frame []byte) (located, error) { return telemetry.Find(frame, c.findIn) }

// findIn is find in a frame whose headers l locates.
func (c *Codec) findIn(frame []byte, l roce.Layout) (located, error) {
	var x located
	x.l = l
	if l.Proto != c.Protocol {
		return x, telemetry.ErrNoTelemetry
	}
	x.ifa, x.udp = l.L4, l.L4+HeaderSize
	x.md = x.udp + roce.UDPSize
	if x.md+MDHeaderSize > l.End {
		return x, telemetry.Malformed("IFA headers cut off: %d bytes after IP", l.End-l.L4)
	}
	if v := frame[x.ifa] >> 4; v != Version {
		return x, telemetry.Malformed("IFA version %d", v)
	}
	if frame[x.ifa+1] != telemetry.ProtoUDP {
		return x, telemetry.ErrUnsupported
	}
	x.stack = 4 * int(frame[x.md+3])
	if x.md+MDHeaderSize+x.stack > l.End || x.stack%HopSize != 0 {
		return x, telemetry.Malformed("IFA current length %d words in %d bytes", x.stack/4, l.End-x.md-MDHeaderSize)
	}
	if x.udp+roce.UDP(frame[x.udp:]).Length() != l.End {
		return x, telemetry.Malformed("UDP length %d, IP leaves %d", roce.UDP(frame[x.udp:]).Length(), l.End-x.udp)
	}
	return x, nil
}

// Request makes the packet an IFA packet: the IFA header goes between the IP and UDP
// headers (the IP protocol moves into its Next Header), the metadata header after the
// UDP header.
func (c *Codec) Request(frame []byte) ([]byte, error) {
	return c.RequestWith(frame, telemetry.Open, telemetry.Close)
}

// RequestWith is Request opening its gaps with open (telemetry.InPlace); close
// closes them again if the request cannot be completed.
func (c *Codec) RequestWith(frame []byte, open telemetry.Opener, close telemetry.Closer) ([]byte, error) {
	l, err := telemetry.Locate(frame)
	if err != nil {
		return frame, err
	}
	if l.Proto == c.Protocol {
		return frame, telemetry.ErrAlreadyPresent
	}
	if l.Proto != telemetry.ProtoUDP || !l.UDPAt(frame, l.L4) {
		return frame, telemetry.ErrUnsupported
	}
	md := l.L4 + roce.UDPSize
	if frame, err = open(frame, md, MDHeaderSize); err != nil {
		return frame, err
	}
	if frame, err = open(frame, l.L4, HeaderSize); err != nil {
		return close(frame, md, MDHeaderSize), err
	}
	h := frame[l.L4 : l.L4+HeaderSize]
	h[0], h[1], h[2], h[3] = Version<<4|c.GNS&0xF, l.Proto, 0, c.MaxLength
	m := frame[md+HeaderSize : md+HeaderSize+MDHeaderSize]
	m[0], m[1], m[2], m[3] = c.RequestVector, c.ActionVector, c.HopLimit, 0
	telemetry.AddUDPLength(frame, l.L4+HeaderSize, MDHeaderSize)
	l.AddIPLength(frame, HeaderSize+MDHeaderSize)
	l.SetProto(frame, c.Protocol)
	return frame, nil
}

// Push acts as an IFA transit node: Hop Limit 0 adds nothing; a record that would pass
// Max Length or the MTU sets MF; otherwise the record goes on top of the stack,
// Current Length grows by 8 words and Hop Limit drops by one.
func (c *Codec) Push(frame []byte, h *telemetry.Hop) ([]byte, telemetry.Status, error) {
	return telemetry.Push(frame, h, c.findIn, c.push)
}

// PushWith is Push in a frame whose headers l locates, taking the hop's TTL from the
// frame and opening the record's gap with open (telemetry.InPlace).
func (c *Codec) PushWith(frame []byte, l roce.Layout, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	return telemetry.PushWith(frame, l, h, open, c.findIn, c.push)
}

// push is Push of the IFA headers x locates, with open opening the gap.
func (c *Codec) push(frame []byte, x located, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	var err error
	m := frame[x.md : x.md+MDHeaderSize]
	if m[2] == 0 {
		return frame, telemetry.HopLimitReached, nil
	}
	if x.stack+HopSize > 4*int(frame[x.ifa+3]) || x.stack+HopSize > 255*4 {
		frame[x.ifa+2] |= FlagMF
		return frame, telemetry.MaxLengthReached, nil
	}
	if c.MTU > 0 && x.l.End-x.l.L3+HopSize > c.MTU || len(frame)+HopSize > cap(frame) {
		frame[x.ifa+2] |= FlagMF
		return frame, telemetry.MTUExceeded, nil
	}
	at := x.md + MDHeaderSize
	if frame, err = open(frame, at, HopSize); err != nil {
		return frame, 0, err // the check above left room: only an opener that ignores it fails
	}
	c.writeHop(frame[at:at+HopSize], h)
	m = frame[x.md : x.md+MDHeaderSize] // open may have moved the headers
	m[2]--
	m[3] += HopSize / 4
	telemetry.AddUDPLength(frame, x.udp, HopSize)
	x.l.AddIPLength(frame, HopSize)
	return frame, telemetry.Pushed, nil
}

func (c *Codec) writeHop(b []byte, h *telemetry.Hop) {
	rx := h.IngressTS
	if rx == 0 || rx > h.TS {
		rx = h.TS // no separate ingress time: residence 0
	}
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(c.LNS&0xF)<<28|(h.SwitchID&0xFFFFF)<<8|uint32(h.TTL))
	be.PutUint32(b[4:], uint32(SpeedCode(h.Rate))<<28|uint32(h.Congestion&3)<<26|
		uint32(h.QueueID&0x3F)<<20|uint32(rx/1e9)&0xFFFFF)
	be.PutUint32(b[8:], uint32(telemetry.Saturate(uint64(h.PortID), 0xFFFE))<<16|
		uint32(telemetry.Saturate(uint64(h.IngressPort), 0xFFFE)))
	be.PutUint32(b[12:], uint32(rx%1e9))
	be.PutUint32(b[16:], uint32(telemetry.Saturate(h.TS-rx, 0xFFFFFFFE)))
	be.PutUint32(b[20:], uint32(h.TxBytes))
	be.PutUint32(b[24:], uint32(telemetry.Saturate(h.QLen, 0xFFFFFFFE)))
	be.PutUint32(b[28:], uint32(telemetry.Saturate(h.Rate/1e6, 0xFFFFFFFE)))
}

// readHop decodes one hop's metadata from b.
func readHop(b []byte, h *telemetry.Hop) {
	be := binary.BigEndian
	w0, w1, w2 := be.Uint32(b[0:]), be.Uint32(b[4:]), be.Uint32(b[8:])
	*h = telemetry.Hop{}
	h.LNS, h.SwitchID, h.TTL = uint8(w0>>28), w0>>8&0xFFFFF, uint8(w0)
	h.PortSpeed, h.Congestion, h.QueueID = uint8(w1>>28), uint8(w1>>26&3), uint8(w1>>20&0x3F)
	h.PortID, h.IngressPort = w2>>16, w2&0xFFFF
	h.IngressTS = uint64(w1&0xFFFFF)*1e9 + uint64(be.Uint32(b[12:]))
	h.HopLatency = be.Uint32(b[16:])
	h.TS = h.IngressTS + uint64(h.HopLatency)
	h.TxBytes = uint64(be.Uint32(b[20:]))
	h.QLen = uint64(be.Uint32(b[24:]))
	h.Rate = uint64(be.Uint32(b[28:])) * 1e6
	h.Has = telemetry.FieldLNS | telemetry.FieldSwitchID | telemetry.FieldTTL | telemetry.FieldPortSpeed |
		telemetry.FieldCongestion | telemetry.FieldQueueID | telemetry.FieldEgressPort | telemetry.FieldIngressPort |
		telemetry.FieldIngressTS | telemetry.FieldHopLatency | telemetry.FieldTS | telemetry.FieldTxBytes |
		telemetry.FieldQLen | telemetry.FieldRate
}

// TxBytesWrap is the modulus of the tx bytes the profile carries (opaque word 0).
const TxBytesWrap = 1 << 32

// Decode reads the IFA headers and the stack, first hop first.
func (c *Codec) Decode(frame []byte, st *telemetry.Stack) (Header, error) {
	x, err := c.find(frame)
	if err != nil {
		return Header{}, err
	}
	f, m := frame[x.ifa:], frame[x.md:]
	hd := Header{Version: f[0] >> 4, GNS: f[0] & 0xF, NextHeader: f[1], Flags: f[2], MaxLength: int(f[3]),
		RequestVector: m[0], ActionVector: m[1], HopLimit: m[2], CurrentLength: int(m[3])}
	st.Format, st.N, st.Truncated = telemetry.FormatIFA, 0, false
	stack := frame[x.md+MDHeaderSize : x.md+MDHeaderSize+x.stack]
	return hd, st.ReadHops(stack, "hop", telemetry.FixedHop(HopSize, readHop))
}

// Strip removes the IFA header, the metadata header and the stack, and restores the
// IP protocol and the IP and UDP lengths.
func (c *Codec) Strip(frame []byte) ([]byte, error) {
	return c.StripWith(frame, telemetry.Close)
}

// StripWith is Strip closing the gaps with close (telemetry.InPlace).
func (c *Codec) StripWith(frame []byte, close telemetry.Closer) ([]byte, error) {
	x, err := c.find(frame)
	if err != nil {
		return frame, err
	}
	next := frame[x.ifa+1]
	frame = close(frame, x.md, MDHeaderSize+x.stack)
	frame = close(frame, x.ifa, HeaderSize)
	telemetry.AddUDPLength(frame, x.ifa, -(MDHeaderSize + x.stack))
	x.l.AddIPLength(frame, -(HeaderSize + MDHeaderSize + x.stack))
	x.l.SetProto(frame, next)
	return frame, nil
}
