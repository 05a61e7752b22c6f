package perftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// TestKeyMsgGolden: the rxe-peer README's example key message, byte for byte.
func TestKeyMsgGolden(t *testing.T) {
	k := KeyMsg{OutReads: 1, QPN: 0x11, PSN: 0x3e109d, RKey: 0x271, VAddr: 0x563562788000,
		GID: roce.GIDFromAddr(netip.MustParseAddr("10.77.0.2"))}
	m := k.Encode()
	want := "0000:0001:000011:3e109d:00000271:0000563562788000:" +
		"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\x00"
	if len(want) != KeyMsgSize || string(m[:]) != want {
		t.Fatalf("key message\n%q (%d)\nwant\n%q (%d)", m[:], len(m), want, len(want))
	}
	back, err := DecodeKeyMsg(m[:])
	if err != nil || back != k {
		t.Fatalf("decode %+v %v", back, err)
	}
	k6 := KeyMsg{LID: 0xffff, OutReads: 16, QPN: 0xffffff, PSN: 0, RKey: 0xffffffff, VAddr: ^uint64(0),
		GID: roce.GIDFromAddr(netip.MustParseAddr("fd77::1")), SRQN: 7}
	m = k6.Encode()
	if back, err := DecodeKeyMsg(m[:]); err != nil || back != k6 {
		t.Fatalf("IPv6 round trip %+v %v", back, err)
	}
}

func TestDecodeKeyMsgErrors(t *testing.T) {
	good := "0000:0001:000011:3e109d:00000271:0000563562788000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:"
	for _, s := range []string{
		"",
		"0000:0001:000011:3e109d:00000271:0000563562788000:00000000", // the 59-byte format without a GID
		strings.Replace(good, "3e109d", "3e1x9d", 1),
		strings.Replace(good, "ff:ff", "fff:f", 1),
		strings.Replace(good, ":0a:", ":0g:", 1),
		strings.Replace(good, "000011", "1000011", 1),
	} {
		if _, err := DecodeKeyMsg([]byte(s)); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
}

// TestSmallMessages: version, MTU and report encodings.
func TestSmallMessages(t *testing.T) {
	v := EncodeVersion("6.06")
	if string(v[:]) != "6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" {
		t.Errorf("version %q", v[:])
	}
	m := EncodeMTU(roce.MTU1024)
	if string(m[:]) != "3\x00" {
		t.Errorf("MTU %q", m[:])
	}
	for _, c := range []struct {
		s    string
		want roce.MTU
	}{{"1\x00", 256}, {"3\x00", 1024}, {"5\x00", 4096}} {
		if got, err := DecodeMTU([]byte(c.s)); err != nil || got != c.want {
			t.Errorf("MTU %q: %v %v", c.s, got, err)
		}
	}
	if _, err := DecodeMTU([]byte("7\x00")); err == nil {
		t.Error("MTU 7 decoded")
	}
	r := BWReport{Size: 65536, Iters: 5000, BWPeak: 0.28, BWAvg: 0.24, MsgRate: 0.000458}
	w := r.Words()
	// size 65536 = 00 00 00 00 00 01 00 00; 0.28 = 0x3FD1EB851EB851EC, big-endian.
	if w[0] != [8]byte{0, 0, 0, 0, 0, 1, 0, 0} || w[1] != [8]byte{0, 0, 0, 0, 0, 0, 0x13, 0x88} ||
		w[2] != [8]byte{0x3f, 0xd1, 0xeb, 0x85, 0x1e, 0xb8, 0x51, 0xec} {
		t.Errorf("report words %x", w)
	}
	if ReportFromWords(w) != r {
		t.Errorf("report round trip %+v", ReportFromWords(w))
	}
}
