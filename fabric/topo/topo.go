// Package topo describes a lab's topology — hosts, switches and the links between them —
// loads and validates it from YAML with errors that name the line, generates the
// classic data-centre shapes, and computes the switches' forwarding tables.
//
// A switch's ports are numbered from 0 in the order its links appear in the file.
package topo

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Topology is a validated lab description.
type Topology struct {
	// Telemetry is the in-band telemetry format switches stamp: int, ioam, ifa, hpcc
	// or none.
	Telemetry string
	// CongestionControl is what the soft-RNICs run: hpcc, dcqcn or none.
	CongestionControl string
	// HPCCMode is how HPCC runs (HPCCModes): "probe", the draft's reference RoCEv2
	// mode with one telemetry probe per RTT (the default); "per-ack", telemetry in
	// every data packet and a reaction on every ACK; "rx", Rx-HPCC, the receiver
	// computing the window; "every-n", telemetry on every 4th data packet.
	HPCCMode string
	// Retry is how the soft-RNICs read retry_cnt 7: "ibta" (7 retries, then
	// RETRY_EXC_ERR) or "rxe" (retry forever, as the kernel's rxe does).
	Retry string
	// Machines, when given, split the lab across machines (see Placement).
	Machines []Machine
	Hosts    []Host
	Switches []Switch
	Links    []Link
}

// Host is an emulated host with one RNIC port.
type Host struct {
	Name string
	IPv4 netip.Addr // invalid when absent; a host has IPv4, IPv6 or both
	IPv6 netip.Addr
	MAC  net.HardwareAddr // derived from the host's position when not given
	// External, when set, makes the host something rocelab does not emulate, attached
	// to the fabric through its namespace's TAP without a soft-RNIC: "kernel" is a
	// namespace whose own kernel stack is the host (addresses on the TAP); "bridge" is
	// a namespace holding a Linux bridge (named by Bridge, default br0) with the TAP
	// as a port, for a QEMU VM's TAP or a veth to join. An external host's MAC must be
	// given: it is the device's own, behind the TAP.
	External string
	Bridge   string
	// Machine is the machine the host runs on (one of Topology.Machines), or empty.
	Machine string
	Line    int // where the host is declared; 0 for generated topologies
}

// External host kinds (Host.External).
const (
	ExternalKernel = "kernel"
	ExternalBridge = "bridge"
)

// Switch is a bridge-switch.
type Switch struct {
	Name string
	// Buffer is the shared packet buffer in bytes; 0 means unlimited.
	Buffer int
	// ECN, when set, enables RED marking (DCQCN's KMin, KMax, PMax).
	ECN *ECN
	// PFC, when set, makes the listed priorities lossless.
	PFC *PFC
	// Machine is the machine the switch runs on (one of Topology.Machines), or empty.
	Machine string
	Line    int
}

// ECN is RED marking in bytes of queue.
type ECN struct {
	KMin, KMax int
	PMax       float64
}

// PFC are the per-ingress-port thresholds of priority flow control, in bytes.
type PFC struct {
	Priorities          []uint8
	XOff, XOn, Headroom int
}

// Link joins two nodes.
type Link struct {
	Endpoints [2]string
	Rate      uint64 // bit/s
	Delay     time.Duration
	MTU       int
	// Buffer, when set, limits each of the link's switch ports to that many bytes
	// (in addition to the switch's shared buffer).
	Buffer int
	Faults link.Faults
	Line   int
}

// Config returns the link's configuration for package link.
func (l *Link) Config() link.Config {
	return link.Config{Rate: l.Rate, Delay: l.Delay, MTU: l.MTU, Faults: l.Faults}
}

// Telemetry formats and congestion controls a topology may name.
var (
	TelemetryFormats   = append(telemetry.FormatNames(), telemetry.NoTelemetry)
	CongestionControls = []string{"hpcc", "dcqcn", "none"}
	HPCCModes          = []string{"probe", "per-ack", "rx", "every-n"}
	RetryReadings      = []string{"ibta", "rxe"}
)

// Error is a validation error at a line of the topology file (0 when unknown).
type Error struct {
	Line int
	Msg  string
}

// Error returns the message, with its line when the error has one.
func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

func errorf(line int, format string, args ...any) error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}
