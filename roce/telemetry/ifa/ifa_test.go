package ifa

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// IFA 2.0 on an IPv4 RoCEv2 packet after one transit hop (draft-kumar-ippm-ifa
// sections 4–5, rocelab's HPCC profile of the opaque words); IP protocol 253, then:
//
//	2f 11 00 40   IFA header: Ver 2, GNS 0xF, Next Header 17 (UDP), flags 0, Max Length 64 words
//	<UDP header, length grown by 36>
//	00 00 07 08   metadata header: request/action vectors 0, Hop Limit 7 (8 − 1), Current Length 8
//	00 01 01 3f   LNS 0, Device ID 0x101, IP TTL 63
//	40 10 00 00   port speed 4 (100G), congestion 0, queue ID 1, Rx seconds 0
//	00 0b 00 15   egress port 11, ingress port 21
//	00 0f 44 34   Rx nanoseconds 1000500
//	00 00 01 f4   residence time 500 ns
//	00 c3 50 00   opaque 0: tx bytes 12800000
//	00 01 38 80   opaque 1: queue depth 80000 bytes
//	00 01 86 a0   opaque 2: line rate 100000 Mb/s
const (
	goldenIFA   = "2f110040"
	goldenStack = "00000708" + "0001013f" + "40100000" + "000b0015" + "000f4434" + "000001f4" + "00c35000" + "00013880" + "000186a0"
)

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
	if f[23] != DefaultProtocol {
		t.Fatalf("IP protocol %d", f[23])
	}
	if got := hex.EncodeToString(f[34:38]); got != goldenIFA {
		t.Fatalf("IFA header %s, want %s", got, goldenIFA)
	}
	if got := hex.EncodeToString(f[46 : 46+len(goldenStack)/2]); got != goldenStack {
		t.Fatalf("metadata\n got %s\nwant %s", got, goldenStack)
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

func TestLimits(t *testing.T) {
	h := telemetrytest.Hop(1)
	push := func(c *Codec, n int) (Header, telemetry.Status, int) {
		f, _ := c.Request(telemetrytest.RoCEFrame(false))
		var st telemetry.Status
		for range n {
			f, st, _ = c.Push(f, &h)
		}
		var s telemetry.Stack
		hd, _ := c.Decode(f, &s)
		return hd, st, s.N
	}
	c := New()
	c.MaxLength = 16 // two records
	if hd, st, n := push(c, 3); st != telemetry.MaxLengthReached || hd.Flags&FlagMF == 0 || n != 2 {
		t.Fatalf("Max Length: %v %+v %d", st, hd, n)
	}
	c = New()
	c.HopLimit = 1
	if hd, st, n := push(c, 2); st != telemetry.HopLimitReached || hd.Flags&FlagMF != 0 || n != 1 {
		t.Fatalf("Hop Limit: %v %+v %d", st, hd, n)
	}
	c = New()
	f, _ := c.Request(telemetrytest.RoCEFrame(false))
	c.MTU = len(f) - 14 + HopSize - 1
	if _, st, _ := c.Push(f, &h); st != telemetry.MTUExceeded || f[36]&FlagMF == 0 {
		t.Fatalf("MTU: %v", st)
	}
}

func TestNotIFA(t *testing.T) {
	var s telemetry.Stack
	if _, err := New().Decode(telemetrytest.RoCEFrame(false), &s); !errors.Is(err, telemetry.ErrNoTelemetry) {
		t.Fatal(err)
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
		if err != nil {
			t.Fatalf("push after decode: %v", err)
		}
		if _, err := c.Strip(b); err != nil {
			t.Fatalf("strip after decode: %v", err)
		}
	})
}

func BenchmarkPushDecode(b *testing.B) {
	c := New()
	c.HopLimit, c.MaxLength = 255, 255
	base := telemetrytest.RoCEFrame(false)
	h := telemetrytest.Hop(1)
	var s telemetry.Stack
	b.ReportAllocs()
	for b.Loop() {
		f, _ := c.Request(base)
		f, _, _ = c.Push(f, &h)
		if _, err := c.Decode(f, &s); err != nil {
			b.Fatal(err)
		}
		base, _ = c.Strip(f)
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
