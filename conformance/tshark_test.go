package conformance

// Independent checks: Wireshark's own dissectors (infiniband for RoCEv2 on UDP 4791,
// ipv6.opt.ioam for IOAM) decode frames rocelab wrote, and every field must match what
// `rocelab decode` reports for the same frame. Skipped, with the reason, when tshark
// is not installed (make deps-system installs it).

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/decode"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

func needTshark(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (apt-get install tshark, or make deps-system): independent decoder checks skipped")
	}
	// A home of its own: Wireshark loads the personal plugins under ~/.local (where
	// `rocelab wireshark install` puts rocelab.lua), and a second copy of rocelab's
	// dissectors next to the one under test registers every protocol twice.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	return p
}

// writePcap writes frames to a pcap file in t's temp dir.
func writePcap(t *testing.T, frames [][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1000), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// tsharkFields runs tshark over pcap and returns, per frame, the values of fields
// (each a list: a field may occur several times in a frame).
func tsharkFields(t *testing.T, tshark, pcap string, extra []string, fields ...string) [][][]string {
	t.Helper()
	args := append([]string{"-r", pcap, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,"}, extra...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark %v: %v", args, err)
	}
	var rows [][][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		var row [][]string
		for _, v := range strings.Split(line, "|") {
			if v == "" {
				row = append(row, nil)
			} else {
				row = append(row, strings.Split(v, ","))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// num parses a tshark number (decimal or 0x hex).
func num(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("tshark value %q: %v", s, err)
	}
	return v
}

func roceFrames() [][]byte {
	var frames [][]byte
	for _, v6 := range []bool{false, true} {
		b := telemetrytest.Builder(v6)
		frames = append(frames, telemetrytest.Frame(b))
		ack := *b
		ack.BTH.Opcode, ack.Payload, ack.AETH = roce.OpRCAck, nil, roce.AETHFields{Syndrome: 0x1F, MSN: 0x4242}
		frames = append(frames, telemetrytest.Frame(&ack))
		ud := *b
		ud.BTH.Opcode, ud.DETH = roce.OpUDSendOnly, roce.DETHFields{QKey: 0x11111111, SrcQP: 0x33}
		frames = append(frames, telemetrytest.Frame(&ud))
	}
	return frames
}

func TestTsharkRoCEMatchesDecode(t *testing.T) {
	tshark := needTshark(t)
	frames := roceFrames()
	fields := []string{"infiniband.bth.opcode", "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.psn",
		"infiniband.bth.a", "infiniband.bth.padcnt", "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
		"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.invariant.crc"}
	rows := tsharkFields(t, tshark, writePcap(t, frames), nil, fields...)
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	var d decode.Decoder
	for i, fr := range frames {
		r := d.Decode(i+1, fr)
		if r.BTH == nil || r.ICRCOK == nil || !*r.ICRCOK {
			t.Fatalf("frame %d: rocelab decode: %+v", i+1, r)
		}
		want := map[string]*uint64{}
		set := func(k string, v uint64) { want[k] = &v }
		set("infiniband.bth.opcode", uint64(r.BTH.Opcode))
		set("infiniband.bth.p_key", uint64(r.BTH.PKey))
		set("infiniband.bth.destqp", uint64(r.BTH.DestQP))
		set("infiniband.bth.psn", uint64(r.BTH.PSN))
		set("infiniband.bth.a", map[bool]uint64{false: 0, true: 1}[r.BTH.AckReq])
		set("infiniband.bth.padcnt", uint64(r.BTH.Pad))
		if r.RETH != nil {
			set("infiniband.reth.va", r.RETH.VA)
			set("infiniband.reth.r_key", uint64(r.RETH.RKey))
			set("infiniband.reth.dmalen", uint64(r.RETH.DMALen))
		}
		if r.AETH != nil {
			set("infiniband.aeth.syndrome", uint64(r.AETH.Syndrome))
			set("infiniband.aeth.msn", uint64(r.AETH.MSN))
		}
		if r.DETH != nil {
			set("infiniband.deth.q_key", uint64(r.DETH.QKey))
			set("infiniband.deth.srcqp", uint64(r.DETH.SrcQP))
		}
		// Wireshark reads the ICRC as a big-endian number; rocelab reports the CRC value
		// (transmitted little-endian): compare the bytes.
		c := *r.ICRC
		set("infiniband.invariant.crc", uint64(c>>24|c>>8&0xFF00|c<<8&0xFF0000|c<<24&0xFF000000))
		for j, f := range fields {
			w, got := want[f], rows[i][j]
			switch {
			case w == nil && got != nil:
				t.Errorf("frame %d: tshark has %s = %v, rocelab decode has no such field", i+1, f, got)
			case w != nil && len(got) != 1:
				t.Errorf("frame %d: tshark %s = %v, rocelab decode %d", i+1, f, got, *w)
			case w != nil && num(t, got[0]) != *w:
				t.Errorf("frame %d: %s: tshark %s, rocelab decode %d", i+1, f, got[0], *w)
			}
		}
	}
}

// ioamFrames returns RoCEv2 frames with pre-allocated IOAM traces rocelab stamped (two
// nodes each) and a non-RoCE UDP packet with a trace.
//
// Incremental traces are left out: Wireshark 4.0 skips RemainingLen words before the
// node data of an incremental trace as it does for a pre-allocated one, but RFC 9197
// §4.4.1 makes RemainingLen of an incremental trace the room still available, which
// is not in the packet — the node data starts right after the trace header. The
// conformance suite covers incremental traces by round trip.
func ioamFrames(t *testing.T) [][]byte {
	var frames [][]byte
	for _, tt := range []uint32{ioam.HPCCTraceType, ioam.TraceHopLimNodeIDW | ioam.TraceIfIDsWide | ioam.TraceQueueDepth | ioam.TraceChecksum} {
		c := ioam.New()
		c.TraceType, c.Nodes = tt, 3
		f, err := c.Request(telemetrytest.RoCEFrame(true))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			h := telemetrytest.Hop(i)
			if f, _, err = c.Push(f, &h); err != nil {
				t.Fatal(err)
			}
		}
		frames = append(frames, f)
	}
	b := telemetrytest.Builder(true)
	b.DstPort = 9999 // not RoCEv2: the trace decodes whatever the payload
	c := ioam.New()
	f, _ := c.Request(telemetrytest.Frame(b))
	h := telemetrytest.Hop(7)
	f, _, _ = c.Push(f, &h)
	return append(frames, f)
}

func TestTsharkIOAMMatchesDecode(t *testing.T) {
	tshark := needTshark(t)
	frames := ioamFrames(t)
	fields := []string{"ipv6.opt.ioam.opt_type", "ipv6.opt.ioam.trace.ns", "ipv6.opt.ioam.trace.nodelen",
		"ipv6.opt.ioam.trace.flag.o", "ipv6.opt.ioam.trace.remlen", "ipv6.opt.ioam.trace.type",
		"ipv6.opt.ioam.trace.node.hlim", "ipv6.opt.ioam.trace.node.id", "ipv6.opt.ioam.trace.node.iif",
		"ipv6.opt.ioam.trace.node.eif", "ipv6.opt.ioam.trace.node.tss", "ipv6.opt.ioam.trace.node.tsf",
		"ipv6.opt.ioam.trace.node.trdelay", "ipv6.opt.ioam.trace.node.nsdata", "ipv6.opt.ioam.trace.node.qdepth",
		"ipv6.opt.ioam.trace.node.id_wide", "ipv6.opt.ioam.trace.node.iif_wide", "ipv6.opt.ioam.trace.node.eif_wide",
		"ipv6.opt.ioam.trace.node.nsdata_wide"}
	rows := tsharkFields(t, tshark, writePcap(t, frames), nil, fields...)
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames", len(rows), len(frames))
	}
	var d decode.Decoder
	for i, fr := range frames {
		r := d.Decode(i+1, fr)
		tel, ok := r.Telemetry.(map[string]any)
		if !ok || tel["format"] != "ioam" {
			t.Fatalf("frame %d: rocelab decode found no IOAM: %+v", i+1, r.Telemetry)
		}
		if i < 2 && (r.ICRCOK == nil || !*r.ICRCOK) {
			t.Errorf("frame %d: stripped RoCEv2 packet's ICRC does not verify", i+1)
		}
		hops := tel["hops"].([]map[string]any)
		tt := tel["trace_type"].(uint32)
		// rocelab lists hops first switch first; the wire (and tshark) newest first.
		per := func(fn func(h map[string]any) (uint64, bool)) []uint64 {
			var out []uint64
			for k := len(hops) - 1; k >= 0; k-- {
				if v, ok := fn(hops[k]); ok {
					out = append(out, v)
				}
			}
			return out
		}
		bit := func(b uint32, key string, conv func(uint64) uint64) []uint64 {
			if tt&b == 0 {
				return nil
			}
			return per(func(h map[string]any) (uint64, bool) {
				v, ok := toU64(h[key])
				if conv != nil {
					v = conv(v)
				}
				return v, ok
			})
		}
		flag := uint64(0)
		if tel["overflow"].(bool) {
			flag = 1
		}
		want := map[string][]uint64{
			"ipv6.opt.ioam.opt_type":               {uint64(tel["option_type"].(uint8))},
			"ipv6.opt.ioam.trace.ns":               {uint64(tel["namespace"].(uint16))},
			"ipv6.opt.ioam.trace.nodelen":          {uint64(tel["node_len"].(int))},
			"ipv6.opt.ioam.trace.flag.o":           {flag},
			"ipv6.opt.ioam.trace.remlen":           {uint64(tel["remaining_len"].(int))},
			"ipv6.opt.ioam.trace.type":             {uint64(tt)},
			"ipv6.opt.ioam.trace.node.hlim":        append(bit(ioam.TraceHopLimNodeID, "hop_limit", nil), bit(ioam.TraceHopLimNodeIDW, "hop_limit", nil)...),
			"ipv6.opt.ioam.trace.node.id":          bit(ioam.TraceHopLimNodeID, "switch_id", nil),
			"ipv6.opt.ioam.trace.node.iif":         bit(ioam.TraceIfIDs, "ingress_port", nil),
			"ipv6.opt.ioam.trace.node.eif":         bit(ioam.TraceIfIDs, "egress_port", nil),
			"ipv6.opt.ioam.trace.node.tss":         bit(ioam.TraceTSSeconds, "ts_ns", func(v uint64) uint64 { return v / 1e9 }),
			"ipv6.opt.ioam.trace.node.tsf":         bit(ioam.TraceTSFraction, "ts_ns", func(v uint64) uint64 { return v % 1e9 }),
			"ipv6.opt.ioam.trace.node.trdelay":     bit(ioam.TraceTransitDelay, "hop_latency_ns", nil),
			"ipv6.opt.ioam.trace.node.nsdata":      bit(ioam.TraceNSData, "bw_bps", func(v uint64) uint64 { return v / 1e6 }),
			"ipv6.opt.ioam.trace.node.qdepth":      bit(ioam.TraceQueueDepth, "qlen_bytes", nil),
			"ipv6.opt.ioam.trace.node.id_wide":     bit(ioam.TraceHopLimNodeIDW, "switch_id", nil),
			"ipv6.opt.ioam.trace.node.iif_wide":    bit(ioam.TraceIfIDsWide, "ingress_port", nil),
			"ipv6.opt.ioam.trace.node.eif_wide":    bit(ioam.TraceIfIDsWide, "egress_port", nil),
			"ipv6.opt.ioam.trace.node.nsdata_wide": bit(ioam.TraceNSDataWide, "tx_bytes", nil),
		}
		for j, f := range fields {
			got := rows[i][j]
			w := want[f]
			if len(got) != len(w) {
				t.Errorf("frame %d: %s: tshark %v, rocelab decode %v", i+1, f, got, w)
				continue
			}
			for k := range w {
				if num(t, got[k]) != w[k] {
					t.Errorf("frame %d: %s[%d]: tshark %s, rocelab decode %d", i+1, f, k, got[k], w[k])
				}
			}
		}
	}
}

func toU64(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int:
		return uint64(x), true
	}
	return 0, false
}

// A capture cut right after a complete record header: tshark prints the frames before
// it and fails with "cut short in the middle of a packet"; rocelab decode reads the
// same frames and fails with decode.ErrCutShort.
func TestTsharkCutShort(t *testing.T) {
	tshark := needTshark(t)
	frames := [][]byte{telemetrytest.RoCEFrame(false), telemetrytest.RoCEFrame(true), telemetrytest.RoCEFrame(false)}
	path := writePcap(t, frames)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(whole) - len(frames[2]) // the last record's header stays whole
	if err := os.WriteFile(path, whole[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	cmd := exec.Command(tshark, "-r", path, "-T", "fields", "-e", "frame.number")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "cut short in the middle of a packet") {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	tsharkFrames := len(strings.Fields(stdout.String()))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	err = decode.ReadFrames(f, func(*decode.Frame) error { n++; return nil })
	if !errors.Is(err, decode.ErrCutShort) || n != tsharkFrames {
		t.Errorf("rocelab decode: %d frames, %v; tshark: %d frames", n, err, tsharkFrames)
	}
}
