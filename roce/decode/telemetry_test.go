package decode

import (
	"testing"

	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// Every format is found, its hops listed, and the RoCEv2 packet underneath decodes
// with a valid ICRC once the telemetry is stripped.
func TestTelemetryRecords(t *testing.T) {
	for _, c := range []struct {
		format string
		codec  telemetry.Codec
		ipv6   bool
	}{{"int-md", intmd.New(), false}, {"ioam", ioam.New(), true}, {"ifa", ifa.New(), false}, {"hpcc", hpcchop.New(), false}} {
		f, err := c.codec.Request(telemetrytest.RoCEFrame(c.ipv6))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			h := telemetrytest.Hop(i)
			f, _, _ = c.codec.Push(f, &h)
		}
		var d Decoder
		r := d.Decode(1, f)
		tel, ok := r.Telemetry.(map[string]any)
		if !ok || tel["format"] != c.format {
			t.Fatalf("%s: telemetry %v", c.format, r.Telemetry)
		}
		hops := tel["hops"].([]map[string]any)
		if len(hops) != 2 || hops[0]["ts_ns"] != telemetrytest.Hop(1).TS%(1<<24) && hops[0]["ts_ns"] != telemetrytest.Hop(1).TS {
			t.Errorf("%s: hops %v", c.format, hops)
		}
		if !r.RoCE || r.ICRCOK == nil || !*r.ICRCOK || r.BTH == nil || r.BTH.PSN != 0x123456 {
			t.Errorf("%s: inner packet: roce %v icrc %v error %q", c.format, r.RoCE, r.ICRCOK, r.Error)
		}
	}
}
