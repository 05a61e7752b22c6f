package hpcc

// Hop is the per-hop telemetry record HPCC consumes: what one switch egress port reported
// when it forwarded a packet (the INT metadata of the HPCC paper and the draft's
// "telemetry padding"). Switches stamp it at dequeue, as the HPCC reference does.
//
// The zero value is a hop that reported nothing; it is never valid input to a rate
// computation because Rate is 0.
type Hop struct {
	// TS is the switch's egress timestamp in nanoseconds.
	TS uint64
	// QLen is the number of bytes queued on the egress port after this packet left.
	QLen uint64
	// TxBytes is the cumulative number of bytes the egress port had transmitted before
	// this packet.
	TxBytes uint64
	// Rate is the egress port's line rate B in bit/s.
	Rate uint64
	// SwitchID identifies the switch; PortID the egress port on it.
	SwitchID uint32
	PortID   uint32
}

// Wrap gives the moduli at which a telemetry format's truncated hop counters wrap, so
// that deltas between two samples of the same hop stay correct across a wrap. A zero
// modulus means the field is carried at full width (deltas are then signed differences).
//
// Codecs convert scaled fields to bytes before filling a Hop (the HPCC-compact format's
// bytes field counts units of 128·multi bytes; its codec multiplies them out), so the
// TxBytes modulus is in bytes: 2^20·128·multi for that format.
type Wrap struct {
	// TS is the modulus of Hop.TS in nanoseconds (1<<24 for a 24-bit timestamp).
	TS uint64
	// TxBytes is the modulus of Hop.TxBytes in bytes.
	TxBytes uint64
}

// CompactWrap returns the moduli of the HPCC reference simulator's 64-bit hop
// (ns-3 int-header.h): a 24-bit nanosecond time and a 20-bit byte counter in units of
// 128·multi bytes. multi is the format's INT multiplier (line rate / 25 Gb/s in the
// simulator's configurations); 0 is treated as 1.
func CompactWrap(multi uint64) Wrap {
	if multi == 0 {
		multi = 1
	}
	return Wrap{TS: 1 << 24, TxBytes: (1 << 20) * 128 * multi}
}

// TimeDelta returns cur.TS − prev.TS in nanoseconds. With a TS modulus the result is
// the forward distance modulo that width, in [0, modulus); without one it is the signed
// difference of the two 64-bit timestamps (negative when cur is older than prev).
func (w Wrap) TimeDelta(cur, prev Hop) int64 {
	return int64(delta(cur.TS, prev.TS, w.TS))
}

// TxBytesDelta returns the bytes the port transmitted between prev and cur, with the
// same wrap rule as TimeDelta.
func (w Wrap) TxBytesDelta(cur, prev Hop) int64 {
	return int64(delta(cur.TxBytes, prev.TxBytes, w.TxBytes))
}

// delta is cur−prev modulo m, or the two's-complement difference when m is 0 (the
// caller reinterprets it as signed).
func delta(cur, prev, m uint64) uint64 {
	if m == 0 {
		return cur - prev
	}
	c, p := cur%m, prev%m
	if c < p {
		return c + (m - p) // no overflow: c < p < m
	}
	return c - p
}
