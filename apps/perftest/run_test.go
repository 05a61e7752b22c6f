package perftest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rocelab/rocelab/apps/apptest"
)

// pair is one end-to-end run: server and client against two in-process soft-RNICs.
type pair struct {
	srv, cli   string // stdout
	sres, cres Result
	exchange   string // the client's messages, as exchangeOf writes them
}

// tap relays the out-of-band connection and keeps what the client sends, one chunk
// per read: the exchange is in lockstep, so a read is a message.
type tap struct {
	mu     sync.Mutex
	chunks [][]byte
}

// relay accepts one client on pln and connects it to the server at addr.
func (tp *tap) relay(t *testing.T, pln net.Listener, addr string) {
	c, err := pln.Accept()
	pln.Close()
	if err != nil {
		return
	}
	s, err := net.Dial("tcp4", addr)
	if err != nil {
		c.Close()
		t.Error(err)
		return
	}
	go func() {
		io.Copy(c, s)
		c.(*net.TCPConn).CloseWrite()
	}()
	buf := make([]byte, 1<<16)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			tp.mu.Lock()
			tp.chunks = append(tp.chunks, append([]byte(nil), buf[:n]...))
			tp.mu.Unlock()
			s.Write(buf[:n])
		}
		if err != nil {
			s.(*net.TCPConn).CloseWrite()
			return
		}
	}
}

// exchangeOf names the client's messages as the captures of perftest do: V version,
// I the two system ints, M the MTU, K<i> QP i's key message (numbered by the first
// round), R a report value, done.
func (tp *tap) exchangeOf() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	qps := map[uint32]int{}
	for _, c := range tp.chunks {
		switch len(c) {
		case VersionSize:
			out = append(out, "V")
		case 4:
			out = append(out, "I")
		case 2:
			out = append(out, "M")
		case 8:
			out = append(out, "R")
		case DoneSize:
			out = append(out, "done")
		case KeyMsgSize:
			k, err := DecodeKeyMsg(c)
			if err != nil {
				out = append(out, "K?")
				break
			}
			i, ok := qps[k.QPN]
			if !ok {
				i = len(qps)
				qps[k.QPN] = i
			}
			out = append(out, "K"+strconv.Itoa(i))
		default:
			out = append(out, fmt.Sprintf("?%d", len(c)))
		}
	}
	return strings.Join(out, " ")
}

// exchange spells out a sequence: "K0*3" is "K0 K0 K0".
func exchange(parts ...string) string {
	var out []string
	for _, p := range parts {
		tok, n, ok := strings.Cut(p, "*")
		count := 1
		if ok {
			count, _ = strconv.Atoi(n)
		}
		for range count {
			out = append(out, tok)
		}
	}
	return strings.Join(out, " ")
}

// checkExchange compares the client's messages with perftest 4.5-0.17's, as captured
// between the real tools on rxe.
func checkExchange(t *testing.T, p pair, want string) {
	t.Helper()
	if p.exchange != want {
		t.Errorf("exchange\n%s\nwant (perftest 4.5-0.17)\n%s", p.exchange, want)
	}
}

// runPair runs the tool's server and client with the same flags over loopback TCP.
func runPair(t *testing.T, tt Test, args string) pair {
	t.Helper()
	l := apptest.New(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scfg, err := ParseArgs(tt, strings.Fields(args))
	if err != nil {
		t.Fatal(err)
	}
	scfg.VerbsAddr, scfg.Listener = l.Addrs[0], ln
	pln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var tp tap
	relayed := make(chan struct{})
	go func() {
		tp.relay(t, pln, ln.Addr().String())
		close(relayed)
	}()
	ccfg, err := ParseArgs(tt, append(strings.Fields(args), "-p", strconv.Itoa(pln.Addr().(*net.TCPAddr).Port), "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ccfg.VerbsAddr = l.Addrs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var p pair
	var sout, cout, serr, cerrOut bytes.Buffer
	errc := make(chan error, 1)
	go func() {
		var err error
		p.sres, err = Run(ctx, scfg, &sout, &serr)
		errc <- err
	}()
	cres, cerr := Run(ctx, ccfg, &cout, &cerrOut)
	if cerr != nil {
		cancel()
	}
	srvErr := <-errc
	<-relayed
	p.exchange = tp.exchangeOf()
	if srvErr != nil || cerr != nil {
		t.Fatalf("server: %v\n%s%s\nclient: %v\n%s%s", srvErr, sout.String(), serr.String(), cerr, cout.String(), cerrOut.String())
	}
	p.cres, p.srv, p.cli = cres, sout.String(), cout.String()
	t.Logf("%s %s\nserver:\n%s%sclient:\n%s%s", tt.Program(), args, p.srv, serr.String(), p.cli, cerrOut.String())
	return p
}

// The lines perftest prints (printf formats of 4.5-0.17 with their values), as
// patterns: a table header, then its rows.
var (
	bwRow     = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +([\d.]+) +([\d.]+) *(?:\t\t   | +)([\d.]+) *\n`) // REPORT_FMT or _EXT
	latRow    = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +[\d.]+ +[\d.]+ +[\d.]+ *\t +[\d.]+ *\t(-nan|[\d.]+) *\t\t[\d.]+ *\t\t[\d.]+ *\n`)
	latDurRow = regexp.MustCompile(`(?m)^ (\d+) +(\d+) +[\d.]+ +[\d.]+ *\n`)
)

// checkBW checks the report lines: one per size, with sizes and iterations as given.
func checkBW(t *testing.T, who, out string, res Result, sizes []int, iters int, peak bool) {
	t.Helper()
	rows := bwRow.FindAllStringSubmatch(out, -1)
	if len(rows) != len(sizes) || len(res.BW) != len(sizes) {
		t.Fatalf("%s: %d rows, %d reports, want %d:\n%s", who, len(rows), len(res.BW), len(sizes), out)
	}
	for i, r := range res.BW {
		if r.Size != uint64(sizes[i]) || (iters > 0 && r.Iters != uint64(iters)) || !(r.BWAvg > 0) || r.MsgRate <= 0 {
			t.Errorf("%s: report %d %+v", who, i, r)
		}
		if peak != (r.BWPeak > 0) {
			t.Errorf("%s: peak %v, want a peak: %v", who, r.BWPeak, peak)
		}
		if rows[i][1] != strconv.Itoa(sizes[i]) {
			t.Errorf("%s: row %d is for %s bytes", who, i, rows[i][1])
		}
	}
}

func TestWriteBW(t *testing.T) {
	p := runPair(t, WriteBW, "-x 1 --report_gbits -F -n 200")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done"))
	checkBW(t, "client", p.cli, p.cres, []int{65536}, 200, true)
	checkBW(t, "server", p.srv, p.sres, []int{65536}, 200, true) // the client's figures
	if p.sres.BW[0] != p.cres.BW[0] {
		t.Errorf("the server printed %+v, the client %+v", p.sres.BW[0], p.cres.BW[0])
	}
	for _, want := range []string{"                    RDMA_Write BW Test\n", " CQ Moderation   : 1\n", // 64 KiB: a CQE per WR
		" GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:02\n", resultFmtGb} {
		if !strings.Contains(p.cli, want) {
			t.Errorf("client output lacks %q:\n%s", want, p.cli)
		}
	}
}

func TestWriteBWTwoQPsIPv6(t *testing.T) {
	p := runPair(t, WriteBW, "-x 2 --report_gbits -q 2 -s 8192 -n 1000")
	// As the captures show: the round per QP twice, then a barrier.
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0", "K1", "K0", "K1", "K0", "K0", "R*5", "K0", "done"))
	checkBW(t, "client", p.cli, p.cres, []int{8192}, 2000, true) // perftest counts every QP's WRs
	if n := strings.Count(p.cli, " local address:"); n != 2 {
		t.Errorf("%d local address lines", n)
	}
}

func TestWriteBWAll(t *testing.T) {
	skipSweepUnderRace(t)
	p := runPair(t, WriteBW, "-x 1 -a -n 20")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done")) // no barrier between the sizes
	sizes := allSizes()
	checkBW(t, "client", p.cli, p.cres, sizes, 20, true)
	checkBW(t, "server", p.srv, p.sres, sizes[len(sizes)-1:], 20, true) // the last size's report
}

func TestReadBW(t *testing.T) {
	p := runPair(t, ReadBW, "-x 1 -n 200 -o 4")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done"))
	checkBW(t, "client", p.cli, p.cres, []int{65536}, 200, true)
	checkBW(t, "server", p.srv, p.sres, []int{65536}, 200, true)
	if !strings.Contains(p.cli, " OUT 0x04 RKey ") || !strings.Contains(p.cli, " Outstand reads  : 4\n") {
		t.Errorf("outstanding reads:\n%s", p.cli)
	}
}

func TestReadBWDuration(t *testing.T) {
	p := runPair(t, ReadBW, "-x 1 --report_gbits -D 2 -s 4096")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done"))
	checkBW(t, "client", p.cli, p.cres, []int{4096}, 0, false) // perftest prints no peak with -D
	if it := p.cres.BW[0].Iters; it == 0 || it%100 != 0 {
		t.Errorf("-D counts completions of 100 WRs (the CQ moderation): %d", it)
	}
}

func TestAtomicBW(t *testing.T) {
	for _, op := range []string{"", "-A CMP_AND_SWAP"} {
		t.Run(op, func(t *testing.T) { testAtomicBW(t, op) })
	}
}

func testAtomicBW(t *testing.T, op string) {
	{
		p := runPair(t, AtomicBW, "-x 1 -n 1000 "+op)
		checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done"))
		checkBW(t, "client", p.cli, p.cres, []int{8}, 1000, true)
		checkBW(t, "server", p.srv, p.sres, []int{8}, 1000, true)
		title := "Atomic FETCH_AND_ADD BW Test"
		if op != "" {
			title = "Atomic CMP_AND_SWAP BW Test"
		}
		if !strings.Contains(p.cli, title) || !strings.Contains(p.cli, " Outstand reads  : 128\n") {
			t.Errorf("header:\n%s", p.cli)
		}
		if strings.Contains(p.cli, "RKey") {
			t.Errorf("perftest prints no RKey/VAddr for atomics:\n%s", p.cli)
		}
	}
}

func TestSendBW(t *testing.T) {
	p := runPair(t, SendBW, "-x 1 -n 1000 -s 4096 -q 2")
	// ib_send_bw has its barrier between the rounds, then one before the run and no
	// report values.
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0", "K1", "K0", "K0", "K1", "K0", "K0", "done"))
	checkBW(t, "client", p.cli, p.cres, []int{4096}, 2000, true)
	checkBW(t, "server", p.srv, p.sres, []int{4096}, 2000, false) // its receive side, no peak
	if !strings.Contains(p.srv, " RX depth        : 512\n") || strings.Contains(p.srv, "TX depth") {
		t.Errorf("server header:\n%s", p.srv)
	}
}

func TestSendBWAllUD(t *testing.T) {
	p := runPair(t, SendBW, "-x 1 -a -n 50 -c UD")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*3", "K0*20", "K0", "done")) // a barrier before and after each size
	sizes := []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}                         // UD: up to the MTU
	checkBW(t, "client", p.cli, p.cres, sizes, 50, true)
	checkBW(t, "server", p.srv, p.sres, sizes, 50, false)
	if !strings.Contains(p.cli, " Connection type : UD") {
		t.Errorf("header:\n%s", p.cli)
	}
}

func TestBidirectional(t *testing.T) {
	for _, tt := range []Test{WriteBW, ReadBW, SendBW, AtomicBW} {
		t.Run(tt.Program(), func(t *testing.T) { testBidirectional(t, tt) })
	}
}

func testBidirectional(t *testing.T, tt Test) {
	{
		args := "-x 1 -b -n 500 -s 4096"
		if tt == AtomicBW {
			args = "-x 1 -b -n 500"
		}
		p := runPair(t, tt, args+" --report-both")
		checkExchange(t, p, exchange("V", "I", "I", "M", "K0*3", "K0", "R*5", "K0", "done")) // the barrier before the run
		size := map[bool]int{true: 8, false: 4096}[tt == AtomicBW]
		// One line with both directions added up, then --report-both's two.
		if rows := bwRow.FindAllString(p.cli, -1); len(rows) != 3 {
			t.Errorf("%d rows, want the sum and the two directions:\n%s", len(rows), p.cli)
		}
		if r := p.cres.BW; len(r) != 1 || r[0].Size != uint64(size) || r[0].Iters != 500 || r[0].BWPeak <= 0 || r[0].BWAvg <= 0 {
			t.Fatalf("reports %+v", r)
		}
		if s, c := p.sres.BW[0], p.cres.BW[0]; s.BWAvg != c.BWAvg || s.MsgRate != c.MsgRate {
			t.Errorf("%s: both sides print the sum: %+v, %+v", tt.Program(), s, c)
		}
		if !strings.Contains(p.srv, "Bidirectional BW Test") || !strings.Contains(p.srv, " Local results: ") {
			t.Errorf("%s server:\n%s", tt.Program(), p.srv)
		}
	}
}

func TestBidirectionalDuration(t *testing.T) {
	for _, tt := range []Test{WriteBW, SendBW} {
		t.Run(tt.Program(), func(t *testing.T) {
			p := runPair(t, tt, "-x 1 -b -D 2 -s 4096")
			if tt == SendBW { // send_bw -b -D exchanges no report values
				checkExchange(t, p, exchange("V", "I", "I", "M", "K0*5", "done"))
			} else {
				checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "R*5", "K0", "done"))
			}
			checkBW(t, "client", p.cli, p.cres, []int{4096}, 0, false)
			checkBW(t, "server", p.srv, p.sres, []int{4096}, 0, false)
		})
	}
}

func checkLat(t *testing.T, who, out string, res Result, sizes []int) {
	t.Helper()
	if !strings.Contains(out, resultFmtLat) {
		t.Errorf("%s: no latency header:\n%s", who, out)
	}
	if rows := latRow.FindAllString(out, -1); len(rows) != len(sizes) || len(res.Lat) != len(sizes) {
		t.Fatalf("%s: %d rows, %d reports, want %d:\n%s", who, len(rows), len(res.Lat), len(sizes), out)
	}
	for i, r := range res.Lat {
		if r.Size != sizes[i] || !(r.Min > 0 && r.Min <= r.Typical && r.Typical <= r.P99 && r.P99 <= r.P999 && r.P999 <= r.Max) || r.Avg <= 0 {
			t.Errorf("%s: latency %+v", who, r)
		}
	}
}

func TestSendLat(t *testing.T) {
	p := runPair(t, SendLat, "-x 1 -s 64 -n 500")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*3", "K0", "K0", "done"))
	checkLat(t, "client", p.cli, p.cres, []int{64})
	checkLat(t, "server", p.srv, p.sres, []int{64})
	if !strings.Contains(p.srv, " RX depth        : 500\n") || !strings.Contains(p.cli, " TX depth        : 1\n") {
		t.Errorf("headers:\n%s\n%s", p.srv, p.cli)
	}
}

// TestEvents: with -e every side sleeps on its completion channel when a poll finds
// nothing (perftest's use_event), and the runs complete with every iteration counted:
// a SEND test's receive CQ and send CQ share the channel, a WRITE test's one CQ, and a
// latency test waits for every single completion.
func TestEvents(t *testing.T) {
	for _, c := range []struct {
		tt          Test
		args        string
		size, iters int
	}{
		{WriteBW, "-x 1 -e -n 300", 65536, 300},
		{SendBW, "-x 1 -e -n 1000 -s 4096", 4096, 1000},
		{SendLat, "-x 1 -e -s 64 -n 300", 64, 300},
	} {
		t.Run(c.tt.Program(), func(t *testing.T) {
			p := runPair(t, c.tt, c.args)
			if c.tt.Latency() {
				checkLat(t, "client", p.cli, p.cres, []int{c.size})
				checkLat(t, "server", p.srv, p.sres, []int{c.size})
				return
			}
			checkBW(t, "client", p.cli, p.cres, []int{c.size}, c.iters, true)
		})
	}
}

func TestSendLatAllUD(t *testing.T) {
	p := runPair(t, SendLat, "-x 2 -a -n 20 -c UD")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*3", "K0*10", "K0", "done")) // a barrier before each size
	sizes := []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	checkLat(t, "client", p.cli, p.cres, sizes)
	checkLat(t, "server", p.srv, p.sres, sizes)
}

// allSizes are -a's sizes, 2 .. 2^23.
func allSizes() []int {
	var sizes []int
	for n := 2; n <= MaxSize; n *= 2 {
		sizes = append(sizes, n)
	}
	return sizes
}

func TestSendLatAll(t *testing.T) {
	skipSweepUnderRace(t)
	p := runPair(t, SendLat, "-x 1 -a -n 10")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*3", "K0*23", "K0", "done"))
	checkLat(t, "client", p.cli, p.cres, allSizes())
	checkLat(t, "server", p.srv, p.sres, allSizes())
}

func TestWriteLatAll(t *testing.T) {
	skipSweepUnderRace(t)
	p := runPair(t, WriteLat, "-x 1 -a -n 10")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4")) // no barriers, no close
	checkLat(t, "client", p.cli, p.cres, allSizes())
}

func TestWriteLat(t *testing.T) {
	p := runPair(t, WriteLat, "-x 1 -s 64 -n 500 -U")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4"))
	checkLat(t, "client", p.cli, p.cres, []int{64})
	checkLat(t, "server", p.srv, p.sres, []int{64})
	if n := strings.Count(p.cli, "\n1, "); n != 1 || !strings.Contains(p.cli, "#, usec\n") {
		t.Errorf("-U prints the samples:\n%s", p.cli)
	}
}

func TestReadLat(t *testing.T) {
	p := runPair(t, ReadLat, "-x 1 -n 500 -s 128")
	checkExchange(t, p, exchange("V", "I", "I", "M", "K0*4", "K0", "done"))
	checkLat(t, "client", p.cli, p.cres, []int{128})
	// The server only serves the reads: it prints its addresses and nothing more.
	if len(p.sres.Lat) != 0 || strings.Contains(p.srv, "#bytes") || !strings.HasSuffix(p.srv, " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:02\n"+resultLine) {
		t.Errorf("server:\n%s", p.srv)
	}
}

func TestLatencyDuration(t *testing.T) {
	for _, tt := range []Test{SendLat, WriteLat, ReadLat} {
		t.Run(tt.Program(), func(t *testing.T) {
			p := runPair(t, tt, "-x 1 -D 2")
			want := exchange("V", "I", "I", "M", "K0*4", "K0", "done")
			if tt == WriteLat {
				want = exchange("V", "I", "I", "M", "K0*4")
			}
			checkExchange(t, p, want)
			if !strings.Contains(p.cli, resultFmtLatDur) || len(latDurRow.FindAllString(p.cli, -1)) != 1 || len(p.cres.LatDur) != 1 {
				t.Fatalf("client:\n%s", p.cli)
			}
			if r := p.cres.LatDur[0]; r.Iters == 0 || r.Avg <= 0 || r.TPS <= 0 {
				t.Errorf("%+v", r)
			}
		})
	}
}

// skipSweepUnderRace skips a -a test (every size up to 8 MiB) under the race
// detector, which slows the data path too much for it (minutes instead of seconds);
// make unit runs the sweeps in its second pass, without -race.
func skipSweepUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("perftest: the -a sweep runs without -race (make unit's second pass)")
	}
}
