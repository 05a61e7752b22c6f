package perftest

import (
	"bytes"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// The golden lines below are what perftest 4.5-0.17 (Debian bookworm's) printed on
// rxe, copied from runs in the rxe-peer VM, or, where no run had the case, what C's
// printf makes of the format strings in the binary.

func TestBWLineGolden(t *testing.T) {
	for _, c := range []struct {
		rep   BWReport
		gbits bool
		want  string
	}{
		{BWReport{Size: 4096, Iters: 200, BWPeak: 17.38, BWAvg: 14.34, MsgRate: 0.003671}, false,
			" 4096       200              17.38              14.34  \t\t   0.003671\n"},
		{BWReport{Size: 4096, Iters: 13800, BWAvg: 17.96, MsgRate: 0.004599}, false, // -D: no peak
			" 4096       13800            0.00               17.96  \t\t   0.004599\n"},
		{BWReport{Size: 65536, Iters: 5000, BWPeak: 12345.678, BWAvg: 9876.5, MsgRate: 0.150944}, false,
			" 65536      5000             12345.68            9876.50\t\t   0.150944\n"},
		// --report_gbits below 0.1 Gb/s: REPORT_FMT_EXT, six decimals.
		{BWReport{Size: 8, Iters: 1000, BWPeak: 0.012345, BWAvg: 0.009876, MsgRate: 0.154321}, true,
			" 8          1000           0.012345            0.009876            0.154321\n"},
	} {
		var b bytes.Buffer
		printBWLine(&b, c.rep, c.gbits)
		if b.String() != c.want {
			t.Errorf("%+v:\n%q\nwant\n%q", c.rep, b.String(), c.want)
		}
	}
}

func TestLatLineGolden(t *testing.T) {
	for _, c := range []struct {
		rep  LatReport
		want string
	}{
		{LatReport{Size: 2, Iters: 20, Min: 222.63, Max: 4219.66, Typical: 387.22, Avg: 779.86, Stdev: 717.58, P99: 4219.66, P999: 4219.66},
			" 2       20          222.63         4219.66      387.22   \t       779.86      \t717.58 \t\t4219.66 \t\t4219.66\n"},
		{LatReport{Size: 64, Iters: 100, Min: 154.08, Max: 1529.30, Typical: 193.94, Avg: 238.95, Stdev: 166.82, P99: 1529.30, P999: 1529.30},
			" 64      100          154.08         1529.30      193.94   \t       238.95      \t166.82 \t\t1529.30 \t\t1529.30\n"},
		// An 8 MiB ib_send_lat -a line: the standard deviation's integer squares overflowed.
		{LatReport{Size: 8388608, Iters: 20, Min: 417965.70, Max: 1681856.34, Typical: 835670.57, Avg: 824967.53, Stdev: math.NaN(), P99: 1681856.34, P999: 1681856.34},
			" 8388608 20          417965.70        1681856.34      835670.57  \t       824967.53     \t-nan   \t\t1681856.34 \t\t1681856.34\n"},
	} {
		var b bytes.Buffer
		printLatLine(&b, c.rep)
		if b.String() != c.want {
			t.Errorf("%+v:\n%q\nwant\n%q", c.rep, b.String(), c.want)
		}
	}
	var b bytes.Buffer
	printLatDurLine(&b, LatDurReport{Size: 2, Iters: 4316, Avg: 347.59, TPS: 1438.49})
	if want := " 2             4316            347.59         1438.49\n"; b.String() != want {
		t.Errorf("duration line %q, want %q", b.String(), want)
	}
	b.Reset()
	printSamples(&b, []float64{28.345678, 1234567.5})
	if want := "#, usec\n1, 28.3457\n2, 1.23457e+06\n"; b.String() != want {
		t.Errorf("samples %q, want %q", b.String(), want)
	}
}

func TestHeaderGolden(t *testing.T) {
	// rxe0's headers; rocelab prints PCIe relax order OFF (there is no PCIe).
	head := func(title, lines string) string {
		return resultLine + "                    " + title + "\n" +
			" Dual-port       : OFF\t\tDevice         : rxe0\n" +
			" Number of qps   : 1\t\tTransport type : IB\n" + lines +
			" rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n" + resultLine
	}
	const rc = " Connection type : RC\t\tUsing SRQ      : OFF\n PCIe relax order: ON\n ibv_wr* API     : OFF\n"
	const ud = " Connection type : UD\t\tUsing SRQ      : OFF\n PCIe relax order: ON\n ibv_wr* API     : OFF\n"
	const tail = " Mtu             : 1024[B]\n Link type       : Ethernet\n GID index       : 1\n"
	for _, c := range []struct {
		cfg  func() Config
		info testInfo
		want string
	}{
		{func() Config { c := Defaults(SendLat); c.ServerName = "10.77.0.1"; return c }, testInfo{1024, 1, 1},
			head("Send Latency Test", rc+" TX depth        : 1\n"+tail+" Max inline data : 0[B]\n")},
		{func() Config { return Defaults(AtomicBW) }, testInfo{1024, 1, 128}, // the server
			head("Atomic FETCH_AND_ADD BW Test", rc+" CQ Moderation   : 100\n"+tail+" Outstand reads  : 128\n")},
		{func() Config {
			c := Defaults(ReadBW)
			c.ServerName, c.Bidir = "10.77.0.1", true
			return c
		}, testInfo{1024, 1, 128},
			head("RDMA_Read Bidirectional BW Test", rc+" TX depth        : 128\n CQ Moderation   : 100\n"+tail+" Outstand reads  : 128\n")},
		{func() Config {
			c := Defaults(SendBW)
			c.Conn, c.RxDepth = qp.UD, 200
			return c
		}, testInfo{1024, 1, 1},
			head("Send BW Test", ud+" RX depth        : 200\n CQ Moderation   : 100\n"+tail+" Max inline data : 0[B]\n")},
	} {
		cfg := c.cfg()
		cfg.Dev = "rxe0"
		var b bytes.Buffer
		printTestInfo(&b, cfg, c.info)
		want := strings.Replace(c.want, "PCIe relax order: ON", "PCIe relax order: OFF", 1)
		if b.String() != want {
			t.Errorf("%s:\n%s\nwant\n%s", cfg.Test.Program(), b.String(), want)
		}
	}
}

func TestAddressLinesGolden(t *testing.T) {
	gid := roce.GIDFromAddr(netip.MustParseAddr("10.77.0.2"))
	k := KeyMsg{OutReads: 1, QPN: 0x11, PSN: 0xeaf11, RKey: 0x21b, VAddr: 0x5599fa4cf000, GID: gid}
	const gidLine = " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:02\n"
	for _, c := range []struct {
		v    verb
		k    KeyMsg
		want string
	}{
		{verbWrite, k, " local address: LID 0000 QPN 0x0011 PSN 0xeaf11 RKey 0x00021b VAddr 0x005599fa4cf000\n" + gidLine},
		{verbSend, k, " local address: LID 0000 QPN 0x0011 PSN 0xeaf11\n" + gidLine},
		{verbAtomic, k, " local address: LID 0000 QPN 0x0011 PSN 0xeaf11\n" + gidLine},
		{verbRead, KeyMsg{OutReads: 128, QPN: 0x13, PSN: 0x90b795, RKey: 0x406, VAddr: 0x561fc2e16000, GID: gid},
			" local address: LID 0000 QPN 0x0013 PSN 0x90b795 OUT 0x80 RKey 0x000406 VAddr 0x00561fc2e16000\n" + gidLine},
	} {
		var b bytes.Buffer
		printDest(&b, c.v, "local", c.k)
		if b.String() != c.want {
			t.Errorf("%v:\n%q\nwant\n%q", c.v, b.String(), c.want)
		}
	}
}

func TestAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0x3e109d, 6, "0x3e109d"}, {0xeaf11, 6, "0xeaf11"}, {0x271, 8, "0x000271"},
		{0x563562788000, 16, "0x00563562788000"}} {
		if got := altHex(c.v, c.width); got != c.want {
			t.Errorf("altHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}
