package perftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/qp"
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

func TestAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0x3e109d, 6, "0x3e109d"}, {0x271, 8, "0x000271"}, {0x563562788000, 16, "0x00563562788000"}} {
		if got := altHex(c.v, c.width); got != c.want {
			t.Errorf("altHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		t    Test
		args string
		chk  func(Config) bool
		err  string
	}{
		{WriteBW, "", func(c Config) bool {
			return c.Size == 65536 && c.Iters == 5000 && c.TxDepth == 128 && c.CQMod == 100 && c.Port == 18515 && c.GIDIdx == -1 && c.Conn == qp.RC
		}, ""},
		{SendLat, "", func(c Config) bool { return c.Size == 2 && c.Iters == 1000 && c.TxDepth == 1 }, ""},
		{WriteBW, "-d rocelab0 -x 1 --report_gbits -F -a -q 2 10.0.0.1", func(c Config) bool {
			return c.Dev == "rocelab0" && c.GIDIdx == 1 && c.ReportGbits && c.All && c.QPs == 2 && c.ServerName == "10.0.0.1"
		}, ""},
		{WriteBW, "-n 50", func(c Config) bool { return c.TxDepth == 50 && c.CQMod == 50 }, ""},
		{ReadBW, "-o 4 -s 4096 -D 2 -m 2048 -c UC", nil, "UC connection not possible"},
		{ReadBW, "-o 4 -s 4096 -D 2 -m 2048", func(c Config) bool {
			return c.OutReads == 4 && c.Size == 4096 && c.Duration.Seconds() == 2 && c.MTU == 2048
		}, ""},
		{WriteBW, "-R", nil, "RDMA-CM"},
		{WriteBW, "-b", nil, "bidirectional"},
		{WriteBW, "-n 2", nil, "between"},
		{WriteBW, "-m 1000", nil, "Invalid MTU"},
		{WriteBW, "-c UD", nil, "not supported"},
		{SendLat, "-D 3", nil, "-D"},
		{WriteBW, "a b", nil, "usage"},
		{WriteBW, "--bogus", nil, "usage"},
	} {
		c, err := ParseArgs(tc.t, strings.Fields(tc.args))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %q: error %v, want %q", tc.t.Program(), tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !tc.chk(c) {
			t.Errorf("%s %q: %+v %v", tc.t.Program(), tc.args, c, err)
		}
	}
}

func TestLatReport(t *testing.T) {
	// Posts every 10 µs: one-way latency 5 µs everywhere.
	ts := make([]int64, 101)
	for i := range ts {
		ts[i] = int64(i) * 10000
	}
	r := latReport(2, 101, ts)
	if r.Min != 5 || r.Max != 5 || r.Typical != 5 || r.Avg != 5 || r.Stdev != 0 || r.P99 != 5 || r.P999 != 5 {
		t.Fatalf("%+v", r)
	}
}
