package intmd

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// INT-MD v2.1 over UDP on an IPv4 RoCEv2 packet (original DSCP 26) after one transit
// hop with rocelab's HPCC profile, the bytes right after the UDP header (INT spec
// v2.1 figures 5.7 and 5.8; values of telemetrytest.Hop(1)):
//
//	10 0f 00 68   shim: Type 1 (MD), NPT 0, Length 15 words, original DSCP 26
//	20 00 00 0c   Ver 2, D/E/M 0, Hop ML 12
//	07            ... Remaining Hop Count 7 (8 − 1): folded into the word above
//	fd 00 48 50   Instruction Bitmap 0xFD00 (bits 0–5, 7), Domain Specific ID 0x4850
//	c0 00 00 00   DS Instruction 0xC000 (tx bytes, line rate), DS Flags 0
//	00 00 01 01   node ID 0x101
//	00 15 00 0b   L1 ingress 21, egress 11
//	00 00 01 f4   hop latency 500 ns
//	01 01 38 80   queue ID 1, occupancy 80000
//	00 00 00 00 00 0f 44 34   ingress timestamp 1000500 ns
//	00 00 00 00 00 0f 46 28   egress timestamp 1001000 ns
//	ff ff ff ff   egress Tx utilization: not supplied (all ones)
//	00 00 00 00 00 c3 50 00   DS: tx bytes 12800000
//	00 01 86 a0   DS: line rate 100000 Mb/s
const goldenMD = "100f0068" + "20000c07" + "fd004850" + "c0000000" +
	"00000101" + "0015000b" + "000001f4" + "01013880" + "00000000000f4434" + "00000000000f4628" +
	"ffffffff" + "0000000000c35000" + "000186a0"

func TestGolden(t *testing.T) {
	c := New()
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	if f, _, err = c.Push(f, &h); err != nil {
		t.Fatal(err)
	}
	off := 14 + 20 + 8
	if got := hex.EncodeToString(f[off : off+len(goldenMD)/2]); got != goldenMD {
		t.Fatalf("INT-MD block\n got %s\nwant %s", got, goldenMD)
	}
	if f[15]>>2 != DefaultDSCP {
		t.Fatalf("DSCP %#x", f[15]>>2)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		c := New()
		dec := func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }
		if err := telemetrytest.RoundTrip(c, dec, v6, 8, telemetrytest.CheckFields); err != nil {
			t.Fatalf("ipv6=%v: %v", v6, err)
		}
	}
}

// Every bit of the bitmap, with an unknown domain: the node writes all ones where it
// has nothing (reserved bits, checksum complement) and decode skips them.
func TestAllInstructions(t *testing.T) {
	c := &Codec{DSCP: DefaultDSCP, Instructions: 0xFFFF, DomainID: 7, DSInstructions: 0xFFFF, MaxHops: 3}
	dec := func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }
	if err := telemetrytest.RoundTrip(c, dec, false, 3, telemetrytest.CheckFields); err != nil {
		t.Fatal(err)
	}
	if HopWords(0xFFFF, 7, 0xFFFF) != 19 {
		t.Fatalf("HopWords(all) = %d, want 19", HopWords(0xFFFF, 7, 0xFFFF))
	}
}

func TestRemainingHopCountExceeded(t *testing.T) {
	c := New()
	c.MaxHops = 2
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	for i, want := range []telemetry.Status{telemetry.Pushed, telemetry.Pushed, telemetry.HopCountExceeded} {
		var st telemetry.Status
		var err error
		if f, st, err = c.Push(f, &h); err != nil || st != want {
			t.Fatalf("push %d: %v %v, want %v", i, st, err, want)
		}
	}
	var s telemetry.Stack
	hd, _ := c.Decode(f, &s)
	if !hd.E || hd.M || s.N != 2 || hd.RemainingHops != 0 {
		t.Fatalf("after exceeding: %+v, %d hops", hd, s.N)
	}
}

func TestMTUExceeded(t *testing.T) {
	c := New()
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	c.MTU = len(f) - 14 + 48 // room for exactly one 48-byte hop
	h := telemetrytest.Hop(1)
	f, st, _ := c.Push(f, &h)
	if st != telemetry.Pushed {
		t.Fatalf("first push: %v", st)
	}
	f, st, _ = c.Push(f, &h)
	var s telemetry.Stack
	hd, _ := c.Decode(f, &s)
	if st != telemetry.MTUExceeded || !hd.M || hd.E || s.N != 1 || hd.RemainingHops != 7 {
		t.Fatalf("status %v header %+v hops %d", st, hd, s.N)
	}
	// A full buffer counts as the MTU too.
	c.MTU = 0
	full := f[:len(f):len(f)]
	if _, st, _ = c.Push(full, &h); st != telemetry.MTUExceeded {
		t.Fatalf("push into a full buffer: %v", st)
	}
}

func TestMX(t *testing.T) {
	c := New()
	c.MX = true
	orig := telemetrytest.RoCEFrame(false)
	keep := append([]byte(nil), orig...)
	f, err := c.Request(orig)
	if err != nil {
		t.Fatal(err)
	}
	// 30 03 00 68 | 20 00 00 00 | fd 00 48 50 | c0 00 00 00
	if got, want := hex.EncodeToString(f[42:58]), "300300682000000"+"0fd004850c0000000"; got != want {
		t.Fatalf("INT-MX block\n got %s\nwant %s", got, want)
	}
	h := telemetrytest.Hop(1)
	if _, st, _ := c.Push(f, &h); st != telemetry.NotStacked {
		t.Fatalf("MX push: %v", st)
	}
	var s telemetry.Stack
	if hd, err := c.Decode(f, &s); err != nil || s.Format != telemetry.FormatINTMX || hd.Instructions != HPCCInstructions {
		t.Fatalf("decode: %+v %v", hd, err)
	}
	if f, _ = c.Strip(f); string(f) != string(keep) {
		t.Fatal("strip did not restore the frame")
	}
}

// An INT-MD header whose instructions need more words than its Hop ML (here Hop ML 0
// with the HPCC bitmap: one UDP datagram any host can send with the INT DSCP) is
// malformed: Push must refuse it and leave the frame as it was, not write a hop
// into an empty slice.
func TestPushHopMLShort(t *testing.T) {
	c := New()
	for _, ml := range []byte{0, 1, 11} {
		f, err := c.Request(telemetrytest.RoCEFrame(false))
		if err != nil {
			t.Fatal(err)
		}
		const hopML = roce.EthernetSize + roce.IPv4MinSize + roce.UDPSize + ShimSize + 2
		f[hopML] = f[hopML]&^0x1F | ml
		keep := append([]byte(nil), f...)
		h := telemetrytest.Hop(1)
		out, st, err := c.Push(f, &h)
		if !errors.Is(err, telemetry.ErrMalformed) || !bytes.Equal(out, keep) {
			t.Errorf("Hop ML %d: push = %v, %v; frame changed: %v", ml, st, err, !bytes.Equal(out, keep))
		}
		var s telemetry.Stack
		if _, err := c.Decode(f, &s); !errors.Is(err, telemetry.ErrMalformed) {
			t.Errorf("Hop ML %d: decode = %v", ml, err)
		}
	}
}

func TestNotINT(t *testing.T) {
	c := New()
	var s telemetry.Stack
	if _, err := c.Decode(telemetrytest.RoCEFrame(false), &s); !errors.Is(err, telemetry.ErrNoTelemetry) {
		t.Fatalf("plain frame: %v", err)
	}
}

// oneHopFrame is a RoCE frame with c's telemetry request and one hop pushed: the
// fuzzers' seed.
func oneHopFrame(c *Codec) []byte {
	fr, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	fr, _, _ = c.Push(fr, &h)
	return fr
}

func FuzzDecode(f *testing.F) {
	c := New()
	h := telemetrytest.Hop(1)
	f.Add(oneHopFrame(c))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s telemetry.Stack
		if _, err := c.Decode(b, &s); err != nil {
			return
		}
		if x, err := c.find(b); err == nil && x.shim.Type() == TypeMD && MD(x.hdr).HopML() == 0 {
			// A request for no per-hop data is well formed and decodes, but a switch has
			// nothing to record in it: Push refuses it and the frame goes on unstamped.
			if _, st, err := c.Push(b, &h); err == nil && st == telemetry.Pushed {
				t.Fatal("Push recorded a hop of Hop ML 0")
			}
			return
		}
		b = append(b[:len(b):len(b)], make([]byte, 64)...)[:len(b)]
		b, _, err := c.Push(b, &h)
		if err != nil {
			t.Fatalf("push after decode: %v", err)
		}
		if _, err := c.Strip(b); err != nil {
			t.Fatalf("strip after decode: %v", err)
		}
	})
}

// BenchmarkPush measures a request, one push and a strip.
func BenchmarkPush(b *testing.B) {
	c := New()
	c.MaxHops = 255
	f := telemetrytest.RoCEFrame(false)
	h := telemetrytest.Hop(1)
	b.ReportAllocs()
	for b.Loop() {
		f, _ = c.Request(f)
		f, _, _ = c.Push(f, &h)
		f, _ = c.Strip(f)
	}
}

func BenchmarkDecode(b *testing.B) {
	c := New()
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	for range 4 {
		f, _, _ = c.Push(f, &h)
	}
	var s telemetry.Stack
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(f, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzPush stamps arbitrary frames as a switch port does: any host can send any frame
// with the signalling value, and no frame may panic the switch or be changed by a
// push that fails (seeds: testdata/fuzz/FuzzPush).
func FuzzPush(f *testing.F) {
	c := New()
	decode := func(b []byte, s *telemetry.Stack) error { _, err := c.Decode(b, s); return err }
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := telemetrytest.CheckPush(c, decode, b); err != nil {
			t.Fatal(err)
		}
	})
}

// All-ones metadata was not supplied: it is absent, and the L2 port IDs do not
// override the L1 ones when they are all ones.
func TestAllOnesNotSupplied(t *testing.T) {
	c := &Codec{DSCP: DefaultDSCP, Instructions: InstNodeID | InstL1Ports | InstL2Ports, MaxHops: 2}
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	if f, _, err = c.Push(f, &h); err != nil {
		t.Fatal(err)
	}
	const stack = roce.EthernetSize + roce.IPv4MinSize + roce.UDPSize + ShimSize + MDHeaderSize
	for i := range 4 {
		f[stack+i] = 0xFF // node ID
	}
	for i := 8; i < 16; i++ {
		f[stack+i] = 0xFF // L2 ingress and egress
	}
	var s telemetry.Stack
	if _, err := c.Decode(f, &s); err != nil || s.N != 1 {
		t.Fatalf("%d hops, %v", s.N, err)
	}
	got := &s.Hops[0]
	if got.Has&telemetry.FieldSwitchID != 0 || got.IngressPort != h.IngressPort || got.PortID != h.PortID ||
		got.Has&(telemetry.FieldIngressPort|telemetry.FieldEgressPort) != telemetry.FieldIngressPort|telemetry.FieldEgressPort {
		t.Errorf("hop %+v", got)
	}
}

// PushHops gives byte for byte the frame and the error of Push called on each hop in
// turn: when every hop fits, when the hop count runs out part way (E), when the frame
// has room for only some (M), for no hops and for INT-MX.
func TestPushHopsIsPushes(t *testing.T) {
	hops := []telemetry.Hop{telemetrytest.Hop(1), telemetrytest.Hop(2), telemetrytest.Hop(3), telemetrytest.Hop(4)}
	cases := []struct {
		name    string
		codec   func() *Codec
		hops    int
		room    int // spare capacity
		wantAll bool
	}{
		{"all fit", New, 4, telemetrytest.Tailroom, true},
		{"none", New, 0, telemetrytest.Tailroom, true},
		{"hop count", func() *Codec { c := New(); c.MaxHops = 2; return c }, 4, telemetrytest.Tailroom, false},
		{"room for two", New, 4, 2 * 48, false},
		{"mx", func() *Codec { c := New(); c.MX = true; return c }, 3, telemetrytest.Tailroom, false},
	}
	for _, tc := range cases {
		c := tc.codec()
		req, err := c.Request(append(make([]byte, 0, telemetrytest.BufSize), telemetrytest.RoCEFrame(false)...))
		if err != nil {
			t.Fatal(err)
		}
		req = req[: len(req) : len(req)+tc.room]
		one := append(make([]byte, 0, cap(req)), req...)
		var wantErr error
		for i := range tc.hops {
			if one, _, wantErr = c.Push(one, &hops[i]); wantErr != nil {
				break
			}
		}
		all, err := c.PushHops(append(make([]byte, 0, cap(req)), req...), hops[:tc.hops])
		if !bytes.Equal(all, one) || !errors.Is(err, wantErr) && err != wantErr {
			t.Errorf("%s: PushHops gave %d bytes, %v; Push one by one %d bytes, %v", tc.name, len(all), err, len(one), wantErr)
		}
		if tc.wantAll && len(all) != len(req)+48*tc.hops {
			t.Errorf("%s: %d bytes after pushing %d hops onto %d", tc.name, len(all), tc.hops, len(req))
		}
	}
}

// FuzzDecodeStripIn: on any frame roce.Locate locates, DecodeStripIn decodes the same
// stack and leaves the same bytes as Decode then Strip, and fails where they fail,
// leaving the frame as it was.
func FuzzDecodeStripIn(f *testing.F) {
	c := New()
	f.Add(oneHopFrame(c))
	f.Add(telemetrytest.RoCEFrame(true))
	decode := func(b []byte, st *telemetry.Stack) error { _, err := c.Decode(b, st); return err }
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := telemetrytest.CheckDecodeStripIn(c, decode, c.DecodeStripIn, b); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDetached holds the block carried beside a frame to the block in it: the same
// bytes, statuses, hops and stripped frame (telemetrytest.CheckDetached), over any
// frame, up to ten hops (past Remaining Hop Count), INT-MX and an MTU that a push can
// meet; and a block of any bytes decodes or is refused without a panic.
func FuzzDetached(f *testing.F) {
	f.Add(telemetrytest.RoCEFrame(false), uint8(3), uint16(0), false)
	f.Add(telemetrytest.RoCEFrame(true), uint8(9), uint16(0), false)
	f.Add(telemetrytest.RoCEFrame(false), uint8(4), uint16(200), false)
	f.Add(telemetrytest.RoCEFrame(false), uint8(2), uint16(0), true)
	f.Fuzz(func(t *testing.T, b []byte, n uint8, mtu uint16, mx bool) {
		c := New()
		c.MTU, c.MX = int(mtu), mx
		decode := func(b []byte, s *telemetry.Stack) error { _, err := c.Decode(b, s); return err }
		hops := make([]telemetry.Hop, n%11)
		for i := range hops {
			hops[i] = telemetrytest.Hop(i + 1)
		}
		if err := telemetrytest.CheckDetached(c, decode, b, hops, 400); err != nil {
			t.Fatal(err)
		}
		var st telemetry.Stack
		blk := append(make([]byte, 0, 400), b[:min(len(b), 400)]...)
		if c.DecodeDetached(blk, &st) == nil {
			h := telemetrytest.Hop(1)
			c.PushDetached(blk, &h, 1000)
		}
	})
}
