package perftest

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/apps/apptest"
)

func runPair(t *testing.T, tt Test, args string) (srv, cli string, sres, cres Result) {
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
	ccfg, err := ParseArgs(tt, append(strings.Fields(args), "-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ccfg.VerbsAddr = l.Addrs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sout, cout bytes.Buffer
	errc := make(chan error, 1)
	go func() {
		var err error
		sres, err = Run(ctx, scfg, &sout)
		errc <- err
	}()
	cres, cerr := Run(ctx, ccfg, &cout)
	if cerr != nil {
		cancel()
	}
	serr := <-errc
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", serr, sout.String(), cerr, cout.String())
	}
	t.Logf("%s %s\nserver:\n%sclient:\n%s", tt.Program(), args, sout.String(), cout.String())
	return sout.String(), cout.String(), sres, cres
}

func checkBW(t *testing.T, out string, res Result, size, iters int) {
	t.Helper()
	if !strings.Contains(out, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]") {
		t.Errorf("no Gb/sec table header:\n%s", out)
	}
	if len(res.BW) == 0 {
		t.Fatalf("no report")
	}
	r := res.BW[len(res.BW)-1]
	if r.Size != uint64(size) || (iters > 0 && r.Iters != uint64(iters)) || !(r.BWAvg > 0.001 && r.BWAvg < 400) || r.BWPeak < r.BWAvg*0.99 || r.MsgRate <= 0 {
		t.Errorf("report %+v", r)
	}
	if !strings.Contains(out, " "+strconv.Itoa(size)+" ") {
		t.Errorf("no line for size %d:\n%s", size, out)
	}
}

func TestWriteBW(t *testing.T) {
	srv, cli, sres, cres := runPair(t, WriteBW, "-x 1 --report_gbits -F -n 2000")
	checkBW(t, cli, cres, 65536, 2000)
	checkBW(t, srv, sres, 65536, 2000) // the server prints the client's figures
	if !strings.Contains(cli, "RDMA_Write BW Test") || !strings.Contains(cli, " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:02") {
		t.Errorf("header/address lines:\n%s", cli)
	}
}

func TestWriteBWTwoQPsIPv6(t *testing.T) {
	_, cli, _, cres := runPair(t, WriteBW, "-x 2 --report_gbits -q 2 -s 8192 -n 1000")
	checkBW(t, cli, cres, 8192, 1000)
}

func TestReadBW(t *testing.T) {
	srv, cli, sres, cres := runPair(t, ReadBW, "-x 1 --report_gbits -n 1000")
	checkBW(t, cli, cres, 65536, 1000)
	checkBW(t, srv, sres, 65536, 1000)
	if !strings.Contains(cli, " OUT 0x10") {
		t.Errorf("no outstanding reads in the address line:\n%s", cli)
	}
}

func TestReadBWDuration(t *testing.T) {
	_, cli, _, cres := runPair(t, ReadBW, "-x 1 --report_gbits -D 1 -s 4096")
	checkBW(t, cli, cres, 4096, 0)
}

func TestSendBW(t *testing.T) {
	srv, cli, sres, cres := runPair(t, SendBW, "-x 1 --report_gbits -n 1000 -s 4096")
	checkBW(t, cli, cres, 4096, 1000)
	checkBW(t, srv, sres, 4096, 1000)
}

func checkLat(t *testing.T, out string, res Result, size int) {
	t.Helper()
	if !strings.Contains(out, "t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]") {
		t.Errorf("no latency header:\n%s", out)
	}
	if len(res.Lat) != 1 {
		t.Fatalf("reports %+v", res.Lat)
	}
	r := res.Lat[0]
	if r.Size != size || !(r.Min > 0 && r.Min <= r.Typical && r.Typical <= r.P99 && r.P99 <= r.P999 && r.P999 <= r.Max) || r.Avg <= 0 {
		t.Errorf("latency %+v", r)
	}
}

func TestSendLat(t *testing.T) {
	srv, cli, sres, cres := runPair(t, SendLat, "-x 1 -s 64 -n 500")
	checkLat(t, cli, cres, 64)
	checkLat(t, srv, sres, 64)
}

func TestWriteLat(t *testing.T) {
	srv, cli, sres, cres := runPair(t, WriteLat, "-x 1 -s 64 -n 500")
	checkLat(t, cli, cres, 64)
	checkLat(t, srv, sres, 64)
}
