package decode

import (
	"strings"
	"testing"

	"github.com/rocelab/rocelab/roce"
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

// What a lab's soft-RNICs send decodes with its telemetry under the default signals:
// INT-MD requests on rocelab's request DSCP, INT-MD and HPCC-block echoes on its echo
// DSCP, IFA echoes on its echo protocol (a lab's capture showed every probe as a
// READ response with a bad ICRC).
func TestRocelabSignalsByDefault(t *testing.T) {
	intReq, intEcho, hpccEcho, ifaEcho := intmd.New(), intmd.New(), hpcchop.New(), ifa.New()
	intReq.DSCP, intEcho.DSCP, hpccEcho.DSCP = telemetry.RequestDSCPINT, telemetry.EchoDSCP, telemetry.EchoDSCP
	ifaEcho.Protocol = telemetry.EchoProtocol
	for _, c := range []struct {
		name, format string
		codec        telemetry.Codec
	}{{"int request", "int-md", intReq}, {"int echo", "int-md", intEcho}, {"hpcc echo", "hpcc", hpccEcho}, {"ifa echo", "ifa", ifaEcho}} {
		f, err := c.codec.Request(telemetrytest.RoCEFrame(false))
		if err != nil {
			t.Fatal(err)
		}
		h := telemetrytest.Hop(1)
		f, _, _ = c.codec.Push(f, &h)
		var d Decoder
		r := d.Decode(1, f)
		if tel, ok := r.Telemetry.(map[string]any); !ok || tel["format"] != c.format {
			t.Errorf("%s: telemetry %v, note %q", c.name, r.Telemetry, r.Note)
		}
		if !r.RoCE || r.ICRCOK == nil || !*r.ICRCOK || r.BTH == nil || r.BTH.PSN != 0x123456 {
			t.Errorf("%s: inner packet: roce %v icrc %v error %q", c.name, r.RoCE, r.ICRCOK, r.Error)
		}
	}
}

// A plain RoCEv2 packet whose DSCP happens to be the HPCC block's and whose BTH reads
// as an HPCC shim (opcode 0x10: "version 1") is no HPCC packet: stripping 44 bytes
// would leave no valid RoCEv2. It decodes as it stands, with a note (issue 20).
func TestDSCPSignalFallsBack(t *testing.T) {
	for _, c := range []struct {
		name   string
		dscp   uint8
		opcode roce.Opcode
	}{
		{"hpcc", hpcchop.DefaultDSCP, roce.OpRCReadResponseOnly},
		{"int", intmd.DefaultDSCP, roce.OpRCReadResponseOnly},
		{"int-write", intmd.DefaultDSCP, roce.OpRCWriteOnly},
	} {
		b := telemetrytest.Builder(false)
		b.DSCP, b.BTH.Opcode = c.dscp, c.opcode
		if c.opcode == roce.OpRCReadResponseOnly {
			b.RETH, b.AETH = roce.RETHFields{}, roce.AETHFields{MSN: 7}
		}
		var d Decoder
		r := d.Decode(1, telemetrytest.Frame(b))
		if r.Telemetry != nil || r.Error != "" || r.BTH == nil || r.BTH.Opcode != uint8(c.opcode) || r.ICRCOK == nil || !*r.ICRCOK {
			t.Errorf("%s: telemetry %v, error %q, bth %+v", c.name, r.Telemetry, r.Error, r.BTH)
		}
		if c.name == "hpcc" && !strings.Contains(r.Note, "DSCP 25 signals HPCC telemetry") {
			t.Errorf("%s: note %q", c.name, r.Note)
		}
	}
}

// Telemetry that validates but leaves a RoCEv2 packet whose ICRC fails is not
// honoured either; a valid block is found under a DSCP set with SetSignals, and not
// under the default.
func TestDSCPSignalNeedsValidICRC(t *testing.T) {
	c := hpcchop.New()
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	f, _, _ = c.Push(f, &h)
	bad := append([]byte(nil), f...)
	bad[len(bad)-1] ^= 1 // the ICRC
	var d Decoder
	if r := d.Decode(1, bad); r.Telemetry != nil || !strings.Contains(r.Note, "ICRC") {
		t.Errorf("corrupt ICRC: telemetry %v, note %q", r.Telemetry, r.Note)
	}
	if r := d.Decode(2, f); r.Telemetry == nil || r.Note != "" {
		t.Errorf("valid block: telemetry %v, note %q", r.Telemetry, r.Note)
	}

	c.DSCP = 40
	f, _ = c.Request(telemetrytest.RoCEFrame(false))
	f, _, _ = c.Push(f, &h)
	if r := d.Decode(3, f); r.Telemetry != nil {
		t.Errorf("DSCP 40 under the default signals: telemetry %v", r.Telemetry)
	}
	var custom Decoder
	s := DefaultSignals()
	s.HPCCDSCP = 40
	custom.SetSignals(s)
	if r := custom.Decode(1, f); r.Telemetry == nil || r.ICRCOK == nil || !*r.ICRCOK {
		t.Errorf("DSCP 40 with --hpcc-dscp 40: telemetry %v, note %q, error %q", r.Telemetry, r.Note, r.Error)
	}
}

// An IOAM wide node ID is printed in full under switch_id.
func TestHopRecordWideSwitchID(t *testing.T) {
	h := telemetry.Hop{WideSwitchID: 0xABCDEF01234567, Has: telemetry.FieldSwitchID | telemetry.FieldWideSwitchID}
	h.SwitchID = uint32(h.WideSwitchID)
	if got := HopRecord(&h)["switch_id"]; got != uint64(0xABCDEF01234567) {
		t.Errorf("switch_id %v (%T)", got, got)
	}
}
