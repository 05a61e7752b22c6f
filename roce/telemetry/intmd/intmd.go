// Package intmd implements P4.org In-band Network Telemetry v2.1 over UDP: the INT-MD
// (eMbed Data) mode, where each transit node pushes its metadata onto a stack in the
// packet, and the INT-MX (eXport) mode, where the packet carries instructions only.
//
// The INT headers follow the UDP header; a configurable DSCP value marks packets that
// carry them, and the shim keeps the original DSCP (NPT 0) so the sink restores it.
//
// Shim (4 bytes):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Type  |NPT| R |    Length     |   Reserved    |   DSCP    | R |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Type 1 = INT-MD, 3 = INT-MX; Length counts the 4-byte words after the shim.
//
// INT-MD metadata header (12 bytes), then the stack, newest hop first:
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Ver  |D|E|M|      Reserved         | Hop ML  | Remaining Hops|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      Instruction Bitmap       |      Domain Specific ID       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        DS Instruction         |           DS Flags            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              hop N metadata (Hop ML words) ...                |
//
// INT-MX header (12 bytes): Ver 4 | D 1 | Reserved 27 | Instruction Bitmap 16 |
// Domain Specific ID 16 | DS Instruction 16 | DS Flags 16; no stack follows.
//
// Per-hop metadata is written in instruction-bit order (bit 0 is the bitmap's most
// significant bit), then the domain-specific metadata in DS-instruction-bit order.
// A value a node cannot supply is all ones. Remaining Hop Count 0 makes a node set E
// instead of pushing; a stack that would exceed the MTU makes it set M.
//
// rocelab's HPCC domain (Domain Specific ID DomainHPCC) adds two DS instructions:
// bit 0, the egress port's cumulative transmitted bytes (64 bits), and bit 1, its line
// rate in Mb/s (32 bits): the two HPCC inputs INT v2.1 has no standard field for.
//
// Source: In-band Network Telemetry (INT) Dataplane Specification v2.1, P4.org
// Applications Working Group, 2020-11-11, sections 5.3–5.8.
package intmd

import (
	"encoding/binary"
	"math/bits"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Header sizes and constants.
const (
	ShimSize     = 4
	MDHeaderSize = 12
	MXHeaderSize = 12
	Version      = 2

	TypeMD = 1
	TypeMX = 3

	// DefaultDSCP is the INT specification's example DSCP value for INT over UDP.
	DefaultDSCP = 0x17
	// DomainHPCC is rocelab's Domain Specific ID ("HP").
	DomainHPCC = 0x4850
)

// Instruction bitmap bits; bit 0 of the specification is the most significant bit.
const (
	InstNodeID     uint16 = 1 << (15 - iota) // node ID, 32
	InstL1Ports                              // L1 ingress 16 + egress 16
	InstHopLatency                           // hop latency, 32
	InstQueue                                // queue ID 8 + occupancy 24
	InstIngressTS                            // ingress timestamp, 64
	InstEgressTS                             // egress timestamp, 64
	InstL2Ports                              // L2 ingress 32 + egress 32
	InstTxUtil                               // egress Tx utilization, 32
	InstBuffer                               // buffer ID 8 + occupancy 24
	InstReserved9
	InstReserved10
	InstReserved11
	InstReserved12
	InstReserved13
	InstReserved14
	InstChecksum // checksum complement, 32
)

// DS instruction bits of DomainHPCC.
const (
	DSTxBytes  uint16 = 1 << 15 // cumulative tx bytes, 64
	DSLineRate uint16 = 1 << 14 // line rate in Mb/s, 32
)

// wideInsts are the instructions whose metadata is two words; every other bit,
// reserved bits 9–14 included, is one word (a node fills a reserved word with all
// ones: the value of data it cannot supply).
const wideInsts = InstIngressTS | InstEgressTS | InstL2Ports

// HopWords returns the metadata words one hop adds for an instruction bitmap and,
// when domain is DomainHPCC, its DS instructions.
func HopWords(bitmap uint16, domain, dsInst uint16) int {
	n := bits.OnesCount16(bitmap) + bits.OnesCount16(bitmap&wideInsts)
	if domain == DomainHPCC {
		if dsInst&DSTxBytes != 0 {
			n += 2
		}
		if dsInst&DSLineRate != 0 {
			n++
		}
	}
	return n
}

// Shim is a view of the INT shim header.
type Shim []byte

// Offsets of the shim's fields.
const (
	shimTypeNPT  = 0 // type (4 bits), NPT (2 bits)
	shimLength   = 1 // length of the shim, header and stack in 4-byte words
	shimOrigDSCP = 3 // the original DSCP (top 6 bits)
)

// Type returns the INT type: TypeMD or TypeMX.
func (s Shim) Type() uint8 { return s[shimTypeNPT] >> 4 }

// NPT returns the next-protocol type (how the original header is recorded).
func (s Shim) NPT() uint8 { return s[shimTypeNPT] >> 2 & 3 }

// Length returns the INT length in 4-byte words: shim, header and metadata stack.
func (s Shim) Length() int { return int(s[shimLength]) }

// OrigDSCP returns the DSCP the packet had before INT was requested.
func (s Shim) OrigDSCP() uint8 { return s[shimOrigDSCP] >> 2 }

// SetLength sets the INT length in words.
func (s Shim) SetLength(words int) { s[shimLength] = uint8(words) }

// MD is a view of the INT-MD metadata header.
type MD []byte

// Offsets and bits of the metadata header's fields.
const (
	mdVersionFlags   = 0 // version (4 bits), D, E, M
	mdHopML          = 2 // hop metadata length in words (low 5 bits)
	mdRemainingHops  = 3
	mdInstructions   = 4  // instruction bitmap (16 bits)
	mdDomainID       = 6  // domain-specific ID (16 bits)
	mdDSInstructions = 8  // domain-specific instructions (16 bits)
	mdDSFlags        = 10 // domain-specific flags (16 bits)
	mdDBit           = 0x08
	mdEBit           = 0x04
	mdMBit           = 0x02
)

// Version returns the INT-MD header version.
func (h MD) Version() uint8 { return h[mdVersionFlags] >> 4 }

// D returns the discard bit: the sink drops the packet after reading it.
func (h MD) D() bool { return h[mdVersionFlags]&mdDBit != 0 }

// E returns the exceeded bit: a node found Remaining Hop Count 0.
func (h MD) E() bool { return h[mdVersionFlags]&mdEBit != 0 }

// M returns the MTU-exceeded bit: a node could not add its metadata.
func (h MD) M() bool { return h[mdVersionFlags]&mdMBit != 0 }

// HopML returns the words of metadata each hop adds.
func (h MD) HopML() int { return int(h[mdHopML] & 0x1F) }

// RemainingHops returns how many more nodes may add metadata.
func (h MD) RemainingHops() uint8 { return h[mdRemainingHops] }

// Instructions returns the instruction bitmap: what each hop records.
func (h MD) Instructions() uint16 { return binary.BigEndian.Uint16(h[mdInstructions:]) }

// DomainID returns the domain-specific ID (DomainHPCC for rocelab's extension).
func (h MD) DomainID() uint16 { return binary.BigEndian.Uint16(h[mdDomainID:]) }

// DSInstructions returns the domain-specific instructions.
func (h MD) DSInstructions() uint16 { return binary.BigEndian.Uint16(h[mdDSInstructions:]) }

// DSFlags returns the domain-specific flags.
func (h MD) DSFlags() uint16 { return binary.BigEndian.Uint16(h[mdDSFlags:]) }

// SetE sets the exceeded bit.
func (h MD) SetE() { h[mdVersionFlags] |= mdEBit }

// SetM sets the MTU-exceeded bit.
func (h MD) SetM() { h[mdVersionFlags] |= mdMBit }

// SetRemainingHops sets the remaining hop count.
func (h MD) SetRemainingHops(n uint8) { h[mdRemainingHops] = n }

// Header holds the decoded shim and INT header fields.
type Header struct {
	Type           uint8 // TypeMD or TypeMX
	NPT            uint8
	Length         int // shim Length: words after the shim
	OrigDSCP       uint8
	Version        uint8
	D, E, M        bool  // M and E are INT-MD only
	HopML          int   // words per hop (INT-MD)
	RemainingHops  uint8 // INT-MD
	Instructions   uint16
	DomainID       uint16
	DSInstructions uint16
	DSFlags        uint16
}

// Codec adds, stamps, decodes and strips INT over UDP. Configure it with New and
// adjust the fields; it is read-only afterwards and safe to share.
type Codec struct {
	// DSCP marks packets carrying INT.
	DSCP uint8
	// MX selects INT-MX (instructions only) instead of INT-MD.
	MX bool
	// Instructions is the bitmap a source requests.
	Instructions uint16
	// DomainID and DSInstructions are the domain-specific instructions a source
	// requests; DomainHPCC with DSTxBytes|DSLineRate completes the HPCC profile.
	DomainID, DSInstructions uint16
	// MaxHops is the Remaining Hop Count a source sets.
	MaxHops uint8
	// MTU is the largest IP packet (header included) a node may produce by pushing; 0
	// means only the frame buffer's capacity limits it.
	MTU int
}

// Signal is INT-MD's mark: its DSCP on a UDP packet.
func (c *Codec) Signal() telemetry.Signal {
	return telemetry.Signal{By: telemetry.SignalDSCP, Value: c.DSCP}
}

// HPCCInstructions is the instruction bitmap of rocelab's HPCC profile: node ID, L1
// ports, hop latency, queue occupancy, ingress and egress timestamps, egress Tx
// utilization.
const HPCCInstructions = InstNodeID | InstL1Ports | InstHopLatency | InstQueue |
	InstIngressTS | InstEgressTS | InstTxUtil

// New returns an INT-MD codec with the HPCC profile: DefaultDSCP, HPCCInstructions,
// the HPCC domain's tx bytes and line rate, 8 hops, no MTU limit.
func New() *Codec {
	return &Codec{DSCP: DefaultDSCP, Instructions: HPCCInstructions, DomainID: DomainHPCC,
		DSInstructions: DSTxBytes | DSLineRate, MaxHops: 8}
}

// Format returns "int-md" or "int-mx".
func (c *Codec) Format() telemetry.Format {
	if c.MX {
		return telemetry.FormatINTMX
	}
	return telemetry.FormatINTMD
}

type located struct {
	l    roce.Layout
	off  int // shim offset
	shim Shim
	hdr  []byte // MD or MX header
	size int    // shim + Length words
}

func (c *Codec) find(frame []byte) (located, error) { return telemetry.Find(frame, c.findIn) }

// findIn is find in a frame whose headers l locates.
func (c *Codec) findIn(frame []byte, l roce.Layout) (located, error) {
	var x located
	x.l = l
	if l.Proto != telemetry.ProtoUDP || l.DSCP(frame) != c.DSCP || !l.UDPAt(frame, l.L4) {
		return x, telemetry.ErrNoTelemetry
	}
	x.off = l.L4 + roce.UDPSize
	return x, x.read(frame, l.End)
}

// read reads the INT headers at x.off in frame, whose IP packet ends at end, into x,
// and checks them.
func (x *located) read(frame []byte, end int) error {
	if x.off+ShimSize+MDHeaderSize > end {
		return telemetry.Malformed("INT headers cut off: %d bytes after UDP", end-x.off)
	}
	x.shim = Shim(frame[x.off:])
	if t := x.shim.Type(); t != TypeMD && t != TypeMX {
		return telemetry.Malformed("INT shim type %d", t)
	}
	x.size = ShimSize + 4*x.shim.Length()
	if x.size < ShimSize+MDHeaderSize || x.off+x.size > end {
		return telemetry.Malformed("INT shim length %d words in %d bytes", x.shim.Length(), end-x.off)
	}
	x.hdr = frame[x.off+ShimSize : x.off+ShimSize+MDHeaderSize]
	if v := x.hdr[0] >> 4; v != Version {
		return telemetry.Malformed("INT version %d", v)
	}
	if x.shim.Type() == TypeMX && x.size != ShimSize+MXHeaderSize {
		return telemetry.Malformed("INT-MX with %d bytes of stack", x.size-ShimSize-MXHeaderSize)
	}
	if x.shim.Type() == TypeMD {
		md := MD(x.hdr)
		ml := md.HopML()
		if stack := x.size - ShimSize - MDHeaderSize; ml == 0 && stack != 0 || ml != 0 && stack%(4*ml) != 0 {
			return telemetry.Malformed("INT-MD stack of %d bytes with Hop ML %d", stack, ml)
		}
		// A hop is Hop ML words and holds what the instructions ask for: a header
		// whose instructions need more (Hop ML 0 with any instruction bit, say) can be
		// neither stamped nor read, whoever sent it.
		if need := HopWords(md.Instructions(), md.DomainID(), md.DSInstructions()); need > ml {
			return telemetry.Malformed("INT-MD instructions need %d words per hop, Hop ML is %d", need, ml)
		}
	}
	return nil
}

// block reads a detached block (telemetry.Detacher): the INT headers and stack, the
// whole of blk.
func block(blk []byte) (located, error) {
	var x located
	if err := x.read(blk, len(blk)); err != nil {
		return x, err
	}
	if x.size != len(blk) {
		return x, telemetry.Malformed("INT shim length %d words in a block of %d bytes", x.shim.Length(), len(blk))
	}
	return x, nil
}

// Request inserts the shim and an INT-MD (or INT-MX) header with an empty stack after
// the UDP header, keeps the original DSCP in the shim and marks the packet with
// c.DSCP.
func (c *Codec) Request(frame []byte) ([]byte, error) {
	return c.RequestWith(frame, telemetry.Open, telemetry.Close)
}

// RequestWith is Request opening its gap with open (telemetry.InPlace); the gap is
// opened last, so nothing is ever closed again.
func (c *Codec) RequestWith(frame []byte, open telemetry.Opener, _ telemetry.Closer) ([]byte, error) {
	l, err := telemetry.Locate(frame)
	if err != nil {
		return frame, err
	}
	if l.Proto != telemetry.ProtoUDP || !l.UDPAt(frame, l.L4) {
		return frame, telemetry.ErrUnsupported
	}
	if _, err := c.findIn(frame, l); err == nil {
		return frame, telemetry.ErrAlreadyPresent
	}
	ml := HopWords(c.Instructions, c.DomainID, c.DSInstructions)
	if !c.MX && (ml == 0 || ml > 31) {
		return frame, telemetry.Malformed("instructions need %d words per hop, Hop ML holds 1 to 31", ml)
	}
	const n = ShimSize + MDHeaderSize
	off := l.L4 + roce.UDPSize
	if frame, err = open(frame, off, n); err != nil {
		return frame, err
	}
	c.writeHeaders(frame[off:off+n], l.DSCP(frame), ml)
	telemetry.AddUDPLength(frame, l.L4, n)
	l.AddIPLength(frame, n)
	l.SetDSCP(frame, c.DSCP)
	return frame, nil
}

// writeHeaders writes the shim, keeping dscp, and the INT-MD (or INT-MX) header of an
// empty stack of hops of ml words into b.
func (c *Codec) writeHeaders(b []byte, dscp uint8, ml int) {
	clear(b)
	typ := uint8(TypeMD)
	if c.MX {
		typ = TypeMX
	}
	b[0] = typ << 4 // NPT 0: the shim carries the original DSCP
	b[1] = MDHeaderSize / 4
	b[3] = dscp << 2
	h := b[ShimSize:]
	h[0] = Version << 4
	if !c.MX {
		h[2] = uint8(ml)
		h[3] = c.MaxHops
	}
	binary.BigEndian.PutUint16(h[4:], c.Instructions)
	binary.BigEndian.PutUint16(h[6:], c.DomainID)
	binary.BigEndian.PutUint16(h[8:], c.DSInstructions)
}

// RequestDetached writes the shim and the INT header of an empty stack into blk[:0],
// keeps the original DSCP in the shim and marks the packet with c.DSCP
// (telemetry.Detacher).
func (c *Codec) RequestDetached(frame []byte, l roce.Layout, blk []byte) ([]byte, error) {
	if l.Proto != telemetry.ProtoUDP || !l.UDPAt(frame, l.L4) {
		return blk, telemetry.ErrUnsupported
	}
	if _, err := c.findIn(frame, l); err == nil || len(blk) > 0 {
		return blk, telemetry.ErrAlreadyPresent
	}
	ml := HopWords(c.Instructions, c.DomainID, c.DSInstructions)
	if !c.MX && (ml == 0 || ml > 31) {
		return blk, telemetry.Malformed("instructions need %d words per hop, Hop ML holds 1 to 31", ml)
	}
	const n = ShimSize + MDHeaderSize
	if cap(blk) < n {
		return blk, telemetry.Malformed("no room for the %d bytes of INT headers", n)
	}
	blk = blk[:n]
	c.writeHeaders(blk, l.DSCP(frame), ml)
	l.SetDSCP(frame, c.DSCP)
	return blk, nil
}

// PushDetached is Push into block blk, the hop growing it into its capacity, which
// counts as the frame buffer's room does for Push (telemetry.Detacher).
func (c *Codec) PushDetached(blk []byte, h *telemetry.Hop, ipLen int) ([]byte, telemetry.Status, error) {
	x, err := block(blk)
	if err != nil {
		return blk, 0, err
	}
	n, st, err := c.admit(&x, ipLen, cap(blk)-len(blk))
	if err != nil || st != telemetry.Pushed {
		return blk, st, err
	}
	md := MD(x.hdr)
	const at = ShimSize + MDHeaderSize
	words := x.shim.Length()
	blk = blk[:len(blk)+n]
	copy(blk[at+n:], blk[at:len(blk)-n])
	writeHop(blk[at:at+n], md.Instructions(), md.DomainID(), md.DSInstructions(), h)
	md.SetRemainingHops(md.RemainingHops() - 1)
	Shim(blk).SetLength(words + n/4)
	return blk, telemetry.Pushed, nil
}

// DecodeDetached is Decode of block blk (telemetry.Detacher).
func (c *Codec) DecodeDetached(blk []byte, st *telemetry.Stack) error {
	x, err := block(blk)
	if err != nil {
		return err
	}
	_, err = decodeLocated(blk, &x, st)
	return err
}

// StripDetached restores the DSCP block blk keeps in frame (telemetry.Detacher).
func (c *Codec) StripDetached(frame []byte, l roce.Layout, blk []byte) error {
	x, err := block(blk)
	if err != nil {
		return err
	}
	l.SetDSCP(frame, x.shim.OrigDSCP())
	return nil
}

// Push acts as an INT transit node: with Remaining Hop Count 0 it sets E; when the
// hop would take the IP packet past c.MTU (or the frame past its buffer) it sets M;
// otherwise it inserts the hop's metadata at the top of the stack, as the packet's own
// instruction bitmap asks, and decrements Remaining Hop Count. INT-MX packets are left
// unchanged (telemetry.NotStacked).
func (c *Codec) Push(frame []byte, h *telemetry.Hop) ([]byte, telemetry.Status, error) {
	return telemetry.Push(frame, h, c.findIn, c.push)
}

// PushWith is Push in a frame whose headers l locates, taking the hop's TTL from the
// frame and opening the hop's gap with open (telemetry.InPlace).
func (c *Codec) PushWith(frame []byte, l roce.Layout, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	return telemetry.PushWith(frame, l, h, open, c.findIn, c.push)
}

// admit applies INT's limits to a hop about to go into the headers x locates, in an
// IP packet of ipLen bytes with free bytes of room after it: an INT-MX packet takes
// no hop (NotStacked), Remaining Hop Count 0 sets E (HopCountExceeded), and a hop past
// the stack's 255 words, c.MTU or the room sets M (MTUExceeded). Otherwise it returns
// the hop's size in bytes and Pushed.
func (c *Codec) admit(x *located, ipLen, free int) (int, telemetry.Status, error) {
	if x.shim.Type() == TypeMX {
		return 0, telemetry.NotStacked, nil
	}
	md := MD(x.hdr)
	if md.RemainingHops() == 0 {
		md.SetE()
		return 0, telemetry.HopCountExceeded, nil
	}
	n := 4 * md.HopML()
	if n == 0 {
		return 0, 0, telemetry.Malformed("INT-MD Hop ML 0: a hop has nothing to record")
	}
	if 4*x.shim.Length()+n > 255*4 || c.MTU > 0 && ipLen+n > c.MTU || n > free {
		md.SetM()
		return 0, telemetry.MTUExceeded, nil
	}
	return n, telemetry.Pushed, nil
}

// push is Push of the INT headers x locates, with open opening the gap.
func (c *Codec) push(frame []byte, x located, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	n, st, err := c.admit(&x, x.l.End-x.l.L3, cap(frame)-len(frame))
	if err != nil || st != telemetry.Pushed {
		return frame, st, err
	}
	at, words := x.off+ShimSize+MDHeaderSize, x.shim.Length()
	if frame, err = open(frame, at, n); err != nil {
		return frame, 0, err // the check above left room: only an opener that ignores it fails
	}
	md := MD(frame[x.off+ShimSize:]) // open may have moved the headers
	writeHop(frame[at:at+n], md.Instructions(), md.DomainID(), md.DSInstructions(), h)
	md.SetRemainingHops(md.RemainingHops() - 1)
	Shim(frame[x.off:]).SetLength(words + n/4)
	telemetry.AddUDPLength(frame, x.l.L4, n)
	x.l.AddIPLength(frame, n)
	return frame, telemetry.Pushed, nil
}

// PushHops pushes hops, first switch first, as Push called on each in turn would,
// and returns the first error it would return (telemetry.HopsPusher): a NIC echoing a
// request's hops back in an ACK. When every hop fits it walks the headers and moves
// the bytes after the stack once for all of them.
func (c *Codec) PushHops(frame []byte, hops []telemetry.Hop) ([]byte, error) {
	x, err := c.find(frame)
	if err != nil {
		return frame, err
	}
	md := MD(x.hdr)
	n, k := 4*md.HopML(), len(hops)
	if x.shim.Type() != TypeMD || n == 0 || int(md.RemainingHops()) < k ||
		4*x.shim.Length()+n*k > 255*4 || c.MTU > 0 && x.l.End-x.l.L3+n*k > c.MTU || len(frame)+n*k > cap(frame) {
		for i := range hops { // one of the hops meets a limit: as Push meets it
			if frame, _, err = c.Push(frame, &hops[i]); err != nil {
				return frame, err
			}
		}
		return frame, nil
	}
	at, words := x.off+ShimSize+MDHeaderSize, x.shim.Length()
	if frame, err = telemetry.Open(frame, at, n*k); err != nil {
		return frame, err // the check above left room
	}
	md = MD(frame[x.off+ShimSize:])
	for i := range hops { // the stack is newest first: the last hop pushed on top
		writeHop(frame[at+(k-1-i)*n:at+(k-i)*n], md.Instructions(), md.DomainID(), md.DSInstructions(), &hops[i])
	}
	md.SetRemainingHops(md.RemainingHops() - uint8(k))
	Shim(frame[x.off:]).SetLength(words + n*k/4)
	telemetry.AddUDPLength(frame, x.l.L4, n*k)
	x.l.AddIPLength(frame, n*k)
	return frame, nil
}

// writeHop encodes one hop's metadata into b (Hop ML words). Values that do not fit
// their field saturate just below all ones, which means "not supplied". It visits
// only the bitmap's set bits, most significant first: every hop of every INT frame
// a switch stamps or a NIC echoes comes through here.
func writeHop(b []byte, bitmap, domain, dsInst uint16, h *telemetry.Hop) {
	p := 0
	for m := bitmap; m != 0; {
		bit := uint16(0x8000) >> bits.LeadingZeros16(m)
		m &^= bit
		if bit&wideInsts != 0 {
			var v uint64
			switch bit {
			case InstIngressTS:
				v = h.IngressTS
			case InstEgressTS:
				v = h.TS
			default: // InstL2Ports
				v = uint64(h.IngressPort)<<32 | uint64(h.PortID)
			}
			binary.BigEndian.PutUint64(b[p:], v)
			p += 8
			continue
		}
		v := uint32(0xFFFFFFFF) // reserved bits and the checksum complement: not supplied
		switch bit {
		case InstNodeID:
			v = h.SwitchID
		case InstL1Ports:
			v = uint32(telemetry.Saturate(uint64(h.IngressPort), 0xFFFE))<<16 |
				uint32(telemetry.Saturate(uint64(h.PortID), 0xFFFE))
		case InstHopLatency:
			v = h.HopLatency
		case InstQueue:
			v = uint32(h.QueueID)<<24 | uint32(telemetry.Saturate(h.QLen, 0xFFFFFE))
		case InstTxUtil:
			if h.Has&telemetry.FieldTxUtil != 0 {
				v = h.TxUtil
			}
		case InstBuffer:
			v = uint32(h.BufferID)<<24 | uint32(telemetry.Saturate(uint64(h.BufferOcc), 0xFFFFFE))
		}
		binary.BigEndian.PutUint32(b[p:], v)
		p += 4
	}
	if domain != DomainHPCC {
		return
	}
	if dsInst&DSTxBytes != 0 {
		binary.BigEndian.PutUint64(b[p:], h.TxBytes)
		p += 8
	}
	if dsInst&DSLineRate != 0 {
		binary.BigEndian.PutUint32(b[p:], uint32(telemetry.Saturate(h.Rate/1e6, 0xFFFFFFFE)))
	}
}

// readHop decodes one hop's metadata from b. A field whose bits are all ones was not
// supplied: it is left out of Has and never overrides the same value read from
// another field (the L1 and L2 port IDs). Like writeHop it visits only the set bits.
func readHop(b []byte, bitmap, domain, dsInst uint16, h *telemetry.Hop) {
	*h = telemetry.Hop{}
	p := 0
	for m := bitmap; m != 0; {
		bit := uint16(0x8000) >> bits.LeadingZeros16(m)
		m &^= bit
		if bit&wideInsts != 0 {
			v := binary.BigEndian.Uint64(b[p:])
			p += 8
			switch bit {
			case InstIngressTS:
				if v != 0xFFFFFFFFFFFFFFFF {
					h.IngressTS = v
					h.Has |= telemetry.FieldIngressTS
				}
			case InstEgressTS:
				if v != 0xFFFFFFFFFFFFFFFF {
					h.TS = v
					h.Has |= telemetry.FieldTS
				}
			default:
				h.SetPort(telemetry.FieldIngressPort, uint32(v>>32), 0xFFFFFFFF)
				h.SetPort(telemetry.FieldEgressPort, uint32(v), 0xFFFFFFFF)
			}
			continue
		}
		v := binary.BigEndian.Uint32(b[p:])
		p += 4
		switch bit {
		case InstNodeID:
			if v != 0xFFFFFFFF {
				h.SwitchID = v
				h.Has |= telemetry.FieldSwitchID
			}
		case InstL1Ports:
			h.SetPort(telemetry.FieldIngressPort, v>>16, 0xFFFF)
			h.SetPort(telemetry.FieldEgressPort, v&0xFFFF, 0xFFFF)
		case InstHopLatency:
			if v != 0xFFFFFFFF {
				h.HopLatency = v
				h.Has |= telemetry.FieldHopLatency
			}
		case InstQueue:
			h.QueueID = uint8(v >> 24)
			h.Has |= telemetry.FieldQueueID
			if occ := v & 0xFFFFFF; occ != 0xFFFFFF {
				h.QLen = uint64(occ)
				h.Has |= telemetry.FieldQLen
			}
		case InstTxUtil:
			if v != 0xFFFFFFFF {
				h.TxUtil = v
				h.Has |= telemetry.FieldTxUtil
			}
		case InstBuffer:
			h.BufferID = uint8(v >> 24)
			if occ := v & 0xFFFFFF; occ != 0xFFFFFF {
				h.BufferOcc = occ
				h.Has |= telemetry.FieldBufferOcc
			}
		case InstChecksum:
			if v != 0xFFFFFFFF {
				h.Checksum = v
				h.Has |= telemetry.FieldChecksum
			}
		}
	}
	if domain != DomainHPCC {
		return
	}
	if dsInst&DSTxBytes != 0 {
		if v := binary.BigEndian.Uint64(b[p:]); v != 0xFFFFFFFFFFFFFFFF {
			h.TxBytes = v
			h.Has |= telemetry.FieldTxBytes
		}
		p += 8
	}
	if dsInst&DSLineRate != 0 {
		if v := binary.BigEndian.Uint32(b[p:]); v != 0xFFFFFFFF {
			h.Rate = uint64(v) * 1e6
			h.Has |= telemetry.FieldRate
		}
	}
}

// Decode reads the INT headers into a Header and the stack into st, first switch
// first. It does not allocate.
func (c *Codec) Decode(frame []byte, st *telemetry.Stack) (Header, error) {
	x, err := c.find(frame)
	if err != nil {
		return Header{}, err
	}
	return decodeLocated(frame, &x, st)
}

// DecodeStripIn is Decode then StripWith, on a frame whose headers l locates (as
// roce.Locate finds them): the INT sink's whole job in one walk of the headers, for a
// receiver that has located the frame already. On an error the frame is unchanged.
func (c *Codec) DecodeStripIn(frame []byte, l roce.Layout, st *telemetry.Stack, close telemetry.Closer) ([]byte, error) {
	x, err := c.findIn(frame, l)
	if err != nil {
		return frame, err
	}
	if _, err := decodeLocated(frame, &x, st); err != nil {
		return frame, err
	}
	return stripLocated(frame, &x, close), nil
}

// decodeLocated is Decode of the INT headers x located in frame.
func decodeLocated(frame []byte, x *located, st *telemetry.Stack) (Header, error) {
	md := MD(x.hdr)
	hd := Header{Type: x.shim.Type(), NPT: x.shim.NPT(), Length: x.shim.Length(), OrigDSCP: x.shim.OrigDSCP(),
		Version: md.Version(), D: md.D(), Instructions: md.Instructions(), DomainID: md.DomainID(),
		DSInstructions: md.DSInstructions(), DSFlags: md.DSFlags()}
	st.Format, st.N, st.Truncated = telemetry.FormatINTMX, 0, false
	if hd.Type == TypeMX {
		return hd, nil
	}
	st.Format = telemetry.FormatINTMD
	hd.E, hd.M, hd.HopML, hd.RemainingHops = md.E(), md.M(), md.HopML(), md.RemainingHops()
	if hd.HopML == 0 {
		return hd, nil
	}
	stack := frame[x.off+ShimSize+MDHeaderSize : x.off+x.size]
	return hd, st.ReadHops(stack, "hop", telemetry.FixedHop(4*hd.HopML, func(b []byte, h *telemetry.Hop) {
		readHop(b, hd.Instructions, hd.DomainID, hd.DSInstructions, h)
	}))
}

// Strip removes the INT headers and stack and restores the DSCP and the IP and UDP
// lengths: the INT sink's job.
func (c *Codec) Strip(frame []byte) ([]byte, error) {
	return c.StripWith(frame, telemetry.Close)
}

// StripWith is Strip closing the gaps with close (telemetry.InPlace).
func (c *Codec) StripWith(frame []byte, close telemetry.Closer) ([]byte, error) {
	x, err := c.find(frame)
	if err != nil {
		return frame, err
	}
	return stripLocated(frame, &x, close), nil
}

// stripLocated is StripWith of the INT headers x located in frame.
func stripLocated(frame []byte, x *located, close telemetry.Closer) []byte {
	dscp := x.shim.OrigDSCP()
	frame = close(frame, x.off, x.size)
	telemetry.AddUDPLength(frame, x.l.L4, -x.size)
	x.l.AddIPLength(frame, -x.size)
	x.l.SetDSCP(frame, dscp)
	return frame
}
