package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/qp"
)

// retryExcDeadline is when the survivor of TestLabPeerKilledRetryExc must have its
// error: (retry_cnt 7 + 1) transport timeouts of 4.096 µs × 2^14 (connectQP's
// attributes) after the WRITE that finds the peer gone, plus a second for a loaded
// machine's scheduling.
const (
	retryExcAfter = 8 * (4096 * time.Nanosecond << 14)
	retrySlack    = time.Second
)

// victim is the app in h1 of TestLabPeerKilledRetryExc: it connects an RC QP, prints
// its PID and waits to be killed.
func victim() error {
	ctx, mr, _, x, err := appContext(4096, qp.AccessLocalWrite|qp.AccessRemoteWrite)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", appPort))
	if err != nil {
		return err
	}
	fmt.Println("listening")
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	local, err := localEndpoint(ctx, x, mr, 0x1234)
	if err != nil {
		return err
	}
	var peer endpoint
	if err := json.NewDecoder(c).Decode(&peer); err != nil {
		return err
	}
	if err := connectQP(ctx, x, local, peer); err != nil {
		return err
	}
	if err := json.NewEncoder(c).Encode(local); err != nil {
		return err
	}
	fmt.Printf("pid %d\n", os.Getpid())
	select {} // until SIGKILL
}

// survivor is the app in h2: one WRITE into the victim to show the QPs work, then,
// once told on stdin that the victim is killed, WRITEs until one fails and reports
// its status and how long after its post it came.
func survivor(peerAddr string) error {
	ctx, mr, cq, x, err := appContext(4096, qp.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer ctx.Close()
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
	var peer endpoint
	if err := json.NewDecoder(c).Decode(&peer); err != nil {
		return err
	}
	if err := connectQP(ctx, x, local, peer); err != nil {
		return err
	}
	write := func() (qp.WC, time.Duration, error) {
		start := time.Now()
		err := x.PostSend(&qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, RemoteAddr: peer.Addr, RKey: peer.RKey,
			SGL: []qp.SGE{{Addr: mr.Addr(), Length: 4096, LKey: mr.LKey()}}})
		if err != nil {
			return qp.WC{}, 0, err
		}
		wcs := make([]qp.WC, 1)
		for {
			n, err := cq.PollCQ(wcs)
			if err != nil || n == 1 {
				return wcs[0], time.Since(start), err
			}
			if time.Since(start) > retryExcAfter+10*time.Second {
				return qp.WC{}, 0, fmt.Errorf("no completion %v after the post", time.Since(start))
			}
		}
	}
	if wc, _, err := write(); err != nil || wc.Status != qp.WCSuccess {
		return fmt.Errorf("first WRITE: %v %v", wc.Status, err)
	}
	fmt.Println("connected")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "killed\n" {
		return fmt.Errorf("waiting for the kill: %q %v", line, err)
	}
	// The service reclaims the victim's QP once it sees its socket close: until then
	// a WRITE may still succeed.
	for range 100 {
		wc, took, err := write()
		if err != nil {
			return err
		}
		if wc.Status != qp.WCSuccess {
			fmt.Printf("status %v after %v\n", wc.Status, took)
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("100 WRITEs succeeded into a killed app")
}

// TestLabPeerKilledRetryExc: in a two-host lab, kill -9 of one app process makes its
// peer's next WRITE complete with RETRY_EXC_ERR (retry_cnt 7 = 7 retries, IBTA) after
// 8 transport timeouts, instead of resending for good.
func TestLabPeerKilledRetryExc(t *testing.T) {
	c := newCLI(t)
	name := labName("k")
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	defer c.run("down", name)
	v := c.cmd("exec", "--lab", name, "h1", "--", os.Args[0])
	v.Env = append(v.Env, "ROCELAB_TEST_APP=victim")
	v.Stderr = os.Stderr
	vout, err := v.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	defer v.Process.Kill()
	vr := bufio.NewReader(vout)
	if line, err := vr.ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("victim: %q %v", line, err)
	}
	s := c.cmd("exec", "--lab", name, "h2", "--", os.Args[0])
	s.Env = append(s.Env, "ROCELAB_TEST_APP=survivor", "ROCELAB_TEST_PEER=10.0.0.1")
	s.Stderr = os.Stderr
	sin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Process.Kill()
	sr := bufio.NewReader(sout)
	var pid int
	if line, err := vr.ReadString('\n'); err != nil || !strings.HasPrefix(line, "pid ") {
		t.Fatalf("victim: %q %v", line, err)
	} else {
		fmt.Sscan(strings.TrimPrefix(line, "pid "), &pid)
	}
	if line, err := sr.ReadString('\n'); err != nil || line != "connected\n" {
		t.Fatalf("survivor: %q %v", line, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	v.Wait()
	fmt.Fprintln(sin, "killed")
	line, err := sr.ReadString('\n')
	if err != nil {
		t.Fatalf("survivor: %q %v", line, err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("survivor: %v", err)
	}
	f := strings.Fields(line) // status RETRY_EXC_ERR after 537.4ms
	if len(f) != 4 || f[0] != "status" {
		t.Fatalf("survivor: %q", line)
	}
	status := f[1]
	took, err := time.ParseDuration(f[3])
	if err != nil {
		t.Fatalf("survivor: %q: %v", line, err)
	}
	t.Logf("survivor: %s", strings.TrimSpace(line))
	if status != qp.WCRetryExcErr.String() || took < retryExcAfter || took > retryExcAfter+retrySlack {
		t.Errorf("survivor's WRITE: %s after %v, want %v after %v (+ up to %v)", status, took, qp.WCRetryExcErr, retryExcAfter, retrySlack)
	}
}
