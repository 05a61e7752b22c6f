package telemetry

import "github.com/rocelab/rocelab/hpcc"

// Hop is one switch's telemetry as rocelab models it: the HPCC hop (egress timestamp,
// queue length, transmitted bytes, line rate, switch and egress port) plus the fields
// the standard formats carry beyond it. Codecs write the fields their configuration
// asks for and fill on decode only those the packet carried (Has says which).
//
// Hop.PortID is the egress port; IngressPort the port the packet arrived on.
type Hop struct {
	hpcc.Hop
	IngressPort uint32
	IngressTS   uint64 // ns; the egress timestamp is Hop.TS
	HopLatency  uint32 // ns from ingress to egress
	QueueID     uint8
	BufferID    uint8
	BufferOcc   uint32 // bytes held in the shared buffer
	TTL         uint8  // IPv4 TTL / IPv6 hop limit as the node forwarded the packet
	TxUtil      uint32 // INT egress Tx utilization (implementation-defined units)

	// Format-specific values that have no HPCC meaning, kept so a decode is lossless.
	Congestion uint8  // IFA congestion bits
	PortSpeed  uint8  // IFA port speed code
	LNS        uint8  // IFA local namespace
	Checksum   uint32 // INT / IOAM checksum complement
	OpaqueID   uint32 // IOAM opaque state snapshot schema ID
	// WideSwitchID is the IOAM wide (56-bit) node ID in full; SwitchID then holds
	// its low 32 bits, what an HPCC consumer keys hops by.
	WideSwitchID uint64
	Opaque       []byte // IOAM opaque state snapshot data: a view into the frame

	// Has records which fields the packet carried for this hop.
	Has Field
}

// Field is a set of Hop fields.
type Field uint32

// The fields a hop can carry.
const (
	FieldSwitchID Field = 1 << iota
	FieldIngressPort
	FieldEgressPort
	FieldTS
	FieldIngressTS
	FieldQLen
	FieldTxBytes
	FieldRate
	FieldHopLatency
	FieldQueueID
	FieldBufferOcc
	FieldTTL
	FieldTxUtil
	FieldCongestion
	FieldPortSpeed
	FieldLNS
	FieldChecksum
	FieldOpaque
	FieldWideSwitchID
)

// Status is the outcome of a transit push. Apart from Pushed, each names the
// format's overflow rule that kept the hop out; the packet is forwarded regardless.
type Status uint8

const (
	// Pushed: the hop was added.
	Pushed Status = iota
	// HopCountExceeded: INT Remaining Hop Count was 0; the E bit is now set.
	HopCountExceeded
	// MTUExceeded: adding the hop would exceed the MTU or the buffer; INT sets M,
	// IFA sets MF.
	MTUExceeded
	// Overflow: the IOAM pre-allocated or incremental trace had no room; the
	// Overflow flag is now set.
	Overflow
	// MaxLengthReached: IFA's metadata stack reached Max Length; MF is now set.
	MaxLengthReached
	// HopLimitReached: the IFA metadata Hop Limit was 0.
	HopLimitReached
	// Wrapped: the HPCC header already held its 5 hops; the oldest slot was
	// overwritten, as the ns-3 simulator's ring does.
	Wrapped
	// NotStacked: the format does not carry hop data in the packet (INT-MX); the
	// node acts on the instructions and exports out of band.
	NotStacked
)

var statusNames = [...]string{"pushed", "hop-count-exceeded", "mtu-exceeded", "overflow",
	"max-length-reached", "hop-limit-reached", "wrapped", "not-stacked"}

// String returns the status as `rocelab decode` and the switch counters name it.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + itoa(int(s)) + ")"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// Format names a telemetry encoding, with the spelling `rocelab decode` prints.
type Format string

// The formats rocelab speaks.
const (
	FormatINTMD Format = "int-md"
	FormatINTMX Format = "int-mx"
	FormatIOAM  Format = "ioam"
	FormatIFA   Format = "ifa"
	FormatHPCC  Format = "hpcc"
)

// MaxHops bounds the hops a Stack holds. Longer stacks decode their first MaxHops
// hops (newest first on the wire) and set Stack.Truncated.
const MaxHops = 32

// Stack is a decoded telemetry stack: the header fields common to the formats and
// the hops in path order (Hops[0] is the first switch the packet crossed). Formats
// keep their own header details in their own Header types; Stack carries what
// `rocelab decode` prints for every format.
type Stack struct {
	Format Format
	// Hops[:N] are the decoded hops, first switch first.
	Hops [MaxHops]Hop
	N    int
	// Truncated is set when the packet carried more hops than MaxHops.
	Truncated bool
}

// HopList returns the decoded hops, first switch first. The slice aliases s.
func (s *Stack) HopList() []Hop { return s.Hops[:s.N] }

// Slot returns where the next decoded hop goes, or nil when the stack already holds
// MaxHops, in which case it marks the stack Truncated. The caller counts the hop
// (N++) once it has decoded it, so a hop that fails to decode is not counted.
func (s *Stack) Slot() *Hop {
	if s.N == MaxHops {
		s.Truncated = true
		return nil
	}
	return &s.Hops[s.N]
}

// Reverse puts hops decoded newest-first into path order.
func (s *Stack) Reverse() {
	for i, j := 0, s.N-1; i < j; i, j = i+1, j-1 {
		s.Hops[i], s.Hops[j] = s.Hops[j], s.Hops[i]
	}
}
