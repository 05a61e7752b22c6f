package hpcchop

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// The simulator's hop word for rate 100G (code 2), time 0x123456 ns, bytes 0xABCDE
// units and qlen 0x1F0F0 units: GCC packs lineRate into bits 0–2, time 3–26, bytes
// 27–46, qlen 47–63, and ns-3 writes buf[0] then buf[1] little-endian:
//
//	b2 a2 91 f0 e6 55 78 f8
var goldenWord = []byte{0xb2, 0xa2, 0x91, 0xf0, 0xe6, 0x55, 0x78, 0xf8}

func TestGoldenWord(t *testing.T) {
	w := Word{RateCode: 2, Time: 0x123456, Bytes: 0xABCDE, QLen: 0x1F0F0}
	s := make(Shim, HeaderSize)
	s.SetSlot(0, w.Pack())
	if got := s[ShimSize : ShimSize+HopSize]; !bytes.Equal(got, goldenWord) {
		t.Fatalf("hop word\n got %x\nwant %x", got, goldenWord)
	}
	if back := Unpack(s.Slot(0)); back != w {
		t.Fatalf("Unpack = %+v, want %+v", back, w)
	}
}

// One hop pushed onto an IPv4 RoCEv2 frame: the block right after UDP is
//
//	10 68 00 01   Ver 1, original DSCP 26 (0x68 = 26<<2), nhop 1
//	<slot 0>      rate code 2, time 1001000, bytes 100000, qlen 1000
//	00 .. 00      slots 1–4 empty
func TestGoldenBlock(t *testing.T) {
	c := New()
	f, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	h := telemetrytest.Hop(1)
	f, st, err := c.Push(f, &h)
	if err != nil || st != telemetry.Pushed {
		t.Fatalf("Push: %v %v", st, err)
	}
	w := Word{RateCode: 2, Time: 1001000, Bytes: 100000, QLen: 1000}.Pack()
	want := "10680001" + hex.EncodeToString([]byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24),
		byte(w >> 32), byte(w >> 40), byte(w >> 48), byte(w >> 56)}) + strings.Repeat("00", 4*HopSize)
	off := 14 + 20 + 8
	if got := hex.EncodeToString(f[off : off+HeaderSize]); got != want {
		t.Fatalf("block\n got %s\nwant %s", got, want)
	}
	if dscp := f[15] >> 2; dscp != DefaultDSCP {
		t.Fatalf("DSCP %#x, want %#x", dscp, DefaultDSCP)
	}
}

func TestRoundTripAndWrap(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		c := &Codec{DSCP: DefaultDSCP, Multi: 4}
		orig := telemetrytest.RoCEFrame(v6)
		keep := bytes.Clone(orig)
		f, err := c.Request(orig)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 7; i++ {
			h := telemetrytest.Hop(i)
			var st telemetry.Status
			if f, st, err = c.Push(f, &h); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]telemetry.Status{true: telemetry.Wrapped, false: telemetry.Pushed}[i > MaxHops]; st != want {
				t.Fatalf("hop %d: status %v, want %v", i, st, want)
			}
		}
		var s telemetry.Stack
		hd, err := c.Decode(f, &s)
		if err != nil {
			t.Fatal(err)
		}
		if hd.NHop != 7 || s.N != MaxHops || !s.Truncated {
			t.Fatalf("nhop %d, %d hops, truncated %v", hd.NHop, s.N, s.Truncated)
		}
		for i, got := range s.HopList() {
			want := telemetrytest.Hop(i + 3) // hops 1 and 2 were overwritten
			wrap := hpcc.CompactWrap(c.Multi)
			if got.Rate != want.Rate || got.TS != want.TS%wrap.TS || got.TxBytes != want.TxBytes%wrap.TxBytes ||
				got.QLen != want.QLen/(QLenUnit*4)*QLenUnit*4 {
				t.Errorf("hop %d: got %+v, want %+v", i, got.Hop, want.Hop)
			}
		}
		f, err = c.Strip(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f, keep) {
			t.Fatalf("strip did not restore the frame\n got %x\nwant %x", f, keep)
		}
		if err := telemetrytest.Valid(f); err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrors(t *testing.T) {
	c := New()
	f := telemetrytest.RoCEFrame(false)
	h := telemetrytest.Hop(1)
	if _, _, err := c.Push(f, &h); !errors.Is(err, telemetry.ErrNoTelemetry) {
		t.Fatalf("push without request: %v", err)
	}
	f, _ = c.Request(f)
	if _, err := c.Request(f); !errors.Is(err, telemetry.ErrAlreadyPresent) {
		t.Fatalf("second request: %v", err)
	}
	full := f[:len(f):len(f)]
	h.Rate = 10e9
	if _, _, err := c.Push(full, &h); !errors.Is(err, telemetry.ErrNoRoom) {
		t.Fatalf("10G rate without room for the rate table: %v", err)
	}
	var st telemetry.Stack
	if hd, err := c.Decode(full, &st); err != nil || !hd.Error || hd.RateTable || st.N != 0 {
		t.Fatalf("after the refused push: %+v %d hops, %v; want E set, no hop", hd, st.N, err)
	}
	if _, err := New().Request(telemetrytest.RoCEFrame(false)[: len(full)-HeaderSize : len(full)-HeaderSize]); !errors.Is(err, telemetry.ErrNoRoom) {
		t.Fatalf("request without room: %v", err)
	}
}

// A 10 Gb/s hop, then a 100 Gb/s one, on an IPv4 frame: the first grows the block by
// the rate table and sets X; the block right after UDP is
//
//	18 68 00 02   Ver 1, X, original DSCP 26, nhop 2
//	<slot 0>      rate code 7 (escape), time 1001000, bytes 100000, qlen 1000
//	<slot 1>      rate code 2 (100G), hop 2's fields
//	00 .. 00      slots 2–4 empty
//	00 00 27 10   rate table entry 0: 10000 Mb/s
//	00 .. 00      entries 1–4: 0 (slot 1 has a code)
func TestRateExtension(t *testing.T) {
	c := New()
	orig := telemetrytest.RoCEFrame(false)
	keep := bytes.Clone(orig)
	f, err := c.Request(orig)
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
	le := func(w uint64) string {
		return hex.EncodeToString([]byte{byte(w), byte(w >> 8), byte(w >> 16), byte(w >> 24),
			byte(w >> 32), byte(w >> 40), byte(w >> 48), byte(w >> 56)})
	}
	want := "18680002" + le(Word{RateCode: EscapeCode, Time: 1001000, Bytes: 100000, QLen: 1000}.Pack()) +
		le(Word{RateCode: 2, Time: 1002000, Bytes: 200000, QLen: 2000}.Pack()) + strings.Repeat("00", 3*HopSize) +
		"00002710" + strings.Repeat("00", 4*4)
	off := 14 + 20 + 8
	if got := hex.EncodeToString(f[off : off+HeaderSize+RateTableSize]); got != want {
		t.Fatalf("block\n got %s\nwant %s", got, want)
	}
	var st telemetry.Stack
	hd, err := c.Decode(f, &st)
	if err != nil || !hd.RateTable || hd.Error || st.N != 2 || st.Hops[0].Rate != 10e9 || st.Hops[1].Rate != 100e9 {
		t.Fatalf("decode: %+v %+v %v", hd, st.HopList(), err)
	}
	// The ring reuses slot 0 for a sixth hop at a coded rate: its table entry clears.
	for i := 3; i <= 6; i++ {
		h := telemetrytest.Hop(i)
		if f, _, err = c.Push(f, &h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Decode(f, &st); err != nil || st.Hops[MaxHops-1].Rate != 100e9 || Shim(f[off:]).SlotRate(0) != 0 {
		t.Fatalf("after the wrap: %+v %v", st.HopList(), err)
	}
	if f, err = c.Strip(f); err != nil || !bytes.Equal(f, keep) {
		t.Fatalf("strip did not restore the frame (%v)\n got %x\nwant %x", err, f, keep)
	}
}

func TestRateUnexpressible(t *testing.T) {
	for _, bps := range []uint64{1.5e6, 0, 1e6 << 32} {
		if CheckRate(bps) == nil {
			t.Errorf("CheckRate(%d) accepted", bps)
		}
	}
	for _, bps := range []uint64{1e9, 10e9, 40e9, 100e9, 2.5e9} {
		if err := CheckRate(bps); err != nil {
			t.Errorf("CheckRate(%d): %v", bps, err)
		}
	}
	c := New()
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	keep := bytes.Clone(f)
	h := telemetrytest.Hop(1)
	h.Rate = 1.5e6
	if _, _, err := c.Push(f, &h); err == nil {
		t.Fatal("Push took a 1.5 Mb/s hop")
	}
	keep[14+20+8] |= FlagE
	if !bytes.Equal(f, keep) {
		t.Fatalf("a refused push changed more than the E flag\n got %x\nwant %x", f, keep)
	}
}

func FuzzDecode(f *testing.F) {
	c := New()
	fr, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	fr, _, _ = c.Push(fr, &h)
	f.Add(fr)
	ext, _ := c.Request(telemetrytest.RoCEFrame(false))
	h10 := telemetrytest.Hop(2)
	h10.Rate = 10e9
	ext, _, _ = c.Push(ext, &h10)
	f.Add(ext)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s telemetry.Stack
		if _, err := c.Decode(b, &s); err != nil {
			return
		}
		b = append(b[:len(b):len(b)], make([]byte, 64)...)[:len(b)]
		b, _, err := c.Push(b, &h)
		if err != nil && !errors.Is(err, telemetry.ErrMalformed) {
			t.Fatalf("push after decode: %v", err)
		}
		if _, err := c.Strip(b); err != nil {
			t.Fatalf("strip after decode: %v", err)
		}
	})
}

func BenchmarkPushDecode(b *testing.B) {
	c := New()
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	var s telemetry.Stack
	b.ReportAllocs()
	for b.Loop() {
		f, _, _ = c.Push(f, &h)
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
		// A lab rate goes through the extension: the push may grow the block by the
		// rate table, and what it pushed must decode with that rate and strip.
		buf := append(b[:len(b):len(b)], make([]byte, RateTableSize)...)[:len(b)]
		h := telemetrytest.Hop(1)
		h.Rate = 10e9
		out, st, err := c.Push(buf, &h)
		if err != nil || (st != telemetry.Pushed && st != telemetry.Wrapped) {
			return
		}
		var s telemetry.Stack
		if err := decode(out, &s); err != nil || s.N == 0 || s.Hops[s.N-1].Rate != 10e9 {
			t.Fatalf("pushed a 10 Gb/s hop, then decode: %d hops %v", s.N, err)
		}
		if _, err := c.Strip(out); err != nil {
			t.Fatalf("pushed a 10 Gb/s hop, then strip: %v", err)
		}
	})
}

// FuzzDecodeStripIn holds DecodeStripIn on a located frame to Decode then Strip: the
// same hops, the same bytes left, and on an error the frame untouched.
func FuzzDecodeStripIn(f *testing.F) {
	c := New()
	fr, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	fr, _, _ = c.Push(fr, &h)
	f.Add(fr)
	ext, _ := c.Request(telemetrytest.RoCEFrame(true))
	h10 := telemetrytest.Hop(2)
	h10.Rate = 10e9
	ext = append(ext, make([]byte, RateTableSize)...)[:len(ext)]
	ext, _, _ = c.Push(ext, &h10)
	f.Add(ext)
	f.Add(telemetrytest.RoCEFrame(false))
	decode := func(b []byte, st *telemetry.Stack) error { _, err := c.Decode(b, st); return err }
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := telemetrytest.CheckDecodeStripIn(c, decode, c.DecodeStripIn, b); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPushHops holds PushHops to Push called on each hop in turn, on any frame, with
// hops at the simulator's rates and at a lab's (the rate table added on the way).
func FuzzPushHops(f *testing.F) {
	c := New()
	fr, _ := c.Request(telemetrytest.RoCEFrame(false))
	f.Add(fr, uint8(3), false)
	f.Add(fr, uint8(7), true)
	f.Fuzz(func(t *testing.T, b []byte, n uint8, labRate bool) {
		hops := make([]telemetry.Hop, n%8)
		for i := range hops {
			hops[i] = telemetrytest.Hop(i + 1)
			if labRate && i%2 == 1 {
				hops[i].Rate = 10e9
			}
		}
		room := len(b) + RateTableSize
		one := append(make([]byte, 0, room), b...)
		var err error
		for i := range hops {
			if one, _, err = c.Push(one, &hops[i]); err != nil {
				break
			}
		}
		all, aerr := c.PushHops(append(make([]byte, 0, room), b...), hops)
		if (err == nil) != (aerr == nil) || !bytes.Equal(one, all) {
			t.Fatalf("PushHops: %v, %x; Push each: %v, %x", aerr, all, err, one)
		}
	})
}

// FuzzDetached holds the block carried beside a frame to the block in it: the same
// bytes, statuses, hops and stripped frame (telemetrytest.CheckDetached), over any
// frame and hops at the simulator's rates, a lab's and rates no code carries; and a
// block of any bytes decodes or is refused without a panic.
func FuzzDetached(f *testing.F) {
	c := New()
	f.Add(telemetrytest.RoCEFrame(false), uint8(3), uint8(0))
	f.Add(telemetrytest.RoCEFrame(true), uint8(7), uint8(0b10))
	f.Add(telemetrytest.RoCEFrame(false), uint8(2), uint8(0b101))
	decode := func(b []byte, s *telemetry.Stack) error { _, err := c.Decode(b, s); return err }
	f.Fuzz(func(t *testing.T, b []byte, n, rates uint8) {
		hops := make([]telemetry.Hop, n%9)
		for i := range hops {
			hops[i] = telemetrytest.Hop(i + 1)
			switch rates >> (2 * (i % 4)) & 3 {
			case 1:
				hops[i].Rate = 10e9
			case 2:
				hops[i].Rate = 1.5e6
			}
		}
		if err := telemetrytest.CheckDetached(c, decode, b, hops, 64); err != nil {
			t.Fatal(err)
		}
		var st telemetry.Stack
		blk := append(make([]byte, 0, 64), b[:min(len(b), 64)]...)
		if c.DecodeDetached(blk, &st) == nil {
			h := telemetrytest.Hop(1)
			h.Rate = 10e9
			c.PushDetached(blk, &h, 1000)
		}
	})
}

// TestRateCode holds RateCode to LineRates: a rate's code is its index there, and a
// rate not there has none.
func TestRateCode(t *testing.T) {
	for i, r := range LineRates {
		code, ok := RateCode(r)
		if r == 0 {
			if ok {
				t.Errorf("RateCode(0) = %d, true", code)
			}
			continue
		}
		if !ok || int(code) != i {
			t.Errorf("RateCode(%d) = %d, %v; want %d, true", r, code, ok, i)
		}
	}
	for _, r := range []uint64{1e9, 10e9, 40e9, 800e9, 25e9 + 1} {
		if code, ok := RateCode(r); ok {
			t.Errorf("RateCode(%d) = %d, true", r, code)
		}
	}
}
