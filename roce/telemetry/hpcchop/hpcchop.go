// Package hpcchop carries the HPCC reference simulator's compact hop records (ns-3
// High-Precision-Congestion-Control, src/network/utils/int-header.h): up to five 64-bit
// hops in a ring and a hop count, between the UDP header and the BTH.
//
// Each hop is the simulator's bitfield word. GCC lays the fields out from the least
// significant bit and the simulator serialises the two 32-bit halves with ns-3's
// little-endian Buffer::WriteU32, so on the wire a hop is one little-endian uint64:
//
//	bit 63                                                                 bit 0
//	+-----------------+----------------------+--------------------------+-------+
//	|  qlen (17)      |   bytes (20)         |     time (24)            |rate(3)|
//	+-----------------+----------------------+--------------------------+-------+
//
//	rate  line-rate code: 0 25G, 1 50G, 2 100G, 3 200G, 4 400G (the simulator's);
//	      7 (EscapeCode, rocelab's extension) says the rate is in the rate table
//	time  egress timestamp in ns, modulo 2^24 (wraps every 16.8 ms)
//	bytes the port's cumulative transmitted bytes / (128·multi), modulo 2^20
//	qlen  bytes queued on the port / (80·multi); rocelab saturates at 2^17−1 where the
//	      simulator's bitfield would wrap, because qlen is a level, not a counter
//
// The simulator has no header around the hops (its packets are its own), so rocelab
// wraps them in a 4-byte shim and signals the shim by a DSCP value, as INT-MD over UDP
// does; the shim keeps the original DSCP so Strip restores it:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Ver  |X|E|Rsv| orig DSCP |Rsv|        hop count (nhop)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 hop slot 0 (64, little-endian)                |
//	|                             ...                               |
//	|                 hop slot 4 (64, little-endian)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        rate of slot 0, Mb/s (32, big-endian)   — only if X    |
//	|                             ...                               |
//	|        rate of slot 4, Mb/s (32, big-endian)   — only if X    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A switch writes slot nhop mod 5 and increments nhop (IntHeader::PushHop), so a sixth
// hop overwrites the first: Push reports telemetry.Wrapped and Decode returns the last
// five hops in path order.
//
// Rates the simulator has no code for (a lab's 1, 10 or 40 Gb/s links) use rocelab's
// extension: the first switch that needs it grows the block by the 20-byte rate table
// and sets X; a hop on such a link carries rate code 7 (EscapeCode) and its rate in
// Mb/s in the table entry of its slot. A decoder reads a hop's rate from the code,
// or, for code 7, from the table entry of the same slot (a code 7 in a block without
// the table reads as rate 0, as the undefined codes 5 and 6 do). Hops at the simulator's rates
// keep their codes, and a block no switch escaped in is the simulator's 44 bytes. A
// switch that cannot record its hop — a rate that is not a whole number of Mb/s, or
// no room to add the table — sets E, leaves the slots alone and returns an error; the
// frame is forwarded without that hop.
package hpcchop

import (
	"encoding/binary"
	"fmt"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Sizes and limits of the carriage.
const (
	ShimSize      = 4
	HopSize       = 8
	MaxHops       = 5
	HeaderSize    = ShimSize + MaxHops*HopSize // 44 bytes: the whole block between UDP and BTH
	RateTableSize = MaxHops * 4                // the extension's per-slot rates, when X is set
	Version       = 1

	// EscapeCode is the rate code of a hop whose rate is in the rate table.
	EscapeCode = 7
	// FlagX (shim byte 0) says the rate table follows the slots; FlagE that a switch
	// could not record its hop.
	FlagX, FlagE = 0x08, 0x04

	// DefaultDSCP signals the HPCC block unless configured otherwise.
	DefaultDSCP = 0x19

	ByteUnit = 128 // bytes per unit of the bytes field, times Multi
	QLenUnit = 80  // bytes per unit of the qlen field, times Multi

	timeBits, bytesBits, qlenBits = 24, 20, 17
)

// LineRates maps the 3-bit line-rate code to bit/s; codes 5 and 6 are undefined and 7
// is EscapeCode.
var LineRates = [8]uint64{25e9, 50e9, 100e9, 200e9, 400e9}

// RateCode returns the simulator's code of a line rate and whether it has one: the
// index of bps in LineRates, spelled out as a switch because a switch stamps a hop
// into every data packet it sends (TestRateCode holds it to the table).
func RateCode(bps uint64) (uint8, bool) {
	switch bps {
	case 25e9:
		return 0, true
	case 50e9:
		return 1, true
	case 100e9:
		return 2, true
	case 200e9:
		return 3, true
	case 400e9:
		return 4, true
	}
	return 0, false
}

// CheckRate returns nil if a hop on a link of bps can be recorded: with one of the
// simulator's codes or, through the extension, as a whole number of Mb/s that fits
// the table's 32 bits.
func CheckRate(bps uint64) error {
	if _, ok := RateCode(bps); ok {
		return nil
	}
	if bps == 0 || bps%1e6 != 0 || bps/1e6 > 0xFFFFFFFF {
		return fmt.Errorf("line rate %d bit/s has no HPCC rate code and is not a whole number of Mb/s below 2^32", bps)
	}
	return nil
}

// Word is one decoded 64-bit hop, in the simulator's units.
type Word struct {
	RateCode uint8
	Time     uint32 // 24 bits
	Bytes    uint32 // 20 bits
	QLen     uint32 // 17 bits
}

// Pack returns the hop as the simulator's 64-bit word.
func (w Word) Pack() uint64 {
	return uint64(w.RateCode&7) | uint64(w.Time&(1<<timeBits-1))<<3 |
		uint64(w.Bytes&(1<<bytesBits-1))<<27 | uint64(w.QLen&(1<<qlenBits-1))<<47
}

// Unpack splits a 64-bit hop word.
func Unpack(v uint64) Word {
	return Word{RateCode: uint8(v & 7), Time: uint32(v>>3) & (1<<timeBits - 1),
		Bytes: uint32(v>>27) & (1<<bytesBits - 1), QLen: uint32(v>>47) & (1<<qlenBits - 1)}
}

// Shim is a view of the 4-byte shim followed by the five hop slots and, when X is
// set, the rate table.
type Shim []byte

// Offsets of the shim's fields.
const (
	shimVersionFlags = 0 // version (4 bits), flags X and E
	shimOrigDSCP     = 1 // the original DSCP (top 6 bits)
	shimNHop         = 2 // hop counter (16 bits)
	rateSize         = 4 // one rate table entry: Mb/s, 32 bits
)

// Version returns the block's version.
func (s Shim) Version() uint8 { return s[shimVersionFlags] >> 4 }

// Flags returns the flags FlagX and FlagE.
func (s Shim) Flags() uint8 { return s[shimVersionFlags] & (FlagX | FlagE) }

// SetFlag sets flag f.
func (s Shim) SetFlag(f uint8) { s[shimVersionFlags] |= f }

// OrigDSCP returns the DSCP the packet had before the block was requested.
func (s Shim) OrigDSCP() uint8 { return s[shimOrigDSCP] >> 2 }

// NHop returns the hops pushed so far (more than MaxHops once the ring wrapped).
func (s Shim) NHop() uint16 { return binary.BigEndian.Uint16(s[shimNHop:]) }

// SetNHop sets the hop counter.
func (s Shim) SetNHop(n uint16) { binary.BigEndian.PutUint16(s[shimNHop:], n) }

// Slot returns hop slot i's 64-bit word (little-endian, as the simulator stores it).
func (s Shim) Slot(i int) uint64 { return binary.LittleEndian.Uint64(s[ShimSize+i*HopSize:]) }

// SetSlot sets hop slot i's word.
func (s Shim) SetSlot(i int, v uint64) {
	binary.LittleEndian.PutUint64(s[ShimSize+i*HopSize:], v)
}

// SlotRate returns slot i's line rate in Mb/s from the rate table; only with X set.
func (s Shim) SlotRate(i int) uint32 { return binary.BigEndian.Uint32(s[HeaderSize+i*rateSize:]) }

// SetSlotRate sets slot i's line rate in the rate table; only with X set.
func (s Shim) SetSlotRate(i int, mbps uint32) {
	binary.BigEndian.PutUint32(s[HeaderSize+i*rateSize:], mbps)
}

// size is the block's length: the simulator's 44 bytes, plus the rate table with X.
func (s Shim) size() int {
	if s[shimVersionFlags]&FlagX != 0 {
		return HeaderSize + RateTableSize
	}
	return HeaderSize
}

// Header holds the shim's fields as decoded.
type Header struct {
	Version  uint8
	OrigDSCP uint8
	NHop     uint16 // hops pushed so far, including overwritten ones
	// RateTable (X) says the block carries the extension's rate table; Error (E) that
	// a switch on the path could not record its hop.
	RateTable, Error bool
}

// Codec adds, stamps, decodes and strips HPCC compact hops. The zero value is not
// ready: use New, or set DSCP and Multi.
type Codec struct {
	// DSCP marks packets that carry the block.
	DSCP uint8
	// Multi is the simulator's INT multiplier (line rate / 25 Gb/s in its configs):
	// one bytes unit is 128·Multi bytes and one qlen unit 80·Multi bytes. 0 means 1.
	Multi uint64
}

// Signal is the HPCC hop format's mark: its DSCP on a UDP packet.
func (c *Codec) Signal() telemetry.Signal {
	return telemetry.Signal{By: telemetry.SignalDSCP, Value: c.DSCP}
}

// New returns a codec with DefaultDSCP and multiplier 1.
func New() *Codec { return &Codec{DSCP: DefaultDSCP, Multi: 1} }

func (c *Codec) multi() uint64 {
	if c.Multi == 0 {
		return 1
	}
	return c.Multi
}

// located is where a frame's block is: the frame's headers, the block's offset (just
// after UDP) and the block itself.
type located struct {
	l   roce.Layout
	off int
	s   Shim
}

// find locates the block in frame.
func (c *Codec) find(frame []byte) (located, error) { return telemetry.Find(frame, c.findIn) }

// findIn is find in a frame whose headers l locates.
func (c *Codec) findIn(frame []byte, l roce.Layout) (located, error) {
	x := located{l: l}
	if l.Proto != telemetry.ProtoUDP || l.DSCP(frame) != c.DSCP || !l.UDPAt(frame, l.L4) {
		return x, telemetry.ErrNoTelemetry
	}
	x.off = l.L4 + roce.UDPSize
	if x.off+HeaderSize > l.End {
		return x, telemetry.Malformed("HPCC block cut off: %d bytes after UDP", l.End-x.off)
	}
	x.s = Shim(frame[x.off : x.off+HeaderSize])
	if x.s.Version() != Version {
		return x, telemetry.Malformed("HPCC shim version %d", x.s.Version())
	}
	if n := x.s.size(); n > HeaderSize {
		if x.off+n > l.End {
			return x, telemetry.Malformed("HPCC rate table cut off: %d bytes after UDP", l.End-x.off)
		}
		x.s = frame[x.off : x.off+n]
	}
	return x, nil
}

// Request inserts an empty block after the UDP header, moves the packet's DSCP into
// the shim and marks the packet with c.DSCP.
func (c *Codec) Request(frame []byte) ([]byte, error) {
	return c.RequestWith(frame, telemetry.Open, telemetry.Close)
}

// RequestWith is Request opening the block's gap with open (telemetry.InPlace).
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
	off := l.L4 + roce.UDPSize
	frame, err = open(frame, off, HeaderSize)
	if err != nil {
		return frame, err
	}
	frame[off] = Version << 4
	frame[off+1] = l.DSCP(frame) << 2
	telemetry.AddUDPLength(frame, l.L4, HeaderSize)
	l.AddIPLength(frame, HeaderSize)
	l.SetDSCP(frame, c.DSCP)
	return frame, nil
}

// Push writes hop h into slot nhop mod 5 and increments nhop. It reports
// telemetry.Wrapped when the write overwrote an older hop. A rate without a
// simulator code goes in the rate table, which Push adds (growing frame into its
// capacity) if the block has none yet. A hop Push cannot record — a rate CheckRate
// refuses, or no capacity for the table — sets the E flag and returns an error
// with the slots untouched.
func (c *Codec) Push(frame []byte, h *telemetry.Hop) ([]byte, telemetry.Status, error) {
	return telemetry.Push(frame, h, c.findIn, c.push)
}

// PushWith is Push in a frame whose headers l locates, opening the rate table's gap,
// if it needs one, with open (telemetry.InPlace). It sets h.TTL, which the block
// does not carry, as every InPlace codec does.
func (c *Codec) PushWith(frame []byte, l roce.Layout, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	return telemetry.PushWith(frame, l, h, open, c.findIn, c.push)
}

// PushHops is Push of each of hops in turn, stopping at the first error, with one
// look for the block (telemetry.HopsPusher): a receiver echoing the hops a packet
// collected pushes them all into its ACK's block.
func (c *Codec) PushHops(frame []byte, hops []telemetry.Hop) ([]byte, error) {
	if len(hops) == 0 {
		return frame, nil
	}
	x, err := c.find(frame)
	if err != nil {
		return frame, err
	}
	for i := range hops {
		n := len(frame)
		if frame, _, err = c.push(frame, x, &hops[i], telemetry.Open); err != nil {
			return frame, err
		}
		if len(frame) != n { // the push added the rate table: the block is longer
			if x, err = c.find(frame); err != nil {
				return frame, err
			}
		}
	}
	return frame, nil
}

// push is Push into the block x locates, with open opening the rate table's gap.
func (c *Codec) push(frame []byte, x located, h *telemetry.Hop, open telemetry.Opener) ([]byte, telemetry.Status, error) {
	s := x.s
	code, err := hopCode(s, h.Rate)
	if err != nil {
		return frame, 0, err
	}
	if code == EscapeCode && s.Flags()&FlagX == 0 {
		at := x.off + HeaderSize
		grown, err := open(frame, at, RateTableSize)
		if err != nil {
			s.SetFlag(FlagE)
			return frame, 0, err
		}
		// The opener may have moved the bytes before the gap: offsets from the
		// frame's start hold, slices of the old frame do not.
		frame = grown
		telemetry.AddUDPLength(frame, x.l.L4, RateTableSize)
		x.l.AddIPLength(frame, RateTableSize)
		s = Shim(frame[x.off : at+RateTableSize])
		s.SetFlag(FlagX)
	}
	return frame, c.record(s, code, h), nil
}

// hopCode returns the rate code a hop at rate bps takes in block s: the simulator's,
// or EscapeCode for a rate the table must carry (the caller adds the table if s has
// none). A rate neither can carry sets E and is an error.
func hopCode(s Shim, bps uint64) (uint8, error) {
	if code, ok := RateCode(bps); ok {
		return code, nil
	}
	if err := CheckRate(bps); err != nil {
		s.SetFlag(FlagE)
		return 0, err
	}
	return EscapeCode, nil
}

// record writes hop h, whose rate has code, into slot nhop mod 5 of block s and
// increments nhop; s has the rate table if code is EscapeCode.
func (c *Codec) record(s Shim, code uint8, h *telemetry.Hop) telemetry.Status {
	m := c.multi()
	w := Word{
		RateCode: code,
		Time:     uint32(h.TS),
		Bytes:    uint32(h.TxBytes / (ByteUnit * m)),
		QLen:     uint32(telemetry.Saturate(h.QLen/(QLenUnit*m), 1<<qlenBits-1)),
	}
	n := s.NHop()
	slot := int(n % MaxHops)
	s.SetSlot(slot, w.Pack())
	if s.Flags()&FlagX != 0 {
		// A slot reused by the ring must not keep an older hop's escaped rate.
		var mbps uint32
		if code == EscapeCode {
			mbps = uint32(h.Rate / 1e6)
		}
		s.SetSlotRate(slot, mbps)
	}
	next := n + 1
	if next == 0 {
		// A 16-bit count that wraps to 0 would say "no hops" over a full ring (only a
		// forged header gets here); restart past MaxHops at the same ring position.
		next = MaxHops + 1<<16%MaxHops
	}
	s.SetNHop(next)
	if n >= MaxHops {
		return telemetry.Wrapped
	}
	return telemetry.Pushed
}

// RequestDetached writes an empty block into blk[:0], moves the packet's DSCP into it
// and marks the packet with c.DSCP (telemetry.Detacher).
func (c *Codec) RequestDetached(frame []byte, l roce.Layout, blk []byte) ([]byte, error) {
	if l.Proto != telemetry.ProtoUDP || !l.UDPAt(frame, l.L4) {
		return blk, telemetry.ErrUnsupported
	}
	if _, err := c.findIn(frame, l); err == nil || len(blk) > 0 {
		return blk, telemetry.ErrAlreadyPresent
	}
	if cap(blk) < HeaderSize {
		return blk, telemetry.Malformed("no room for the %d-byte HPCC block", HeaderSize)
	}
	blk = blk[:HeaderSize]
	clear(blk)
	blk[shimVersionFlags] = Version << 4
	blk[shimOrigDSCP] = l.DSCP(frame) << 2
	l.SetDSCP(frame, c.DSCP)
	return blk, nil
}

// detached returns block blk as the shim it must be.
func detached(blk []byte) (Shim, error) {
	if len(blk) < HeaderSize {
		return nil, telemetry.Malformed("HPCC block of %d bytes", len(blk))
	}
	s := Shim(blk)
	if s.Version() != Version {
		return nil, telemetry.Malformed("HPCC shim version %d", s.Version())
	}
	if s.size() != len(blk) {
		return nil, telemetry.Malformed("HPCC block of %d bytes, its flags say %d", len(blk), s.size())
	}
	return s, nil
}

// PushDetached is Push into block blk, which the rate table grows into its capacity
// (telemetry.Detacher).
func (c *Codec) PushDetached(blk []byte, h *telemetry.Hop, _ int) ([]byte, telemetry.Status, error) {
	s, err := detached(blk)
	if err != nil {
		return blk, 0, err
	}
	code, err := hopCode(s, h.Rate)
	if err != nil {
		return blk, 0, err
	}
	if code == EscapeCode && s.Flags()&FlagX == 0 {
		if cap(blk) < HeaderSize+RateTableSize {
			s.SetFlag(FlagE)
			return blk, 0, telemetry.Malformed("no room for the HPCC rate table")
		}
		blk = blk[:HeaderSize+RateTableSize]
		clear(blk[HeaderSize:])
		s = Shim(blk)
		s.SetFlag(FlagX)
	}
	return blk, c.record(s, code, h), nil
}

// DecodeDetached is Decode of block blk (telemetry.Detacher).
func (c *Codec) DecodeDetached(blk []byte, st *telemetry.Stack) error {
	s, err := detached(blk)
	if err != nil {
		return err
	}
	c.decodeLocated(s, st)
	return nil
}

// StripDetached restores the DSCP block blk keeps in frame (telemetry.Detacher).
func (c *Codec) StripDetached(frame []byte, l roce.Layout, blk []byte) error {
	s, err := detached(blk)
	if err != nil {
		return err
	}
	l.SetDSCP(frame, s.OrigDSCP())
	return nil
}

// Decode reads the block into st (hops in path order, the last five when the ring
// wrapped) and returns the shim's fields.
func (c *Codec) Decode(frame []byte, st *telemetry.Stack) (Header, error) {
	x, err := c.find(frame)
	if err != nil {
		return Header{}, err
	}
	return c.decodeLocated(x.s, st), nil
}

// decodeLocated is Decode of block s.
func (c *Codec) decodeLocated(s Shim, st *telemetry.Stack) Header {
	hd := Header{Version: s.Version(), OrigDSCP: s.OrigDSCP(), NHop: s.NHop(),
		RateTable: s.Flags()&FlagX != 0, Error: s.Flags()&FlagE != 0}
	st.Format, st.N, st.Truncated = telemetry.FormatHPCC, 0, hd.NHop > MaxHops
	n, first := int(hd.NHop), 0
	if n > MaxHops {
		n, first = MaxHops, int(hd.NHop%MaxHops)
	}
	m := c.multi()
	for i := range n {
		slot := (first + i) % MaxHops
		w := Unpack(s.Slot(slot))
		hop := &st.Hops[i]
		*hop = telemetry.Hop{}
		hop.Rate = LineRates[w.RateCode]
		if w.RateCode == EscapeCode && hd.RateTable {
			// Without the table the escape says no rate, as the undefined codes 5 and 6.
			hop.Rate = uint64(s.SlotRate(slot)) * 1e6
		}
		hop.TS = uint64(w.Time)
		hop.TxBytes = uint64(w.Bytes) * ByteUnit * m
		hop.QLen = uint64(w.QLen) * QLenUnit * m
		hop.Has = telemetry.FieldRate | telemetry.FieldTS | telemetry.FieldTxBytes | telemetry.FieldQLen
	}
	st.N = n
	return hd
}

// Strip removes the block, restores the DSCP and the IP and UDP lengths.
func (c *Codec) Strip(frame []byte) ([]byte, error) {
	return c.StripWith(frame, telemetry.Close)
}

// StripWith is Strip closing the gap with close (telemetry.InPlace).
func (c *Codec) StripWith(frame []byte, close telemetry.Closer) ([]byte, error) {
	x, err := c.find(frame)
	if err != nil {
		return frame, err
	}
	return stripLocated(frame, &x, close), nil
}

// DecodeStripIn is Decode then StripWith, on a frame whose headers l locates (as
// roce.Locate finds them): the receiver's whole job in one look at the headers it
// has located already. On an error the frame is unchanged.
func (c *Codec) DecodeStripIn(frame []byte, l roce.Layout, st *telemetry.Stack, close telemetry.Closer) ([]byte, error) {
	x, err := c.findIn(frame, l)
	if err != nil {
		return frame, err
	}
	c.decodeLocated(x.s, st)
	return stripLocated(frame, &x, close), nil
}

// stripLocated removes the block x locates in frame with close.
func stripLocated(frame []byte, x *located, close telemetry.Closer) []byte {
	dscp, n := x.s.OrigDSCP(), len(x.s)
	frame = close(frame, x.off, n)
	telemetry.AddUDPLength(frame, x.l.L4, -n)
	x.l.AddIPLength(frame, -n)
	x.l.SetDSCP(frame, dscp)
	return frame
}
