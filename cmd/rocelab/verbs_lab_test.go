package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

// The app processes of TestLabRDMAWrite are this test binary, re-executed by
// `rocelab exec` inside a host's namespace with ROCELAB_TEST_APP set.
func TestMain(m *testing.M) {
	switch os.Getenv("ROCELAB_TEST_APP") {
	case "":
		os.Exit(runTests(m))
	case "write-target":
		exitWith(writeTarget(os.Getenv("ROCELAB_TEST_SIZE")))
	case "write-source":
		exitWith(writeSource(os.Getenv("ROCELAB_TEST_PEER"), os.Getenv("ROCELAB_TEST_SIZE")))
	case "victim":
		exitWith(victim())
	case "survivor":
		exitWith(survivor(os.Getenv("ROCELAB_TEST_PEER")))
	case "int-datagram":
		exitWith(sendINTDatagram(os.Getenv("ROCELAB_TEST_PEER")))
	}
}

func exitWith(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

const appPort = 18600

// endpoint is what the two apps exchange over TCP before the transfer.
type endpoint struct {
	QPN  uint32 `json:"qpn"`
	PSN  uint32 `json:"psn"`
	GID  string `json:"gid"`
	RKey uint32 `json:"rkey"`
	Addr uint64 `json:"addr"`
}

// fillPattern writes the transfer's content: a 64-bit word per 8 bytes, a function of
// its offset, so a misplaced block is caught as surely as a missing one.
func fillPattern(b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord(uint64(i)))
	}
}

func patternWord(off uint64) uint64 {
	x := off*0x9E3779B97F4A7C15 + 0x6A09E667F3BCC909
	return x ^ x>>29
}

// appContext opens the host's soft-RNIC through its verbs service and creates an RC QP.
func appContext(size int, access qp.Access) (*verbs.Context, *verbs.MR, *verbs.CQ, *verbs.QP, error) {
	ctx, err := verbs.Open("")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	mr, err := ctx.RegMR(pd, size, access)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cq, err := ctx.CreateCQ(256, nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	x, err := ctx.CreateQP(pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq,
		Cap: rnic.QPCap{MaxSendWR: 128, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return ctx, mr, cq, x, nil
}

func connectQP(ctx *verbs.Context, x *verbs.QP, local, peer endpoint) error {
	addr, err := netip.ParseAddr(peer.GID)
	if err != nil {
		return err
	}
	gid := roce.GIDFromAddr(addr)
	a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: qp.AccessRemoteWrite}
	if err := ctx.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
		return err
	}
	a = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: gid}, PathMTU: roce.MTU1024,
		DestQPN: roce.QPN(peer.QPN), RQPSN: roce.PSN(peer.PSN), MaxDestRdAtomic: 1, MinRNRTimer: 12}
	if err := ctx.ModifyQP(x, &a, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|
		qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return err
	}
	a = qp.Attr{State: qp.StateRTS, SQPSN: roce.PSN(local.PSN), Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	return ctx.ModifyQP(x, &a, qp.AttrState|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrSQPSN|qp.AttrMaxQPRdAtomic)
}

func localEndpoint(ctx *verbs.Context, x *verbs.QP, mr *verbs.MR, psn uint32) (endpoint, error) {
	gid, err := ctx.QueryGID(1) // the IPv4 GID, as rdma-core tools take it with -g 1
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{QPN: uint32(x.QPN()), PSN: psn, GID: gid.String(), RKey: mr.RKey(), Addr: mr.Addr()}, nil
}

// writeTarget is the app in h1: it exposes a buffer, lets the peer RDMA-WRITE into it,
// and on the peer's "done" checks every byte.
func writeTarget(sizeArg string) error {
	var size int
	fmt.Sscan(sizeArg, &size)
	ctx, mr, _, x, err := appContext(size, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if err != nil {
		return err
	}
	defer ctx.Close()
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", appPort))
	if err != nil {
		return err
	}
	fmt.Println("listening") // the test waits for this line
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	local, err := localEndpoint(ctx, x, mr, 0x1234)
	if err != nil {
		return err
	}
	r := bufio.NewReader(c)
	var peer endpoint
	if err := json.NewDecoder(r).Decode(&peer); err != nil {
		return err
	}
	if err := connectQP(ctx, x, local, peer); err != nil {
		return err
	}
	if err := json.NewEncoder(c).Encode(local); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil || line != "done\n" {
		return fmt.Errorf("waiting for done: %q %v", line, err)
	}
	b := mr.Bytes()
	for i := 0; i+8 <= len(b); i += 8 {
		if got, want := binary.LittleEndian.Uint64(b[i:]), patternWord(uint64(i)); got != want {
			fmt.Fprintf(c, "bad at %d: %#x, want %#x\n", i, got, want)
			return fmt.Errorf("byte %d differs", i)
		}
	}
	_, err = fmt.Fprintf(c, "verified %d bytes\n", len(b))
	return err
}

// writeSource is the app in h2: it RDMA-WRITEs its buffer into the target's in 64 KB
// messages, up to 64 in flight, then says done and relays the target's verdict.
func writeSource(peerAddr, sizeArg string) error {
	var size int
	fmt.Sscan(sizeArg, &size)
	ctx, mr, cq, x, err := appContext(size, qp.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer ctx.Close()
	fillPattern(mr.Bytes())
	c, err := net.DialTimeout("tcp", net.JoinHostPort(peerAddr, fmt.Sprint(appPort)), 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	local, err := localEndpoint(ctx, x, mr, 0x5678)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(c).Encode(local); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	var peer endpoint
	if err := json.NewDecoder(r).Decode(&peer); err != nil {
		return err
	}
	if err := connectQP(ctx, x, local, peer); err != nil {
		return err
	}
	const msg, depth = 64 << 10, 64
	start := time.Now()
	posted, done, inflight := 0, 0, 0
	sgl := make([]qp.SGE, 1)
	wcs := make([]qp.WC, 32)
	total := size / msg
	for done < total {
		for inflight < depth && posted < total {
			off := posted * msg
			sgl[0] = qp.SGE{Addr: mr.Addr() + uint64(off), Length: msg, LKey: mr.LKey()}
			if err := x.PostSend(&qp.SendWR{WRID: uint64(posted), Opcode: qp.WRWrite, Flags: qp.SendSignaled,
				SGL: sgl, RemoteAddr: peer.Addr + uint64(off), RKey: peer.RKey}); err != nil {
				return fmt.Errorf("post %d: %w", posted, err)
			}
			posted++
			inflight++
		}
		n, err := cq.PollCQ(wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				return fmt.Errorf("WR %d: %v", wc.WRID, wc.Status)
			}
		}
		done += n
		inflight -= n
	}
	el := time.Since(start)
	fmt.Printf("wrote %d bytes in %v: %.2f Gb/s\n", size, el.Round(time.Millisecond), float64(size)*8/el.Seconds()/1e9)
	if _, err := c.Write([]byte("done\n")); err != nil {
		return err
	}
	verdict, err := r.ReadString('\n')
	fmt.Print(verdict)
	if err != nil || !strings.HasPrefix(verdict, "verified") {
		return errors.New("the target did not verify the data")
	}
	return nil
}

// TestLabRDMAWrite: in a two-host lab, an app process in h2 RDMA-WRITEs 1 GiB into an
// app process's buffer in h1 through their soft-RNICs' verbs services and the Go
// switch; the target checks every byte.
func TestLabRDMAWrite(t *testing.T) {
	c := newCLI(t)
	name := labName("w")
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	defer c.run("down", name)
	size := 1 << 30
	if testing.Short() {
		size = 64 << 20
	}
	env := []string{"ROCELAB_TEST_SIZE=" + fmt.Sprint(size)}
	target := c.cmd("exec", "--lab", name, "h1", "--", os.Args[0])
	target.Env = append(target.Env, append(env, "ROCELAB_TEST_APP=write-target")...)
	target.Stderr = os.Stderr
	out, err := target.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("target: %q %v", line, err)
	}
	source := c.cmd("exec", "--lab", name, "h2", "--", os.Args[0])
	source.Env = append(source.Env, append(env, "ROCELAB_TEST_APP=write-source", "ROCELAB_TEST_PEER=10.0.0.1")...)
	got, err := source.CombinedOutput()
	t.Logf("source: %s", got)
	if err != nil {
		t.Fatalf("source: %v", err)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	if !strings.Contains(string(got), fmt.Sprintf("verified %d bytes", size)) {
		t.Fatalf("the target did not verify %d bytes", size)
	}
}

// BenchmarkLabApps runs rocelab's write_bw (64 KiB messages) and send_lat (64
// bytes) between app processes in two lab hosts, as users run them with rocelab exec,
// prints their tables and reports the average Gb/s and the typical and 99th
// percentile latency (half round trip, as perftest reports it): on
// topologies/two-hosts.yaml as shipped (1500-byte links, so a 1 KiB RoCE MTU, rxe's
// default) and with 9000-byte links (a 4 KiB RoCE MTU, as RDMA deployments with jumbo
// frames run), where a 64 KiB message is 16 data frames instead of 64.
func BenchmarkLabApps(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("lab benchmarks need root (namespaces and TAPs)")
	}
	dir := b.TempDir()
	for _, pkg := range []string{".", "../write_bw", "../send_lat"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	c := &cli{bin: filepath.Join(dir, "rocelab"), store: netns.Store{Root: filepath.Join(dir, "state")}}
	shipped, err := os.ReadFile("../../topologies/two-hosts.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, mtu := range []string{"1500", "9000"} {
		file := filepath.Join(dir, "two-hosts-"+mtu+".yaml")
		if err := os.WriteFile(file, bytes.ReplaceAll(shipped, []byte("mtu: 1500"), []byte("mtu: "+mtu)), 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run("mtu="+mtu, func(b *testing.B) { benchLabApps(b, c, file) })
	}
}

// benchLabApps is BenchmarkLabApps on the lab of topology file.
func benchLabApps(b *testing.B, c *cli, file string) {
	name := labName("bench")
	run := func(args ...string) string {
		out, err := c.cmd(args...).CombinedOutput()
		if err != nil {
			b.Fatalf("rocelab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("up", "-f", file, "--name", name)
	defer run("down", name)
	l := &ibverbsLab{cli: c, name: name}
	pair := func(tool string, args ...string) string { return l.perftestPair(b, tool, args...) }
	for b.Loop() {
		bw := pair("write_bw", "-x", "1", "-s", "65536", "-n", "20000", "--report_gbits")
		lat := pair("send_lat", "-x", "1", "-s", "64", "-n", "5000")
		if v, ok := tableValue(bw, "65536", 3); ok {
			b.ReportMetric(v, "Gb/s")
		}
		// send_lat: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
		if v, ok := tableValue(lat, "64", 4); ok {
			b.ReportMetric(v, "p50-µs")
		}
		if v, ok := tableValue(lat, "64", 7); ok {
			b.ReportMetric(v, "p99-µs")
		}
	}
}

// tableValue returns column col of the perftest table row whose first column is key.
func tableValue(out, key string, col int) (float64, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > col && f[0] == key {
			var v float64
			if _, err := fmt.Sscan(f[col], &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
