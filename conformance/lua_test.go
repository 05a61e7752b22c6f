package conformance

// tshark with rocelab's Lua dissectors (wireshark/rocelab.lua) must show the values
// rocelab wrote for INT-MD, IFA, HPCC hops and probes.

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/probe"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

func luaScript(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "wireshark", "rocelab.lua")
}

// stamped returns a frame carrying c's telemetry with hops 1..n.
func stamped(t *testing.T, c telemetry.Codec, n int) []byte {
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		h := telemetrytest.Hop(i)
		if f, _, err = c.Push(f, &h); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// labRateHPCC is an HPCC block whose first hop is at 10 Gb/s (rocelab's rate
// extension) and second at 100 Gb/s (the simulator's code).
func labRateHPCC(t *testing.T) []byte {
	c := hpcchop.New()
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	h1, h2 := telemetrytest.Hop(1), telemetrytest.Hop(2)
	h1.Rate = 10e9
	for _, h := range []*telemetry.Hop{&h1, &h2} {
		if f, _, err = c.Push(f, h); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// labSignal sets c's signal to v, as a lab's soft-RNICs do for requests and echoes.
func labSignal(c telemetry.Codec, v uint8) telemetry.Codec {
	switch c := c.(type) {
	case *intmd.Codec:
		c.DSCP = v
	case *hpcchop.Codec:
		c.DSCP = v
	case *ifa.Codec:
		c.Protocol = v
	}
	return c
}

func probeFrameBytes(opcode roce.Opcode, body []byte) []byte {
	b := telemetrytest.Builder(false)
	b.BTH.Opcode, b.Payload = opcode, body
	return telemetrytest.Frame(b)
}

func TestLuaDissectors(t *testing.T) {
	tshark := needTshark(t)
	req := make([]byte, probe.RequestSize)
	(&probe.Request{AllHops: true, Seq: 77, SendTS: 123456789}).Put(req)
	var st telemetry.Stack
	for i := range 2 {
		st.Hops[i] = telemetrytest.Hop(i + 1)
	}
	st.N = 2
	var resp probe.Response
	resp.Answer(&probe.Request{AllHops: true, Seq: 77, SendTS: 123456789}, &st, nil, 10_000)
	rb := make([]byte, resp.Size())
	resp.Put(rb)

	frames := [][]byte{
		stamped(t, intmd.New(), 2),
		stamped(t, ifa.New(), 2),
		stamped(t, hpcchop.New(), 2),
		probeFrameBytes(roce.OpTelemetryRequest, req),
		probeFrameBytes(roce.OpTelemetryResponse, rb),
		labRateHPCC(t),
		stamped(t, labSignal(intmd.New(), telemetry.RequestDSCPINT), 1), // what a lab's soft-RNICs send
		stamped(t, labSignal(intmd.New(), telemetry.EchoDSCP), 1),
		stamped(t, labSignal(hpcchop.New(), telemetry.EchoDSCP), 1),
		stamped(t, labSignal(ifa.New(), telemetry.EchoProtocol), 1),
	}
	pcap := writePcap(t, frames)
	extra := []string{"-X", "lua_script:" + luaScript(t), "-o", "udp.try_heuristic_first:TRUE"}
	h1, h2 := telemetrytest.Hop(1), telemetrytest.Hop(2)
	// Stacks are newest first on the wire: hop 2, then hop 1.
	checks := []struct {
		frame int
		field string
		want  []uint64
	}{
		{0, "rocelab.int.remaining_hop_count", []uint64{6}},
		{0, "rocelab.int.hop_ml", []uint64{12}},
		{0, "rocelab.int.instruction_bitmap", []uint64{uint64(intmd.HPCCInstructions)}},
		{0, "rocelab.int.node_id", []uint64{uint64(h2.SwitchID), uint64(h1.SwitchID)}},
		{0, "rocelab.int.l1_ingress_port", []uint64{uint64(h2.IngressPort), uint64(h1.IngressPort)}},
		{0, "rocelab.int.l1_egress_port", []uint64{uint64(h2.PortID), uint64(h1.PortID)}},
		{0, "rocelab.int.queue_occupancy", []uint64{h2.QLen, h1.QLen}},
		{0, "rocelab.int.egress_ts", []uint64{h2.TS, h1.TS}},
		{0, "rocelab.int.tx_bytes", []uint64{h2.TxBytes, h1.TxBytes}},
		{0, "rocelab.int.line_rate_mbps", []uint64{h2.Rate / 1e6, h1.Rate / 1e6}},
		{1, "rocelab.ifa.next_header", []uint64{17}},
		{1, "rocelab.ifa.hop_limit", []uint64{6}},
		{1, "rocelab.ifa.current_length", []uint64{16}},
		{1, "rocelab.ifa.device_id", []uint64{uint64(h2.SwitchID), uint64(h1.SwitchID)}},
		{1, "rocelab.ifa.egress_port", []uint64{uint64(h2.PortID), uint64(h1.PortID)}},
		{1, "rocelab.ifa.rx_ts_ns", []uint64{h2.IngressTS, h1.IngressTS}},
		{1, "rocelab.ifa.residence_ns", []uint64{h2.TS - h2.IngressTS, h1.TS - h1.IngressTS}},
		{1, "rocelab.ifa.tx_bytes", []uint64{h2.TxBytes, h1.TxBytes}},
		{1, "rocelab.ifa.queue_depth", []uint64{h2.QLen, h1.QLen}},
		{2, "rocelab.hpcc.nhop", []uint64{2}},
		{2, "rocelab.hpcc.time_ns", []uint64{h1.TS, h2.TS}},
		{2, "rocelab.hpcc.tx_bytes", []uint64{h1.TxBytes, h2.TxBytes}},
		{2, "rocelab.hpcc.qlen_bytes", []uint64{h1.QLen, h2.QLen}},
		{2, "rocelab.hpcc.rate_bps", []uint64{h1.Rate, h2.Rate}},
		{3, "rocelab.probe.opcode", []uint64{0xC0}},
		{3, "rocelab.probe.seq", []uint64{77}},
		{3, "rocelab.probe.send_ts", []uint64{123456789}},
		{4, "rocelab.probe.opcode", []uint64{0xC1}},
		{4, "rocelab.probe.records", []uint64{2}},
		{4, "rocelab.probe.switch_id", []uint64{uint64(h1.SwitchID), uint64(h2.SwitchID)}},
		{4, "rocelab.probe.qlen_bytes", []uint64{h1.QLen, h2.QLen}},
		{4, "rocelab.probe.bw_bps", []uint64{h1.Rate, h2.Rate}},
		{5, "rocelab.hpcc.rate_table", []uint64{1}},
		{5, "rocelab.hpcc.rate_code", []uint64{hpcchop.EscapeCode, 2}},
		{5, "rocelab.hpcc.rate_bps", []uint64{10e9, h2.Rate}},
		{6, "rocelab.int.node_id", []uint64{uint64(h1.SwitchID)}},
		{7, "rocelab.int.node_id", []uint64{uint64(h1.SwitchID)}},
		{8, "rocelab.hpcc.tx_bytes", []uint64{h1.TxBytes}},
		{9, "rocelab.ifa.device_id", []uint64{uint64(h1.SwitchID)}},
	}
	// One column per field: tshark prints a field given twice in one column only.
	var fields []string
	col := map[string]int{}
	for _, c := range checks {
		if _, ok := col[c.field]; !ok {
			col[c.field] = len(fields)
			fields = append(fields, c.field)
		}
	}
	rows := tsharkFields(t, tshark, pcap, extra, fields...)
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	for _, c := range checks {
		got := rows[c.frame][col[c.field]]
		if len(got) != len(c.want) {
			t.Errorf("frame %d %s: tshark %v, rocelab wrote %v", c.frame+1, c.field, got, c.want)
			continue
		}
		for k, w := range c.want {
			if num(t, got[k]) != w {
				t.Errorf("frame %d %s[%d]: tshark %s, rocelab wrote %d", c.frame+1, c.field, k, got[k], w)
			}
		}
	}
}
