package pingpong

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/apps/apptest"
)

// runPair runs the example's server on h1 and its client on h2 over a loopback TCP
// exchange and returns both outputs.
func runPair(t *testing.T, k Kind, args string) (srv, cli string, sres, cres Result) {
	t.Helper()
	l := apptest.New(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	scfg, err := ParseArgs(k, strings.Fields(args))
	if err != nil {
		t.Fatal(err)
	}
	scfg.VerbsAddr, scfg.Listener = l.Addrs[0], ln
	ccfg, err := ParseArgs(k, append(strings.Fields(args), "-p", strconv.Itoa(port), "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ccfg.VerbsAddr = l.Addrs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
	t.Logf("%s %s\nserver:\n%sclient:\n%s", k.Program(), args, sout.String(), cout.String())
	return sout.String(), cout.String(), sres, cres
}

var (
	localRE  = regexp.MustCompile(`(?m)^  local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}[,:] GID (::ffff:10\.0\.0\.[12]|fd00::[12])$`)
	remoteRE = regexp.MustCompile(`(?m)^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID (::ffff:10\.0\.0\.[12]|fd00::[12])$`)
	bytesRE  = regexp.MustCompile(`(?m)^(\d+) bytes in \d+\.\d\d seconds = \d+\.\d\d Mbit/sec$`)
	itersRE  = regexp.MustCompile(`(?m)^(\d+) iters in \d+\.\d\d seconds = \d+\.\d\d usec/iter$`)
)

func checkOutput(t *testing.T, out string, nqp int, wantBytes int64, iters int, res Result) {
	t.Helper()
	if n := len(localRE.FindAllString(out, -1)); n != nqp {
		t.Errorf("%d local address lines, want %d:\n%s", n, nqp, out)
	}
	if n := len(remoteRE.FindAllString(out, -1)); n != nqp {
		t.Errorf("%d remote address lines, want %d:\n%s", n, nqp, out)
	}
	m := bytesRE.FindStringSubmatch(out)
	if m == nil || m[1] != strconv.FormatInt(wantBytes, 10) {
		t.Errorf("no \"%d bytes in\" line:\n%s", wantBytes, out)
	}
	m = itersRE.FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(iters) {
		t.Errorf("no \"%d iters in\" line:\n%s", iters, out)
	}
	if res.Mbps <= 0 || res.UsecIter <= 0 || res.Invalid != 0 {
		t.Errorf("result %+v", res)
	}
}

func TestRCPingpong(t *testing.T) {
	srv, cli, sres, cres := runPair(t, RC, "-g 1 -n 300 -c")
	checkOutput(t, srv, 1, 4096*300*2, 300, sres)
	checkOutput(t, cli, 1, 4096*300*2, 300, cres)
	if strings.Contains(srv, "invalid data") {
		t.Error(srv)
	}
}

func TestRCPingpongIPv6Events(t *testing.T) {
	srv, cli, sres, cres := runPair(t, RC, "-g 2 -n 200 -s 1000 -m 512 -e")
	checkOutput(t, srv, 1, 1000*200*2, 200, sres)
	checkOutput(t, cli, 1, 1000*200*2, 200, cres)
	if !strings.Contains(cli, "GID fd00::2") {
		t.Errorf("client output lacks its IPv6 GID:\n%s", cli)
	}
}

func TestUCPingpong(t *testing.T) {
	srv, cli, sres, cres := runPair(t, UC, "-g 1 -n 300 -s 512")
	checkOutput(t, srv, 1, 512*300*2, 300, sres)
	checkOutput(t, cli, 1, 512*300*2, 300, cres)
}

func TestUDPingpong(t *testing.T) {
	srv, cli, sres, cres := runPair(t, UD, "-g 1 -n 300 -s 1024")
	checkOutput(t, srv, 1, 1024*300*2, 300, sres)
	checkOutput(t, cli, 1, 1024*300*2, 300, cres)
	if !strings.Contains(cli, ": GID ::ffff:10.0.0.2") {
		t.Errorf("ud_pingpong prints \"PSN 0x...: GID\":\n%s", cli)
	}
}

func TestSRQPingpong(t *testing.T) {
	srv, cli, sres, cres := runPair(t, SRQ, "-g 1 -q 4 -r 16 -n 200 -s 256")
	checkOutput(t, srv, 4, 256*200*2, 200, sres)
	checkOutput(t, cli, 4, 256*200*2, 200, cres)
}

// TestNoGID: without -g the client sends a zero GID, as rdma-core does; RoCE cannot
// use it, and the server says so instead of hanging.
func TestNoGID(t *testing.T) {
	l := apptest.New(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scfg, _ := ParseArgs(RC, []string{"-g", "1"})
	scfg.VerbsAddr, scfg.Listener = l.Addrs[0], ln
	ccfg, _ := ParseArgs(RC, []string{"-p", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "127.0.0.1"})
	ccfg.VerbsAddr = l.Addrs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := Run(ctx, scfg, &bytes.Buffer{}); errc <- err }()
	var cout bytes.Buffer
	_, cerr := Run(ctx, ccfg, &cout)
	serr := <-errc
	if serr == nil || !strings.Contains(serr.Error(), "pass -g") || cerr == nil {
		t.Fatalf("server: %v, client: %v", serr, cerr)
	}
	if !strings.Contains(cout.String(), "GID ::\n") {
		t.Errorf("client without -g prints GID :: as rdma-core does:\n%s", cout.String())
	}
}

func TestUDSizeAbovePortMTU(t *testing.T) {
	l := apptest.New(t)
	cfg := Defaults(UD) // 2048 > the 1024 of a 1500-byte link
	cfg.VerbsAddr = l.Addrs[0]
	_, err := Run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "Requested size larger than port MTU (1024)") {
		t.Fatalf("error %v", err)
	}
}

func TestBadDevice(t *testing.T) {
	cfg := Defaults(RC)
	cfg.Dev, cfg.VerbsAddr = "mlx5_0", "@nowhere"
	if _, err := Run(context.Background(), cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "IB device mlx5_0 not found") {
		t.Fatalf("error %v", err)
	}
}
