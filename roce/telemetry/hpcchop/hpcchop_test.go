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
	h.Rate = 10e9
	if _, _, err := c.Push(f, &h); !errors.Is(err, telemetry.ErrMalformed) {
		t.Fatalf("10G rate: %v", err)
	}
	full := f[:len(f):len(f)]
	if _, err := New().Request(telemetrytest.RoCEFrame(false)[: len(full)-HeaderSize : len(full)-HeaderSize]); !errors.Is(err, telemetry.ErrNoRoom) {
		t.Fatalf("request without room: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	c := New()
	fr, _ := c.Request(telemetrytest.RoCEFrame(false))
	h := telemetrytest.Hop(1)
	fr, _, _ = c.Push(fr, &h)
	f.Add(fr)
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
	})
}
