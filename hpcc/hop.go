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
