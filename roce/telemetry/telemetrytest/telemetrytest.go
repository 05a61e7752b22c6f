// Package telemetrytest builds the RoCEv2 frames and hops that the telemetry codecs'
// tests, fuzz seeds and conformance suites share.
package telemetrytest

import (
	"net/netip"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// BufSize is the buffer behind every frame: room for any telemetry stack.
const BufSize = 4096

// Builder returns the description of an RC RDMA WRITE Only packet of 40 payload bytes
// between the rxe captures' hosts, over IPv4 or IPv6.
func Builder(ipv6 bool) *roce.Builder {
	b := &roce.Builder{
		DstMAC: [6]byte{0x52, 0x54, 0x00, 0x00, 0x00, 0x02}, SrcMAC: [6]byte{0x52, 0x54, 0x00, 0x00, 0x00, 0x01},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		DSCP: 26, ECN: 2, SrcPort: 0xC123, IPID: 0x1234,
		BTH:  roce.BTHFields{Opcode: roce.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: 0x123456, AckReq: true},
		RETH: roce.RETHFields{VA: 0x7F0000001000, RKey: 0x1234, DMALen: 40},
	}
	if ipv6 {
		b.Src, b.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		b.FlowLabel = 0xABCDE
	}
	for i := range 40 {
		b.Payload = append(b.Payload, byte(i))
	}
	return b
}

// Frame builds b into a fresh BufSize buffer and returns the frame, whose capacity
// leaves room for telemetry. It panics on a bad description: tests pass fixed ones.
func Frame(b *roce.Builder) []byte {
	buf := make([]byte, BufSize)
	n, err := b.Build(buf)
	if err != nil {
		panic(err)
	}
	return buf[:n]
}

// RoCEFrame is Frame(Builder(ipv6)).
func RoCEFrame(ipv6 bool) []byte { return Frame(Builder(ipv6)) }

// Hop returns a distinct, fully populated hop for switch i (1-based), with values
// every format can carry exactly (rates the HPCC codes know, times below 2^24 ns
// for the compact format's window, ports below 2^16).
func Hop(i int) telemetry.Hop {
	u := uint64(i)
	return telemetry.Hop{
		Hop: hpcc.Hop{
			TS: 1_000_000 + 1000*u, QLen: 80 * 1000 * u, TxBytes: 128 * 100_000 * u,
			Rate: 100e9, SwitchID: uint32(0x100 + i), PortID: uint32(10 + i),
		},
		IngressPort: uint32(20 + i), IngressTS: 1_000_000 + 1000*u - 500, HopLatency: 500,
		QueueID: uint8(i), TTL: uint8(64 - i),
	}
}

// Valid reports whether frame decodes as RoCEv2 with a correct ICRC.
func Valid(frame []byte) error {
	var p roce.Packet
	if err := p.Decode(frame); err != nil {
		return err
	}
	return p.VerifyICRC()
}
