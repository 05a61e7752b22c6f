package ioam

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// A pre-allocated IOAM trace for two nodes with rocelab's HPCC profile in an IPv6
// RoCEv2 packet, after one transit node wrote telemetrytest.Hop(1) (RFC 9197 §4.4,
// RFC 9486 §3); the bytes after the IPv6 header:
//
//	11 0a 01 00   Hop-by-Hop: next header UDP, length (10+1)·8 = 88, PadN(0)
//	31 52 00 00   option 0x31, data length 82, reserved, IOAM Option-Type 0 (pre-allocated)
//	00 01 48 09   Namespace-ID 1, NodeLen 9, flags 0, RemainingLen 9 (18 − 9)
//	fe 20 00 00   Trace-Type bits 0–6 and 10, reserved
//	00 × 36       the free slot
//	3f 00 01 01   hop limit 63, node ID 0x101
//	00 15 00 0b   ingress if 21, egress if 11
//	00 00 00 00   timestamp seconds 0
//	00 0f 46 28   timestamp fraction 1001000 ns
//	00 00 01 f4   transit delay 500 ns
//	00 01 86 a0   namespace data: line rate 100000 Mb/s
//	00 01 38 80   queue depth 80000 bytes
//	00 00 00 00 00 c3 50 00   wide namespace data: tx bytes 12800000
var goldenTrace = "110a0100" + "31520000" + "00014809" + "fe200000" + strings.Repeat("00", 36) +
	"3f000101" + "0015000b" + "00000000" + "000f4628" + "000001f4" + "000186a0" + "00013880" + "0000000000c35000"

func TestGolden(t *testing.T) {
	c := New()
	c.Nodes = 2
	f, err := c.Request(telemetrytest.RoCEFrame(true))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	if f, _, err = c.Push(f, &h); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(f[54 : 54+88]); got != goldenTrace {
		t.Fatalf("trace\n got %s\nwant %s", got, goldenTrace)
	}
	if f[20] != 0 {
		t.Fatalf("IPv6 next header %d, want 0 (Hop-by-Hop)", f[20])
	}
}

func dec(c *Codec) telemetrytest.DecodeFunc {
	return func(f []byte, st *telemetry.Stack) error { _, err := c.Decode(f, st); return err }
}

func TestRoundTrip(t *testing.T) {
	for _, inc := range []bool{false, true} {
		for _, tt := range []uint32{HPCCTraceType, 0xFFFFFC, TraceHopLimNodeIDW | TraceIfIDsWide | TraceBufferOcc, TraceIfIDs} {
			c := New()
			c.Incremental, c.TraceType, c.Nodes = inc, tt, 2
			if err := telemetrytest.RoundTrip(c, dec(c), true, 2, telemetrytest.CheckFields); err != nil {
				t.Errorf("incremental=%v trace type %#06x: %v", inc, tt, err)
			}
		}
	}
}

// The opaque state snapshot (bit 22) rides after the node's NodeLen words.
func TestOpaque(t *testing.T) {
	for _, inc := range []bool{false, true} {
		c := &Codec{Namespace: 7, TraceType: TraceHopLimNodeID | TraceOpaque, Nodes: 2, OpaqueSchema: 0xABCDEF, OpaqueWords: 2, Incremental: inc}
		f, _ := c.Request(telemetrytest.RoCEFrame(true))
		h := telemetrytest.Hop(1)
		h.Opaque = []byte{1, 2, 3, 4, 5}
		f, st, err := c.Push(f, &h)
		if err != nil || st != telemetry.Pushed {
			t.Fatalf("push: %v %v", st, err)
		}
		var s telemetry.Stack
		hd, err := c.Decode(f, &s)
		if err != nil || s.N != 1 || hd.NodeLen != 1 {
			t.Fatalf("decode: %+v %d %v", hd, s.N, err)
		}
		got := s.Hops[0]
		if got.OpaqueID != 0xABCDEF || hex.EncodeToString(got.Opaque) != "0102030405000000" || got.SwitchID != 0x101 {
			t.Fatalf("opaque %x schema %#x switch %#x", got.Opaque, got.OpaqueID, got.SwitchID)
		}
	}
}

func TestOverflow(t *testing.T) {
	for _, inc := range []bool{false, true} {
		c := New()
		c.Incremental, c.Nodes = inc, 2
		f, _ := c.Request(telemetrytest.RoCEFrame(true))
		h := telemetrytest.Hop(1)
		for i, want := range []telemetry.Status{telemetry.Pushed, telemetry.Pushed, telemetry.Overflow} {
			var st telemetry.Status
			var err error
			if f, st, err = c.Push(f, &h); err != nil || st != want {
				t.Fatalf("incremental=%v push %d: %v %v, want %v", inc, i, st, err, want)
			}
		}
		var s telemetry.Stack
		hd, _ := c.Decode(f, &s)
		if !hd.Overflow || s.N != 2 || hd.RemainingLen != 0 {
			t.Fatalf("incremental=%v: %+v, %d nodes", inc, hd, s.N)
		}
	}
	// Incremental: the MTU stops a node before RemainingLen does.
	c := New()
	c.Incremental = true
	f, _ := c.Request(telemetrytest.RoCEFrame(true))
	c.MTU = len(f) - 14
	h := telemetrytest.Hop(1)
	if f, st, _ := c.Push(f, &h); st != telemetry.Overflow || f[14+40+8+2]&0x04 == 0 {
		t.Fatalf("MTU: %v", st)
	}
}

func TestOtherNamespace(t *testing.T) {
	c := New()
	f, _ := c.Request(telemetrytest.RoCEFrame(true))
	other := New()
	other.Namespace = 2
	h := telemetrytest.Hop(1)
	if _, _, err := other.Push(f, &h); !errors.Is(err, telemetry.ErrNoTelemetry) {
		t.Fatalf("push in another namespace: %v", err)
	}
	if _, err := c.Request(telemetrytest.RoCEFrame(false)); !errors.Is(err, telemetry.ErrUnsupported) {
		t.Fatalf("IPv4 request: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, inc := range []bool{false, true} {
		c := New()
		c.Incremental = inc
		fr, _ := c.Request(telemetrytest.RoCEFrame(true))
		h := telemetrytest.Hop(1)
		fr, _, _ = c.Push(fr, &h)
		f.Add(fr)
	}
	c := New()
	f.Fuzz(func(t *testing.T, b []byte) {
		var s telemetry.Stack
		if _, err := c.Decode(b, &s); err != nil {
			return
		}
		b = append(b[:len(b):len(b)], make([]byte, 128)...)[:len(b)]
		h := telemetrytest.Hop(1)
		b, _, err := c.Push(b, &h)
		if err != nil && !errors.Is(err, telemetry.ErrNoTelemetry) && !errors.Is(err, telemetry.ErrMalformed) {
			t.Fatalf("push after decode: %v", err)
		}
		if _, err := c.Strip(b); err != nil && !errors.Is(err, telemetry.ErrUnsupported) {
			t.Fatalf("strip after decode: %v", err)
		}
	})
}

func BenchmarkPushDecode(b *testing.B) {
	c := New()
	c.Nodes = 1
	f, _ := c.Request(telemetrytest.RoCEFrame(true))
	h := telemetrytest.Hop(1)
	var s telemetry.Stack
	b.ReportAllocs()
	for b.Loop() {
		Trace(f[66:]).SetRemainingLen(9)
		f, _, _ = c.Push(f, &h)
		if _, err := c.Decode(f, &s); err != nil || s.N != 1 {
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

// Node IDs keep their full width, and all-ones ("not populated", RFC 9197 4.4.2)
// fields are absent and never override a populated one (issue 20 finding 8).
func TestWideNodeIDAndAllOnes(t *testing.T) {
	c := New()
	c.Nodes = 1
	c.TraceType = TraceHopLimNodeID | TraceQueueDepth | TraceHopLimNodeIDW | TraceIfIDsWide
	f, err := c.Request(telemetrytest.RoCEFrame(true))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	if f, _, err = c.Push(f, &h); err != nil {
		t.Fatal(err)
	}
	x, err := find(f)
	if err != nil {
		t.Fatal(err)
	}
	// Node data: hop limit + node ID (4), queue depth (4), hop limit + wide node ID
	// (8), wide ingress and egress interfaces (8).
	node := f[x.data : x.data+x.dataLen]
	set := func(short uint32, depth uint32, wide uint64, ingress uint32) {
		binary.BigEndian.PutUint32(node[0:], 63<<24|short)
		binary.BigEndian.PutUint32(node[4:], depth)
		binary.BigEndian.PutUint64(node[8:], 63<<56|wide)
		binary.BigEndian.PutUint32(node[16:], ingress)
	}
	for _, tc := range []struct {
		name             string
		short            uint32
		depth            uint32
		wide             uint64
		ingress          uint32
		wantID           uint64
		wantIDField      bool
		wantWide, wantQL bool
		wantIngress      bool
	}{
		{"wide ID in full", 0x000101, 80, 0xABCDEF01234567, 21, 0xABCDEF01234567, true, true, true, true},
		{"wide all ones keeps the short ID", 0x000101, 80, 0xFFFFFFFFFFFFFF, 21, 0x101, true, false, true, true},
		{"both all ones", 0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFF, 0xFFFFFFFF, 0, false, false, false, false},
	} {
		set(tc.short, tc.depth, tc.wide, tc.ingress)
		var st telemetry.Stack
		if _, err := c.Decode(f, &st); err != nil || st.N != 1 {
			t.Fatalf("%s: %d hops, %v", tc.name, st.N, err)
		}
		got := &st.Hops[0]
		id := uint64(got.SwitchID)
		if got.Has&telemetry.FieldWideSwitchID != 0 {
			id = got.WideSwitchID
		}
		if got.Has&telemetry.FieldSwitchID != 0 != tc.wantIDField || tc.wantIDField && id != tc.wantID ||
			got.Has&telemetry.FieldWideSwitchID != 0 != tc.wantWide {
			t.Errorf("%s: switch ID %#x (has %v, wide %v), want %#x", tc.name, id,
				got.Has&telemetry.FieldSwitchID != 0, got.Has&telemetry.FieldWideSwitchID != 0, tc.wantID)
		}
		if got.Has&telemetry.FieldQLen != 0 != tc.wantQL || got.Has&telemetry.FieldIngressPort != 0 != tc.wantIngress {
			t.Errorf("%s: has %#x", tc.name, got.Has)
		}
		if got.Has&telemetry.FieldTTL == 0 || got.TTL != 63 {
			t.Errorf("%s: hop limit %d", tc.name, got.TTL)
		}
	}
}
