package conformance

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/decode"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/probe"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// Signals are the telemetry signalling values the suites' codecs use: set them before
// calling Suites (rocelab conformance --int-dscp, --hpcc-dscp, --ifa-protocol).
var Signals = decode.DefaultSignals()

// newINT, newHPCC and newIFA return the codecs' default profiles under Signals.
func newINT() *intmd.Codec    { c := intmd.New(); c.DSCP = Signals.INTDSCP; return c }
func newHPCC() *hpcchop.Codec { c := hpcchop.New(); c.DSCP = Signals.HPCCDSCP; return c }
func newIFA() *ifa.Codec      { c := ifa.New(); c.Protocol = Signals.IFAProtocol; return c }

// rxeCaptures are the kernel rxe captures the roce suite replays.
var rxeCaptures = []string{"rc_pingpong", "rc_pingpong_ipv6", "ud_pingpong", "write_bw", "read_bw",
	"send_lat", "atomic_bw", "write_bw_rdmacm", "rping"}

func roceSuite() Suite {
	s := Suite{Name: "roce", Doc: "RoCEv2 frames of the Linux kernel's rxe and ConnectX hardware: decode, ICRC, rebuild byte for byte"}
	for _, name := range rxeCaptures {
		s.Cases = append(s.Cases, Case{Name: "rxe/" + name, Run: func() error { return checkCapture(name) }})
	}
	s.Cases = append(s.Cases, Case{Name: "connectx4lx/cnp", Run: checkCNP})
	return s
}

// checkCapture decodes every RoCEv2 frame of an rxe capture, verifies its ICRC and
// rebuilds it with roce.Builder.
func checkCapture(name string) error {
	dir, err := roceVectorDir()
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, "rxe", name+".pcap"))
	if err != nil {
		return err
	}
	defer f.Close()
	var p roce.Packet
	var b roce.Builder
	buf := make([]byte, 9000)
	n := 0
	err = decode.ReadFrames(f, func(fr *decode.Frame) error {
		i, frame := fr.Index, fr.Data
		if err := p.Decode(frame); errors.Is(err, roce.ErrNotRoCE) {
			return nil
		} else if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		if err := p.VerifyICRC(); err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		b.From(&p)
		m, err := b.Build(buf)
		if err != nil {
			return fmt.Errorf("frame %d: rebuild: %w", i, err)
		}
		end := len(frame) // the IP packet's end: Builder writes no Ethernet padding
		if l, err := roce.Locate(frame); err == nil && l.IPVersion != 0 {
			end = l.End
		}
		if !bytes.Equal(buf[:m], frame[:end]) {
			return fmt.Errorf("frame %d: rebuilt frame differs from the capture", i)
		}
		n++
		return nil
	})
	if err == nil && n == 0 {
		err = errors.New("no RoCEv2 frames in the capture")
	}
	return err
}

func checkCNP() error {
	dir, err := roceVectorDir()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cnp-connectx4lx.hex"))
	if err != nil {
		return err
	}
	frame, err := parseHex(string(raw))
	if err != nil {
		return err
	}
	var p roce.Packet
	if err := p.Decode(frame); err != nil {
		return err
	}
	if p.BTH.Opcode() != 0x81 || !p.BTH.BECN() {
		return fmt.Errorf("opcode %v BECN %v, want CNP with BECN", p.BTH.Opcode(), p.BTH.BECN())
	}
	return p.VerifyICRC()
}

// golden checks that after Request and one push of telemetrytest.Hop(1) the bytes at
// off equal the vector.
func golden(c telemetry.Codec, ipv6 bool, vector string, off int, push bool) error {
	want, err := Vector(vector)
	if err != nil {
		return err
	}
	f, err := c.Request(telemetrytest.RoCEFrame(ipv6))
	if err != nil {
		return err
	}
	if push {
		h := telemetrytest.Hop(1)
		if f, _, err = c.Push(f, &h); err != nil {
			return err
		}
	}
	if off+len(want) > len(f) {
		return fmt.Errorf("frame of %d bytes too short for the %d-byte vector", len(f), len(want))
	}
	if got := f[off : off+len(want)]; !bytes.Equal(got, want) {
		return fmt.Errorf("bytes differ from %s:\n got %s\nwant %s", vector, hex.EncodeToString(got), hex.EncodeToString(want))
	}
	return nil
}

// roundTrip is telemetrytest.RoundTrip over IPv4 and IPv6 (IOAM: IPv6 only).
func roundTrip(c telemetry.Codec, dec telemetrytest.DecodeFunc, families []bool, n int) error {
	for _, v6 := range families {
		if err := telemetrytest.RoundTrip(c, dec, v6, n, telemetrytest.CheckFields); err != nil {
			return fmt.Errorf("ipv6=%v: %w", v6, err)
		}
	}
	return nil
}

// overflow pushes hops until want is reported at push number at (1-based), checking
// every earlier push was Pushed, then returns the frame for header checks.
func overflow(c telemetry.Codec, ipv6 bool, at int, want telemetry.Status) ([]byte, error) {
	f, err := c.Request(telemetrytest.RoCEFrame(ipv6))
	if err != nil {
		return nil, err
	}
	h := telemetrytest.Hop(1)
	for i := 1; i <= at; i++ {
		var st telemetry.Status
		if f, st, err = c.Push(f, &h); err != nil {
			return nil, err
		}
		if exp := map[bool]telemetry.Status{true: want, false: telemetry.Pushed}[i == at]; st != exp {
			return nil, fmt.Errorf("push %d: %v, want %v", i, st, exp)
		}
	}
	return f, nil
}

var both = []bool{false, true}

func intSuite() Suite {
	md := func(f []byte, st *telemetry.Stack) error { _, err := newINT().Decode(f, st); return err }
	return Suite{Name: "int", Doc: "P4.org INT v2.1 INT-MD and INT-MX over UDP", Cases: []Case{
		{"md/golden-hop", func() error { return golden(newINT(), false, "int-md-hop1.hex", 42, true) }},
		{"mx/golden-header", func() error { c := newINT(); c.MX = true; return golden(c, false, "int-mx.hex", 42, false) }},
		{"md/round-trip-8-hops", func() error { return roundTrip(newINT(), md, both, 8) }},
		{"md/every-instruction-bit", func() error {
			c := &intmd.Codec{DSCP: Signals.INTDSCP, Instructions: 0xFFFF, MaxHops: 4}
			return roundTrip(c, func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }, both, 4)
		}},
		{"md/remaining-hop-count-0-sets-E", func() error {
			c := newINT()
			c.MaxHops = 3
			f, err := overflow(c, false, 4, telemetry.HopCountExceeded)
			if err != nil {
				return err
			}
			var st telemetry.Stack
			h, err := c.Decode(f, &st)
			if err != nil || !h.E || h.M || st.N != 3 {
				return fmt.Errorf("got E=%v M=%v hops=%d err=%v, want E set, 3 hops", h.E, h.M, st.N, err)
			}
			return nil
		}},
		{"md/mtu-sets-M", func() error {
			c := newINT()
			base, _ := c.Request(telemetrytest.RoCEFrame(false))
			c.MTU = len(base) - roce.EthernetSize + 2*48
			f, err := overflow(c, false, 3, telemetry.MTUExceeded)
			if err != nil {
				return err
			}
			var st telemetry.Stack
			h, _ := c.Decode(f, &st)
			if !h.M || h.E || st.N != 2 {
				return fmt.Errorf("got M=%v E=%v hops=%d, want M set, 2 hops", h.M, h.E, st.N)
			}
			return nil
		}},
		{"mx/no-stack", func() error {
			c := newINT()
			c.MX = true
			_, err := overflow(c, false, 1, telemetry.NotStacked)
			return err
		}},
	}}
}

func ioamSuite() Suite {
	codec := func(inc bool, tt uint32, nodes int) *ioam.Codec {
		c := ioam.New()
		c.Incremental, c.TraceType, c.Nodes = inc, tt, nodes
		return c
	}
	dec := func(c *ioam.Codec) telemetrytest.DecodeFunc {
		return func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }
	}
	s := Suite{Name: "ioam", Doc: "IOAM trace options in IPv6 Hop-by-Hop (RFC 9197, RFC 9486)", Cases: []Case{
		{"preallocated/golden-node", func() error {
			return golden(codec(false, ioam.HPCCTraceType, 2), true, "ioam-preallocated-hop1.hex", 54, true)
		}},
	}}
	for _, inc := range both {
		kind := map[bool]string{false: "preallocated", true: "incremental"}[inc]
		for _, tt := range []struct {
			name string
			bits uint32
		}{{"hpcc-profile", ioam.HPCCTraceType}, {"bits-0-to-21", 0xFFFFFC}, {"wide-formats", ioam.TraceHopLimNodeIDW | ioam.TraceIfIDsWide | ioam.TraceNSDataWide | ioam.TraceBufferOcc}} {
			s.Cases = append(s.Cases, Case{kind + "/round-trip-" + tt.name, func() error {
				c := codec(inc, tt.bits, 2)
				return roundTrip(c, dec(c), []bool{true}, 2)
			}})
		}
		s.Cases = append(s.Cases, Case{kind + "/no-room-sets-overflow", func() error {
			c := codec(inc, ioam.HPCCTraceType, 2)
			f, err := overflow(c, true, 3, telemetry.Overflow)
			if err != nil {
				return err
			}
			var st telemetry.Stack
			h, _ := c.Decode(f, &st)
			if !h.Overflow || st.N != 2 {
				return fmt.Errorf("overflow=%v nodes=%d, want overflow, 2 nodes", h.Overflow, st.N)
			}
			return nil
		}})
		s.Cases = append(s.Cases, Case{kind + "/opaque-state-snapshot", func() error {
			c := &ioam.Codec{Namespace: 9, TraceType: ioam.TraceHopLimNodeID | ioam.TraceOpaque, Nodes: 2, OpaqueSchema: 0x123456, OpaqueWords: 1, Incremental: inc}
			f, _ := c.Request(telemetrytest.RoCEFrame(true))
			h := telemetrytest.Hop(1)
			h.Opaque = []byte{0xDE, 0xAD, 0xBE, 0xEF}
			f, st, err := c.Push(f, &h)
			if err != nil || st != telemetry.Pushed {
				return fmt.Errorf("push: %v %v", st, err)
			}
			var s telemetry.Stack
			if _, err := c.Decode(f, &s); err != nil || s.N != 1 || s.Hops[0].OpaqueID != 0x123456 || !bytes.Equal(s.Hops[0].Opaque, h.Opaque) {
				return fmt.Errorf("decoded %d nodes, opaque %x schema %#x: %v", s.N, s.Hops[0].Opaque, s.Hops[0].OpaqueID, err)
			}
			return nil
		}})
	}
	return s
}

func ifaSuite() Suite {
	dec := func(f []byte, st *telemetry.Stack) error { _, err := newIFA().Decode(f, st); return err }
	hdr := func(c *ifa.Codec, f []byte) (ifa.Header, int) {
		var st telemetry.Stack
		h, _ := c.Decode(f, &st)
		return h, st.N
	}
	return Suite{Name: "ifa", Doc: "IFA 2.0 (draft-kumar-ippm-ifa)", Cases: []Case{
		{"golden-hop", func() error {
			// The vector is the IFA header (after IP) followed by what comes after UDP.
			want, _ := Vector("ifa-hop1.hex")
			f, _ := newIFA().Request(telemetrytest.RoCEFrame(false))
			h := telemetrytest.Hop(1)
			f, _, _ = newIFA().Push(f, &h)
			got := append(append([]byte{}, f[34:38]...), f[46:46+len(want)-4]...)
			if !bytes.Equal(got, want) {
				return fmt.Errorf("bytes differ:\n got %x\nwant %x", got, want)
			}
			if f[23] != Signals.IFAProtocol {
				return fmt.Errorf("IP protocol %d, want %d", f[23], Signals.IFAProtocol)
			}
			return nil
		}},
		{"round-trip-8-hops", func() error { return roundTrip(newIFA(), dec, both, 8) }},
		{"max-length-sets-MF", func() error {
			c := newIFA()
			c.MaxLength = 16
			f, err := overflow(c, false, 3, telemetry.MaxLengthReached)
			if err != nil {
				return err
			}
			if h, n := hdr(c, f); h.Flags&ifa.FlagMF == 0 || n != 2 {
				return fmt.Errorf("flags %#x hops %d, want MF and 2 hops", h.Flags, n)
			}
			return nil
		}},
		{"hop-limit-0-adds-nothing", func() error {
			c := newIFA()
			c.HopLimit = 2
			f, err := overflow(c, false, 3, telemetry.HopLimitReached)
			if err != nil {
				return err
			}
			if h, n := hdr(c, f); h.HopLimit != 0 || n != 2 {
				return fmt.Errorf("hop limit %d hops %d, want 0 and 2", h.HopLimit, n)
			}
			return nil
		}},
		{"configurable-protocol", func() error {
			c := newIFA()
			c.Protocol = 252
			return roundTrip(c, func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }, both, 2)
		}},
	}}
}

// hpccSuite checks the HPCC hop in its own compact format and the HPCC profile of
// every format: what a switch measured comes back as the hpcc.Hop HPCC computes with.
func hpccSuite() Suite {
	s := Suite{Name: "hpcc-int", Doc: "HPCC's per-hop inputs (ts, qlen, txBytes, B, switch, port) in every format", Cases: []Case{
		{"compact/golden-word", func() error {
			want, _ := Vector("hpcc-word.hex")
			w := hpcchop.Word{RateCode: 2, Time: 0x123456, Bytes: 0xABCDE, QLen: 0x1F0F0}.Pack()
			got := make([]byte, 8)
			for i := range got {
				got[i] = byte(w >> (8 * i))
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("got %x want %x", got, want)
			}
			return nil
		}},
		{"compact/five-hop-ring-wraps", func() error {
			_, err := overflow(newHPCC(), false, 6, telemetry.Wrapped)
			return err
		}},
		{"compact/deltas-across-wrap", func() error {
			wrap := hpcc.CompactWrap(1)
			c := newHPCC()
			var prev, cur telemetry.Stack
			a, b := telemetrytest.Hop(1), telemetrytest.Hop(1)
			a.TS, a.TxBytes = 1<<24-100, (1<<20-1)*128
			b.TS, b.TxBytes = a.TS+300, a.TxBytes+128*10
			for _, x := range []struct {
				h  *telemetry.Hop
				st *telemetry.Stack
			}{{&a, &prev}, {&b, &cur}} {
				f, _ := c.Request(telemetrytest.RoCEFrame(false))
				f, _, _ = c.Push(f, x.h)
				if _, err := c.Decode(f, x.st); err != nil {
					return err
				}
			}
			if dt, db := wrap.TimeDelta(cur.Hops[0].Hop, prev.Hops[0].Hop), wrap.TxBytesDelta(cur.Hops[0].Hop, prev.Hops[0].Hop); dt != 300 || db != 1280 {
				return fmt.Errorf("deltas %d ns, %d bytes, want 300 and 1280", dt, db)
			}
			return nil
		}},
	}}
	profiles := []struct {
		name  string
		codec telemetry.Codec
		ipv6  bool
		dec   telemetrytest.DecodeFunc
		// fields the profile carries exactly
		want telemetry.Field
	}{
		{"int-md", newINT(), false, func(f []byte, st *telemetry.Stack) error { _, err := newINT().Decode(f, st); return err },
			telemetry.FieldTS | telemetry.FieldQLen | telemetry.FieldTxBytes | telemetry.FieldRate | telemetry.FieldSwitchID | telemetry.FieldEgressPort},
		{"ioam", ioam.New(), true, func(f []byte, st *telemetry.Stack) error { _, err := ioam.New().Decode(f, st); return err },
			telemetry.FieldTS | telemetry.FieldQLen | telemetry.FieldTxBytes | telemetry.FieldRate | telemetry.FieldSwitchID | telemetry.FieldEgressPort},
		{"ifa", newIFA(), false, func(f []byte, st *telemetry.Stack) error { _, err := newIFA().Decode(f, st); return err },
			telemetry.FieldTS | telemetry.FieldQLen | telemetry.FieldTxBytes | telemetry.FieldRate | telemetry.FieldSwitchID | telemetry.FieldEgressPort},
		{"hpcc-compact", newHPCC(), false, func(f []byte, st *telemetry.Stack) error { _, err := newHPCC().Decode(f, st); return err },
			telemetry.FieldTS | telemetry.FieldQLen | telemetry.FieldTxBytes | telemetry.FieldRate},
	}
	for _, p := range profiles {
		s.Cases = append(s.Cases, Case{"profile/" + p.name, func() error {
			return telemetrytest.RoundTrip(p.codec, p.dec, p.ipv6, 3, func(got, want *telemetry.Hop) error {
				if missing := p.want &^ got.Has; missing != 0 {
					return fmt.Errorf("profile lacks fields %#x", missing)
				}
				return telemetrytest.CheckFields(got, want)
			})
		}})
	}
	return s
}

func probeSuite() Suite {
	return Suite{Name: "probe", Doc: "rocelab telemetry request/response packets (BTH opcodes 0xC0/0xC1)", Cases: []Case{
		{"request/golden-body", func() error {
			want, _ := Vector("probe-request.hex")
			got := make([]byte, probe.RequestSize)
			(&probe.Request{AllHops: true, Seq: 7, SendTS: 0x0102030405060708}).Put(got)
			if !bytes.Equal(got, want) {
				return fmt.Errorf("got %x want %x", got, want)
			}
			return nil
		}},
		{"response/golden-body", func() error {
			want, _ := Vector("probe-response.hex")
			var r probe.Response
			if err := r.Parse(want); err != nil {
				return err
			}
			got := make([]byte, r.Size())
			r.Put(got)
			if !bytes.Equal(got, want) || r.N != 1 || r.Records[0].Index != 1 || r.Records[0].Hop.SwitchID != 0x102 {
				return fmt.Errorf("response %+v does not round-trip", r)
			}
			return nil
		}},
		{"request/frame-with-int", func() error { return probeFrame(newINT(), false) }},
		{"request/frame-with-ioam", func() error { return probeFrame(ioam.New(), true) }},
		{"request/frame-with-ifa", func() error { return probeFrame(newIFA(), false) }},
		{"request/frame-with-hpcc", func() error { return probeFrame(newHPCC(), false) }},
	}}
}

// probeFrame builds a telemetry request on the flow's headers, lets it collect three
// hops, strips the telemetry as the responder does and checks the RoCEv2 packet and
// its body.
func probeFrame(c telemetry.Codec, ipv6 bool) error {
	b := telemetrytest.Builder(ipv6)
	b.BTH.Opcode = roce.OpTelemetryRequest
	body := make([]byte, probe.RequestSize)
	(&probe.Request{Seq: 99, SendTS: 123456789}).Put(body)
	b.Payload = body
	orig := telemetrytest.Frame(b)
	keep := bytes.Clone(orig)
	f, err := c.Request(orig)
	if err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		h := telemetrytest.Hop(i)
		if f, _, err = c.Push(f, &h); err != nil {
			return err
		}
	}
	if f, err = c.Strip(f); err != nil {
		return err
	}
	if !bytes.Equal(f, keep) {
		return errors.New("stripped probe differs from the one sent")
	}
	var p roce.Packet
	if err := p.Decode(f); err != nil {
		return err
	}
	if err := p.VerifyICRC(); err != nil {
		return err
	}
	var r probe.Request
	if err := r.Parse(p.Payload); err != nil || r.Seq != 99 || r.SendTS != 123456789 {
		return fmt.Errorf("body %+v: %v", r, err)
	}
	return nil
}
