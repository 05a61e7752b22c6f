package verbs_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/rnic/verbs"
)

// TestErrors: the service's errors name the problem and wrap the rnic's sentinels; bad
// work requests complete with errors; nothing disturbs the connection.
func TestErrors(t *testing.T) {
	l := newLab(t)
	a, b := pair(t, l, 4096)
	c := a.ctx
	if err := c.DeallocPD(a.pd); !errors.Is(err, rnic.ErrBusy) {
		t.Errorf("dealloc busy PD: %v", err)
	}
	if err := c.DestroyCQ(a.cq); !errors.Is(err, rnic.ErrBusy) {
		t.Errorf("destroy busy CQ: %v", err)
	}
	if _, err := c.QueryPort(2); !errors.Is(err, rnic.ErrInvalidArgument) || !strings.Contains(err.Error(), "port 2") {
		t.Errorf("query port 2: %v", err)
	}
	if _, err := c.QueryGID(7); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("query GID 7: %v", err)
	}
	if _, err := c.RegMR(a.pd, 4096, qp.AccessRemoteWrite); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("remote write without local write: %v", err)
	}
	if err := c.ModifyQP(a.qp, &qp.Attr{State: qp.StateRTR}, qp.AttrState); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("RTS to RTR: %v", err)
	}
	if _, err := c.CreateQP(b.pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: b.cq, RecvCQ: b.cq, Cap: rnic.QPCap{MaxSendWR: 1, MaxRecvWR: 1}}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Errorf("QP with another context's PD: %v", err)
	}
	if err := a.qp.PostSend(&qp.SendWR{Opcode: 42}); !errors.Is(err, qp.ErrInvalidWR) {
		t.Errorf("unknown opcode: %v", err)
	}
	if err := a.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: make([]qp.SGE, 3)}); !errors.Is(err, qp.ErrInvalidWR) {
		t.Errorf("too many SGEs: %v", err)
	}
	// A bad lkey and an out-of-range SGE complete with errors (the QP then flushes).
	if err := a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: 12345}},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq, 1)[0]; wc.WRID != 1 || wc.Status == qp.WCSuccess {
		t.Errorf("bad lkey completion %+v", wc)
	}
	if err := a.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: a.mr.Addr() + 4000, Length: 800, LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq, 1)[0]; wc.WRID != 2 || wc.Status == qp.WCSuccess {
		t.Errorf("out-of-range SGE completion %+v", wc)
	}
	// The connection still works, and a fresh QP pair too.
	a2 := newAppOn(t, c, qp.RC, 4096, nil)
	b2 := newAppOn(t, b.ctx, qp.RC, 4096, nil)
	connect(t, a2, b2)
	connect(t, b2, a2)
	if err := a2.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: a2.mr.Addr(), Length: 8, LKey: a2.mr.LKey()}},
		RemoteAddr: b2.mr.Addr(), RKey: b2.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, a2.cq, 1))
	// Destroying in order works; the handles are gone afterwards.
	if err := c.DestroyQP(a.qp); err != nil {
		t.Fatal(err)
	}
	if err := c.DestroyQP(a.qp); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("destroy QP twice: %v", err)
	}
}

// TestMalformedMessages speaks raw datagrams to the service: short, wrong version,
// unknown op, wrong body size, unexpected descriptors, bogus handles. Each gets an
// error response and the connection keeps working.
func TestMalformedMessages(t *testing.T) {
	l := newLab(t)
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: l.addrs[0], Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	buf, oob := make([]byte, wire.MaxMessage), make([]byte, wire.OOBSpace)
	roundTrip := func(msg []byte, fds ...int) (wire.Header, string) {
		t.Helper()
		if err := wire.Send(sock, msg, fds...); err != nil {
			t.Fatal(err)
		}
		resp, got, err := wire.Recv(sock, buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		wire.CloseFDs(got)
		h, body, err := wire.ParseHeader(resp)
		if err != nil {
			t.Fatal(err)
		}
		return h, string(body)
	}
	if h, _ := roundTrip(wire.AppendRequest(nil, wire.OpHello, 1, &wire.Hello{MinVersion: 1, MaxVersion: 1})); h.Word != 0 {
		t.Fatalf("hello: code %d", h.Word)
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	cases := []struct {
		name string
		msg  []byte
		fds  []int
		code wire.Code
	}{
		{"short", []byte{1, 0, 2}, nil, wire.CodeProtocol},
		{"version", []byte{9, 0, 5, 0, 0, 0, 0, 0}, nil, wire.CodeProtocol},
		{"unknown op", wire.AppendRequest(nil, 999, 1, nil), nil, wire.CodeNotSupported},
		{"long body", append(wire.AppendRequest(nil, wire.OpAllocPD, 1, nil), 1, 2, 3), nil, wire.CodeProtocol},
		{"short body", wire.AppendRequest(nil, wire.OpCreateCQ, 1, &wire.Handle{Handle: 1}), nil, wire.CodeProtocol},
		{"stray fd", wire.AppendRequest(nil, wire.OpAllocPD, 1, nil), []int{int(r.Fd())}, wire.CodeProtocol},
		{"MR without fd", wire.AppendRequest(nil, wire.OpRegMR, 1, &wire.RegMR{PD: 1, Length: 4096}), nil, wire.CodeProtocol},
		{"MR on a pipe", wire.AppendRequest(nil, wire.OpRegMR, 1, &wire.RegMR{PD: 1, Length: 4096}), []int{int(w.Fd())}, wire.CodeNotFound},
		{"bad handle", wire.AppendRequest(nil, wire.OpDestroyQP, 1, &wire.Handle{Handle: 12345}), nil, wire.CodeNotFound},
		{"huge CQ", wire.AppendRequest(nil, wire.OpCreateCQ, 1, &wire.CreateCQ{CQE: 1 << 30}), nil, wire.CodeInvalidArgument},
		{"QP on nothing", wire.AppendRequest(nil, wire.OpCreateQP, 1, &wire.CreateQP{PD: 7, MaxSendWR: 1}), nil, wire.CodeNotFound},
	}
	for _, tc := range cases {
		h, msg := roundTrip(tc.msg, tc.fds...)
		if wire.Code(h.Word) != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, h.Word, msg, tc.code)
		}
	}
	// Still serving: a PD, and an MR on a pipe (not a sealed memfd) is refused by name.
	h, _ := roundTrip(wire.AppendRequest(nil, wire.OpAllocPD, 2, nil))
	if h.Word != 0 {
		t.Fatalf("alloc PD after garbage: code %d", h.Word)
	}
	if h, msg := roundTrip(wire.AppendRequest(nil, wire.OpRegMR, 1, &wire.RegMR{PD: 1, Length: 4096}), int(w.Fd())); wire.Code(h.Word) != wire.CodeInvalidArgument || !strings.Contains(msg, "memfd") {
		t.Errorf("MR on a pipe: code %d: %s", h.Word, msg)
	}
}

// TestPeerCredRejected: a service that admits only another uid refuses this process
// with an error that says why.
func TestPeerCredRejected(t *testing.T) {
	l := newLab(t, service.WithAllowedUIDs(uint32(os.Getuid())+4242))
	_, err := verbs.Open(l.addrs[0])
	if !errors.Is(err, verbs.ErrPermission) || !strings.Contains(err.Error(), "uid") {
		t.Fatalf("open: %v", err)
	}
	if s := l.srvs[0].Stats(); s.Rejected != 1 || s.Clients != 0 {
		t.Errorf("stats %+v", s)
	}
}

const childEnv = "ROCELAB_VERBS_TEST_CHILD"

// TestMain lets the test binary act as a separate application process.
func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		child(addr)
		return
	}
	if arg := os.Getenv(floodEnv); arg != "" {
		flood(arg)
		return
	}
	os.Exit(m.Run())
}

// child is an application in another process: it creates objects, registers a memory
// region, reports its keys on stdout and waits for the parent to write a pattern into
// it, verifies the pattern and says so; then it holds everything until killed.
func child(addr string) {
	ctx, err := verbs.Open(addr)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	a := &app{ctx: ctx}
	a.pd, _ = ctx.AllocPD()
	ch, _ := ctx.CreateCompChannel()
	a.cq, _ = ctx.CreateCQ(64, ch)
	a.mr, err = ctx.RegMR(a.pd, 1<<20, access)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	srq, _ := ctx.CreateSRQ(a.pd, rnic.SRQInitAttr{MaxWR: 8})
	a.qp, err = ctx.CreateQP(a.pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: a.cq, RecvCQ: a.cq, Cap: rnic.QPCap{MaxSendWR: 8, MaxRecvWR: 8}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx.CreateQP(a.pd, verbs.QPInitAttr{Type: qp.UD, SendCQ: a.cq, RecvCQ: a.cq, SRQ: srq, Cap: rnic.QPCap{MaxSendWR: 8}})
	fmt.Println("ready", uint32(a.qp.QPN()), a.mr.Addr(), a.mr.RKey())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 3 && f[0] == "connect" {
			peerQPN, _ := strconv.Atoi(f[1])
			peerGID, _ := strconv.Atoi(f[2])
			at := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: access}
			ctx.ModifyQP(a.qp, &at, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
			at = qp.Attr{State: qp.StateRTR, AV: qp.AddressVector{DGID: gidOf(peerGID)}, PathMTU: 4096, DestQPN: uint32ToQPN(peerQPN), MaxDestRdAtomic: 1, MinRNRTimer: 12}
			if err := ctx.ModifyQP(a.qp, &at, qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
				fmt.Println("error", err)
			}
			fmt.Println("connected")
		}
		if len(f) == 2 && f[0] == "verify" {
			seed, _ := strconv.Atoi(f[1])
			want := make([]byte, a.mr.Length())
			fill(want, uint32(seed))
			if string(want) == string(a.mr.Bytes()) {
				fmt.Println("verified")
			} else {
				fmt.Println("mismatch")
			}
		}
	}
	select {} // hold everything until killed
}

// TestCrossProcessWriteAndKill: an application in a child process registers memory;
// this process RDMA-WRITEs 1 MiB into it through the other host; the child verifies
// every byte in its own mapping. Then the child is killed with SIGKILL: the service
// reclaims all its objects and keeps serving.
func TestCrossProcessWriteAndKill(t *testing.T) {
	reclaimed := make(chan int, 4)
	l := newLab(t, service.WithReclaimHook(func(pid int32, n int) { reclaimed <- n }))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+l.addrs[1])
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(stdout)
	line := func() []string {
		t.Helper()
		if !out.Scan() {
			t.Fatalf("child: %v", out.Err())
		}
		return strings.Fields(out.Text())
	}
	f := line()
	if f[0] != "ready" {
		t.Fatalf("child: %v", f)
	}
	peerQPN, _ := strconv.Atoi(f[1])
	addr, _ := strconv.ParseUint(f[2], 10, 64)
	rkey, _ := strconv.ParseUint(f[3], 10, 32)
	if s := l.srvs[1].Stats(); s.Clients != 1 || s.Objects != 7 {
		t.Errorf("service with the child: %+v", s)
	}
	a := newApp(t, l.addrs[0], qp.RC, 1<<20, nil)
	fmt.Fprintf(stdin, "connect %d 1\n", a.qp.QPN())
	if f := line(); f[0] != "connected" {
		t.Fatalf("child: %v", f)
	}
	connectTo(t, a, gidOf(2), uint32ToQPN(peerQPN))
	fill(a.mr.Bytes(), 99)
	for i := range 16 {
		off := uint64(i) << 16
		if err := a.qp.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: qp.WRWrite, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: a.mr.Addr() + off, Length: 1 << 16, LKey: a.mr.LKey()}}, RemoteAddr: addr + off, RKey: uint32(rkey)}); err != nil {
			t.Fatal(err)
		}
	}
	wantOK(t, poll(t, a.cq, 16))
	fmt.Fprintf(stdin, "verify 99\n")
	if f := line(); f[0] != "verified" {
		t.Fatalf("child: %v", f)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	select {
	case n := <-reclaimed:
		if n != 7 {
			t.Errorf("reclaimed %d objects, want 7", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the killed child's objects were not reclaimed")
	}
	if s := l.srvs[1].Stats(); s.Clients != 0 || s.Objects != 0 {
		t.Errorf("service after the kill: %+v", s)
	}
	// The service still serves: a new client can connect and write to our app.
	c := newApp(t, l.addrs[1], qp.RC, 1<<16, nil)
	if err := a.ctx.ModifyQP(a.qp, &qp.Attr{State: qp.StateReset}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	connect(t, c, a)
	connect(t, a, c)
	if err := c.qp.PostSend(&qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: c.mr.Addr(), Length: 64, LKey: c.mr.LKey()}},
		RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, poll(t, c.cq, 1))
}
