package rnic

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// TestTelemetrySignal: the Rx pipeline skips a codec's decoder when the frame's layout
// lacks the codec's signal, so a frame without it must be one the decoder answers
// ErrNoTelemetry for, and every frame carrying the codec's telemetry must show it.
// Every format, request and echo, over IPv4 and IPv6: plain frames of several DSCPs
// (the signalling ones included), requests, and echoes.
func TestTelemetrySignal(t *testing.T) {
	for _, format := range []telemetry.Format{telemetry.FormatINTMD, telemetry.FormatHPCC, telemetry.FormatIFA, telemetry.FormatIOAM} {
		tel, err := newTelemetryCodecs(format, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, v6 := range []bool{false, true} {
			type sample struct {
				name    string
				frame   []byte
				carries *codec // the codec whose telemetry it carries, if any
			}
			var samples []sample
			for _, dscp := range []uint8{0, 26, telemetry.RequestDSCPINT, telemetry.EchoDSCP, 0x19} {
				samples = append(samples, sample{fmt.Sprintf("plain, DSCP %#x", dscp), roceFrame(t, v6, dscp), nil})
			}
			for _, c := range []*codec{&tel.request, &tel.echo} {
				b := roceFrame(t, v6, 26)
				out, err := c.Request(b[:len(b):cap(b)])
				if err != nil {
					continue // IOAM over IPv4
				}
				samples = append(samples, sample{fmt.Sprintf("%s-carrying", map[bool]string{true: "request", false: "echo"}[c == &tel.request]), out, c})
			}
			for _, s := range samples {
				l, err := roce.Locate(s.frame)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []*codec{&tel.request, &tel.echo} {
					var st telemetry.Stack
					derr := c.decode(s.frame, &st)
					switch {
					case !c.signal.Shown(s.frame, &l) && !errors.Is(derr, telemetry.ErrNoTelemetry):
						t.Errorf("%s v6 %v %s: no signal, but the decoder says %v", format, v6, s.name, derr)
					case s.carries == c && (!c.signal.Shown(s.frame, &l) || derr != nil):
						t.Errorf("%s v6 %v %s: signalled %v, decoded %v", format, v6, s.name, c.signal.Shown(s.frame, &l), derr)
					}
				}
			}
		}
	}
}

// roceFrame builds an RDMA WRITE Only frame with 256 bytes of payload and the DSCP,
// with room after it for telemetry.
func roceFrame(t *testing.T, v6 bool, dscp uint8) []byte {
	t.Helper()
	b := roce.Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), DSCP: dscp,
		SrcPort: 0xC000, BTH: roce.BTHFields{Opcode: roce.OpRCWriteOnly, PKey: roce.DefaultPKey, DestQP: 0x11},
		RETH: roce.RETHFields{VA: 0x1000, RKey: 1, DMALen: 256}, Payload: make([]byte, 256)}
	if v6 {
		b.Src, b.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	buf := make([]byte, 2048)
	n, err := b.Build(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
