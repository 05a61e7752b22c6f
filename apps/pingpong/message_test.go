package pingpong

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// TestWireGIDGolden: the rxe-peer README's example, ::ffff:10.77.0.2.
func TestWireGIDGolden(t *testing.T) {
	g := roce.GIDFromAddr(netip.MustParseAddr("10.77.0.2"))
	if got, want := WireGID(g), "00000000000000000000ffff0a4d0002"; got != want {
		t.Fatalf("wire GID %s, want %s", got, want)
	}
}

// TestEncodeGolden: the 52-byte message, NUL included, byte for byte.
func TestEncodeGolden(t *testing.T) {
	d := Dest{QPN: 0x11, PSN: 0x3e109d, GID: roce.GIDFromAddr(netip.MustParseAddr("10.77.0.2"))}
	m := d.Encode()
	want := "0000:000011:3e109d:00000000000000000000ffff0a4d0002\x00"
	if len(want) != MessageSize || string(m[:]) != want {
		t.Fatalf("message %q (%d bytes), want %q", m[:], len(m), want)
	}
	back, err := DecodeDest(m[:])
	if err != nil || back != d {
		t.Fatalf("decode: %+v, %v", back, err)
	}
	// An IPv6 GID and a zero one (srq_pingpong's padding entries).
	d6 := Dest{LID: 0xbeef, QPN: 0xffffff, PSN: 1, GID: roce.GIDFromAddr(netip.MustParseAddr("fd77::1"))}
	m = d6.Encode()
	if s := string(m[:]); s != "beef:ffffff:000001:fd770000000000000000000000000001\x00" {
		t.Fatalf("IPv6 message %q", s)
	}
	var zero Dest
	m = zero.Encode()
	if s := string(m[:]); s != "0000:000000:000000:00000000000000000000000000000000\x00" {
		t.Fatalf("zero message %q", s)
	}
	if zero.Global() || !d.Global() || !d6.Global() {
		t.Fatal("Global: a GRH is used exactly when the interface id is non-zero")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, s := range []string{
		"",
		"0000:000011:3e109d",
		"0000:000011:3e109d:00000000000000000000ffff0a4d00",
		"0000:000011:3e109d:00000000000000000000ffff0a4d000g",
		"zzzz:000011:3e109d:00000000000000000000ffff0a4d0002",
		"0000:1000000:3e109d:00000000000000000000ffff0a4d0002",
		"10000:000011:3e109d:00000000000000000000ffff0a4d0002",
	} {
		if _, err := DecodeDest([]byte(s)); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
	// Upper-case hex, as sscanf %x accepts.
	if d, err := DecodeDest([]byte("00AB:00001F:3E109D:00000000000000000000FFFF0A4D0002\x00")); err != nil || d.LID != 0xab || d.QPN != 0x1f {
		t.Errorf("upper case: %+v %v", d, err)
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		args string
		chk  func(Config) bool
		err  string
	}{
		{RC, "", func(c Config) bool {
			return c.Port == 18515 && c.Size == 4096 && c.MTU == 1024 && c.RxDepth == 500 && c.Iters == 1000 && c.GIDIdx == -1 && c.ServerName == ""
		}, ""},
		{RC, "-g 1 10.0.0.1", func(c Config) bool { return c.GIDIdx == 1 && c.ServerName == "10.0.0.1" }, ""},
		{RC, "-p 0x4000 -s64 -m 2048 -n 10 -r 8 -e -c -l 3 -d rocelab0 -i 1", func(c Config) bool {
			return c.Port == 0x4000 && c.Size == 64 && c.MTU == 2048 && c.Iters == 10 && c.RxDepth == 8 && c.Events && c.Chk && c.SL == 3 && c.Dev == "rocelab0"
		}, ""},
		{RC, "--gid-idx=2 --iters 5 h1", func(c Config) bool { return c.GIDIdx == 2 && c.Iters == 5 && c.ServerName == "h1" }, ""},
		{UD, "", func(c Config) bool { return c.Size == 2048 }, ""},
		{SRQ, "-q 4 -r 8", func(c Config) bool { return c.NumQP == 4 && c.RxDepth == 8 }, ""},
		{SRQ, "", func(c Config) bool { return c.NumQP == 16 }, ""},
		{RC, "-m 1000", nil, "usage"},
		{RC, "-p 70000", nil, "usage"},
		{RC, "a b", nil, "usage"},
		{RC, "-x", nil, "usage"},
		{UD, "-m 1024", nil, "usage"},
		{UD, "-c", nil, "usage"},
		{RC, "-o", nil, "ODP"},
		{RC, "-t", nil, "timestamp"},
		{SRQ, "-q 600 -r 1000", nil, "usage"},
		{SRQ, "-q 20 -r 10", nil, "too small"},
		{RC, "-s 0", nil, "usage"},
	} {
		c, err := ParseArgs(tc.k, strings.Fields(tc.args))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %q: error %v, want %q", tc.k.Program(), tc.args, err, tc.err)
			}
			if tc.err == "usage" && !errors.Is(err, ErrUsage) {
				t.Errorf("%v %q: %v is not ErrUsage", tc.k.Program(), tc.args, err)
			}
			continue
		}
		if err != nil || !tc.chk(c) {
			t.Errorf("%v %q: %+v, %v", tc.k.Program(), tc.args, c, err)
		}
	}
}
