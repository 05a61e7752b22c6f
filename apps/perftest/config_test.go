package perftest

import (
	"errors"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/qp"
)

func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		t                                   Test
		size, iters, tx, rx, cqMod, outName int
	}{
		// perftest's: 64 KiB messages (8 for atomics) and 5000 iterations for
		// ib_write_bw, 1000 otherwise; a TX depth of 128 (1 for latency); receives
		// only for SEND; a CQE per WR above 8 KiB unless -Q is given.
		{WriteBW, 65536, 5000, 128, 1, 1, 0},
		{ReadBW, 65536, 1000, 128, 1, 1, 0},
		{SendBW, 65536, 1000, 128, 512, 1, 0},
		{AtomicBW, 8, 1000, 128, 1, 100, 0},
		{WriteLat, 2, 1000, 1, 1, 1, 0},
		{ReadLat, 2, 1000, 1, 1, 1, 0},
		{SendLat, 2, 1000, 1, 512, 1, 0},
	} {
		cfg, err := ParseArgs(c.t, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.t.Program(), err)
		}
		if cfg.Size != c.size || cfg.Iters != c.iters || cfg.TxDepth != c.tx || cfg.RxDepth != c.rx || cfg.CQMod != c.cqMod ||
			cfg.Port != 18515 || cfg.QPs != 1 || cfg.GIDIdx != -1 || cfg.Conn != qp.RC || cfg.ByDuration || cfg.Client() {
			t.Errorf("%s: %+v", c.t.Program(), cfg)
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
		{WriteBW, "-d rocelab0 -x 1 --report_gbits -F -a -q 2 10.0.0.1", func(c Config) bool {
			return c.Dev == "rocelab0" && c.GIDIdx == 1 && c.ReportGbits && c.All && c.QPs == 2 && c.ServerName == "10.0.0.1" &&
				c.Size == MaxSize && c.CQMod == 100 // -a keeps the moderation: its sizes start small
		}, ""},
		{WriteBW, "-n 50 -s 4096", func(c Config) bool { return c.TxDepth == 50 && c.CQMod == 50 }, ""},
		{WriteBW, "-s 8192", func(c Config) bool { return c.CQMod == 100 }, ""},
		{WriteBW, "-s 8193", func(c Config) bool { return c.CQMod == 1 }, ""},
		{WriteBW, "-s 16K -Q 10", func(c Config) bool { return c.Size == 16384 && c.CQMod == 10 && len(c.notices) == 1 }, ""},
		{WriteBW, "-s 1M", func(c Config) bool { return c.Size == 1<<20 }, ""},
		{WriteBW, "-s 0x100", func(c Config) bool { return c.Size == 256 }, ""},
		{WriteBW, "-n 30000 -s 64", func(c Config) bool { return c.NoPeak }, ""}, // the peak search stops at 20000
		{WriteBW, "-D 10", func(c Config) bool {
			return c.ByDuration && c.Duration == 10 && c.Margin == 2 && c.Iters == 0 && c.NoPeak
		}, ""},
		{WriteBW, "-D 3 -f 0", func(c Config) bool { return c.Margin == 0 }, ""},
		{WriteBW, "-b -c UC", func(c Config) bool { return c.Bidir && c.Conn == qp.UC && !c.NoPeak }, ""},
		{SendBW, "", func(c Config) bool { return c.NoPeak }, ""}, // the receiving server has no peak
		{SendBW, "-b", func(c Config) bool { return !c.NoPeak && c.RxDepth == 512 }, ""},
		{SendBW, "-n 101", func(c Config) bool { return c.RxDepth == 102 }, ""}, // perftest's odd-depth work-around
		{SendBW, "-c UD -n 200", func(c Config) bool { return c.Conn == qp.UD && c.RxDepth == 200 && c.CQMod == 100 }, ""},
		{SendLat, "-c UD -n 20000", func(c Config) bool { return c.RxDepth == 16000 }, ""},
		{SendLat, "-n 20", func(c Config) bool { return c.RxDepth == 20 && c.TxDepth == 1 && c.CQMod == 1 }, ""},
		{SendLat, "-U -H", func(c Config) bool { return c.Unsorted && c.Histogram }, ""},
		{ReadBW, "-o 4 -s 4096 -D 2 -m 2048", func(c Config) bool {
			return c.OutReads == 4 && c.Size == 4096 && c.Duration == 2 && c.Margin == 0 && c.MTU == 2048
		}, ""},
		{AtomicBW, "-A CMP_AND_SWAP -o 2", func(c Config) bool { return c.Atomic == CmpAndSwap && c.OutReads == 2 }, ""},
		{AtomicBW, "--report-both -b", func(c Config) bool { return c.ReportBoth && c.Bidir }, ""},
		{WriteLat, "--tclass 0x48 -I 64", func(c Config) bool { return c.TrafficClass == 0x48 && c.InlineAsked }, ""},
		{WriteLat, "-m 1000", func(c Config) bool { return c.MTU == 1000 }, ""}, // checked against the port at run time

		// Refused in perftest's words.
		{ReadBW, "-c UC", nil, " UC connection not possible in READ/ATOMIC verbs"},
		{WriteBW, "-c UD", nil, " UD connection only possible in SEND verb"},
		{WriteBW, "-c XX", nil, " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}"},
		{SendLat, "-q 2", nil, " Multiple QPs only available on bw tests"},
		{SendLat, "-b", nil, " Bidirectional is only available in BW test"},
		{WriteLat, "-N", nil, " NoPeak only valid for BW tests"},
		{WriteBW, "-U", nil, " is Available only on Latency tests"},
		{WriteBW, "-H", nil, " Available only on Latency tests"},
		{WriteBW, "-o 4", nil, " Setting Outstanding reads only available on READ verb"},
		{WriteBW, "-r 4", nil, " On RDMA verbs rx depth can be only 1"},
		{WriteBW, "-A FETCH_AND_ADD", nil, " You are not running the atomic_lat/bw test!"},
		{AtomicBW, "-A ADD", nil, " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}"},
		{AtomicBW, "-s 16", nil, "Message size cannot be changed for Atomic tests "},
		{AtomicBW, "-a", nil, "Message size cannot be changed for Atomic tests "},
		{ReadLat, "-I 0", nil, " Inline feature not available on READ/Atomic verbs"},
		{WriteBW, "-n 2", nil, " Iteration num should be between 5 and 100000000"},
		{WriteBW, "-n x", nil, " Iteration num argument x should be int"},
		{WriteBW, "-t 0", nil, " Tx depth should be between 1 and 15000"},
		{WriteBW, "-q 0", nil, " num of Qps should be between 1 and 16384"},
		{WriteBW, "-Q 2000", nil, " CQ moderation should be between 1 and 1024"},
		{WriteBW, "-s 0", nil, " Message Size should be between 1 and 2147483647"},
		{WriteBW, "-S 16", nil, " Only 15 Service levels"},
		{WriteBW, "-D 0", nil, " Duration period must be positive"},
		{WriteBW, "-f -1", nil, " Margin must be non-negative"},
		{WriteBW, "-D 4 -f 2", nil, "please check that DURATION > 2*MARGIN"},
		{WriteBW, "-f 3", nil, "please check that DURATION > 2*MARGIN"}, // against the default 5 s
		{WriteBW, "-D 2 -a", nil, "Duration mode currently doesn't support running on all sizes."},
		{WriteBW, "-T 32", nil, " TOS only valid for rdma_cm based QP and RawEth QP "},
		{WriteBW, "-L 64", nil, " Hop limit only valid for RawEth QP "},
		{WriteBW, "-n 10 -n 20", nil, " Duplicated argument: iters"},
		{WriteBW, "a b", nil, " Invalid Command line. Please check command rerun "},
		{WriteBW, "--bogus", nil, "Invalid Command or flag."},
		{WriteBW, "-i 2", nil, "rocelab devices have port 1 only"},

		// Refused by rocelab, naming what is missing.
		{WriteBW, "-R", nil, "RDMA-CM"},
		{WriteBW, "-c XRC", nil, "not supported by rocelab devices"},
		{WriteBW, "-X 1", nil, "completion vectors"},
		{SendLat, "-C", nil, "nanoseconds"},
		{WriteBW, "-l 4", nil, "post lists"},
		{WriteBW, "--run_infinitely", nil, "--run_infinitely"},
		{WriteBW, "--use-srq", nil, "--use-srq"},
		{WriteBW, "--force-link IB", nil, "Ethernet"},
		{WriteBW, "-B 00:11:22:33:44:55", nil, "Raw Ethernet"},
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
	if _, err := ParseArgs(WriteBW, []string{"-h"}); !errors.Is(err, errHelp) {
		t.Errorf("-h: %v", err)
	}
	if _, err := ParseArgs(WriteBW, []string{"-V"}); !errors.Is(err, errVersion) || err.Error() != "Version: 6.06" {
		t.Errorf("-V: %v", err)
	}
	if _, err := ParseArgs(WriteBW, []string{"--bogus"}); !errors.Is(err, ErrUsage) {
		t.Errorf("an unknown option is a usage error: %v", err)
	}
}

// FuzzParseArgs: whatever the command line, the parser returns an error or a
// configuration the runs can use.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"-x 1 -a -q 2 10.0.0.1", "-D 3 -b -s 8K", "-c UD -n 7 -r 3", "-A CMP_AND_SWAP -o 200",
		"-s 9000 -Q 5 -t 3", "-n 100000000 -t 15000", "-U -H -D 1 -f 0", "--tclass=255 -m 4096"} {
		f.Add(uint8(SendBW), s)
	}
	f.Fuzz(func(t *testing.T, test uint8, line string) {
		tt := Test(test % 7)
		c, err := ParseArgs(tt, strings.Fields(line))
		if err != nil {
			return
		}
		ok := c.Size >= 1 && c.TxDepth >= 1 && c.CQMod >= 1 && c.CQMod <= c.TxDepth && c.QPs >= 1 && c.RxDepth >= 1 &&
			(c.ByDuration || c.Iters >= 5) && (!c.ByDuration || (c.Iters == 0 && c.NoPeak && c.Duration > 2*c.Margin && c.Margin >= 0)) &&
			(tt.verb() != verbAtomic || c.Size == atomicSize) && (!tt.Latency() || (c.QPs == 1 && !c.Bidir)) &&
			(c.Conn != qp.UD || tt.verb() == verbSend) && (!c.All || c.Size == MaxSize)
		if !ok {
			t.Errorf("%s %q: %+v", tt.Program(), line, c)
		}
	})
}
