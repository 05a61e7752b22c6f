package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newRDMACMLab is a two-host lab whose rocelab binary has rocelab's libibverbs.so.1 and
// librdmacm.so.1 beside it (docs/rdmacm.md). It skips without root or without
// librdmacm-dev, rdmacm-utils and perftest (make deps-system installs them as root).
func newRDMACMLab(t testing.TB) *ibverbsLab {
	c := newCLI(t)
	buildRDMACM(t, c)
	return upLab(t, c, "cma", realToolsTopology(t))
}

// buildRDMACM puts rocelab's libibverbs.so.1 and librdmacm.so.1 beside c's rocelab
// binary, with cm_check, ep_check and dgram_check, or skips the test without rdmacm-utils' headers
// and tools.
func buildRDMACM(t testing.TB, c *cli) {
	t.Helper()
	if _, err := os.Stat("/usr/include/rdma/rdma_cma.h"); err != nil {
		t.Skip("librdmacm-dev is not installed (make deps-system installs it as root)")
	}
	if _, err := exec.LookPath("rping"); err != nil {
		t.Skip("rping is not installed (make deps-system installs rdmacm-utils as root)")
	}
	dir := filepath.Dir(c.bin)
	buildLibibverbs(t, dir)
	if out, err := exec.Command("../../librdmacm/build.sh", filepath.Join(dir, "lib", "librdmacm.so.1")).CombinedOutput(); err != nil {
		t.Fatalf("build librdmacm.so.1: %v\n%s", err, out)
	}
	// The checks are compiled against the system's librdmacm-dev, as any
	// program is.
	for _, prog := range []string{"cm_check", "ep_check", "dgram_check"} {
		if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, prog),
			"../../librdmacm/test/"+prog+".c", "-lrdmacm", "-libverbs").CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", prog, err, out)
		}
	}
}

// noListener is how rping and perftest report the REJ "invalid service ID" that a
// connection request gets from a host where nothing listens on the port yet.
var noListener = []string{"RDMA_CM_EVENT_REJECTED, error 8", "Unexpected CM event bl blka 8",
	"Event: RDMA_CM_EVENT_REJECTED; error: 8.",
	"cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8", "udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 5",
	"rdma_connect: Connection refused", "event: RDMA_CM_EVENT_REJECTED, error: 8", "no listener yet"}

// cmPair runs server in srvHost and client in cliHost and returns both outputs; either
// failing fails the test. The server listens on RDMA-CM, which shows nowhere in the
// host's socket tables, so a client the server's host rejects for want of a listener
// (noListener) is started again.
func (l *ibverbsLab) cmPair(t testing.TB, srvHost string, server []string, cliHost string, client []string) (string, string) {
	t.Helper()
	return l.cmRun(t, srvHost, server, cliHost, client, true)
}

// cmServing is cmPair for a server that serves until stopped (cmtime's): once the
// client has succeeded, the server is killed; it returns the client's output.
func (l *ibverbsLab) cmServing(t testing.TB, srvHost string, server []string, cliHost string, client []string) string {
	t.Helper()
	_, cli := l.cmRun(t, srvHost, server, cliHost, client, false)
	return cli
}

func (l *ibverbsLab) cmRun(t testing.TB, srvHost string, server []string, cliHost string, client []string, waitServer bool) (string, string) {
	t.Helper()
	clients := l.verbsClients(t, srvHost)
	srv := l.startServer(t, srvHost, server)
	defer func() { srv.stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := markLateness(t, l.name, l.clis()...)
	deadline := time.Now().Add(20 * time.Second)
	var out []byte
	for {
		cli := l.exec(cliHost, client...)
		cmd := exec.CommandContext(ctx, cli.Path, cli.Args[1:]...)
		cmd.Env = cli.Env
		cmd.WaitDelay = 5 * time.Second
		var err error
		if out, err = cmd.CombinedOutput(); err == nil {
			break
		}
		rejected := false
		for _, s := range noListener {
			rejected = rejected || strings.Contains(string(out), s)
		}
		select {
		case <-srv.done:
			t.Fatalf("server %v exited: %v\n%s\nclient:\n%s", server, srv.err, srv.out.String(), out)
		default:
		}
		if rejected && time.Now().Before(deadline) {
			// The server is started again with the client: one that connects more
			// than once (perftest's -R: parameters on one connection, data on a
			// second) may have passed its first listen, and a new client's first
			// connection would reach its second.
			t.Logf("client %v: rejected, the server not listening yet: both again", client)
			srv.stop()
			l.waitVerbsClients(t, srvHost, clients) // until its port is free again
			srv = l.startServer(t, srvHost, server)
			continue
		}
		// The lab's counters first, while the pair's QPs and CM IDs still exist: a
		// pair that hangs prints nothing (its output is buffered in a pipe).
		status, _ := l.cmd("status", "--lab", l.name).CombinedOutput()
		counters, _ := l.cmd("status", "--json", "--lab", l.name).CombinedOutput()
		status = append(status, counters...)
		srv.stop()            // srv.out is written until the server is waited for
		if ctx.Err() != nil { // too slow: judged only if the machine kept up
			if kept, why := start.since(t).KeptUp(); !kept {
				t.Logf("client %v: %v\n%s\nserver:\n%s\nlab:\n%s", client, err, out, srv.out.String(), status)
				t.Skipf("client %v did not finish in 90 s, and %s; not judged", client, why)
			}
		}
		t.Fatalf("client %v: %v\n%s\nserver:\n%s\nlab:\n%s", client, err, out, srv.out.String(), status)
	}
	if !waitServer {
		srv.stop()
		return srv.out.String(), string(out)
	}
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		srv.stop()
		t.Fatalf("server %v did not finish\n%s", server, srv.out.String())
	}
	if srv.err != nil {
		t.Fatalf("server %v: %v\n%s\nclient:\n%s", server, srv.err, srv.out.String(), out)
	}
	return srv.out.String(), string(out)
}

// cmServer is a server program cmRun runs in a lab host.
type cmServer struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{} // closed when cmd has been waited for; then err is its result
	err  error
}

func (l *ibverbsLab) startServer(t testing.TB, host string, argv []string) *cmServer {
	t.Helper()
	s := &cmServer{cmd: l.exec(host, argv...), done: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	// Killing `rocelab exec` leaves its command running until the lab's down stops it,
	// holding the output pipe open: Wait gives up on the pipe this long after the kill,
	// so that a failing pair fails the test instead of hanging it.
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	return s
}

// stop kills the server and what it started, if they still run, and waits for it.
// Killing rocelab exec alone would leave its program running, holding its ports,
// until the lab goes down.
func (s *cmServer) stop() {
	children := processChildren()
	var kill func(pid int)
	kill = func(pid int) {
		for _, c := range children[pid] {
			syscall.Kill(c, syscall.SIGKILL)
			kill(c)
		}
	}
	kill(s.cmd.Process.Pid)
	s.cmd.Process.Kill()
	<-s.done
}

// verbsClients is how many verbs clients host's soft-RNIC serves.
func (l *ibverbsLab) verbsClients(t testing.TB, host string) int {
	t.Helper()
	h := l.rnicStats(t, host)
	if h.Verbs == nil {
		t.Fatalf("rocelab status shows no verbs service in %s", host)
	}
	return h.Verbs.Clients
}

// waitVerbsClients waits until host's soft-RNIC serves at most n verbs clients: a
// killed program's are gone once the service has seen its socket close.
func (l *ibverbsLab) waitVerbsClients(t testing.TB, host string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := l.verbsClients(t, host); got > n; got = l.verbsClients(t, host) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's soft-RNIC still serves %d verbs clients 10 s after a kill, want at most %d", host, got, n)
		}
	}
}

// TestLibrdmacm: unmodified programs linked against the system's librdmacm connect
// through the soft-RNICs' CM agents: rdmacm-utils' rping (RDMA-CM connection, SEND,
// RDMA READ and WRITE, the server seeing the client's disconnect) over IPv4 and IPv6,
// perftest's ib_write_bw -R (connection and its parameter exchange over rdma_cm),
// ucmatose, and cm_check (the calls' behaviour and error paths).
func TestLibrdmacm(t *testing.T) {
	l := newRDMACMLab(t)

	for _, tc := range []struct{ name, addr string }{{"rping-ipv4", "10.0.0.1"}, {"rping-ipv6", "fd00::1"}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := l.cmPair(t, "h1", []string{"rping", "-s", "-a", tc.addr, "-v", "-C", "10"},
				"h2", []string{"rping", "-c", "-a", tc.addr, "-v", "-C", "10"})
			const last = "rdma-ping-9: JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"
			if !strings.Contains(srv, "server ping data: "+last) || !strings.Contains(srv, "server DISCONNECT EVENT") {
				t.Errorf("rping server did not see 10 pings and the disconnect:\n%s", srv)
			}
			// The client disconnects and exits without waiting for its DISCONNECTED
			// event, so whether it prints "client DISCONNECT EVENT" is a race in rping.
			if !strings.Contains(cli, "ping data: "+last) {
				t.Errorf("rping client did not see 10 pings:\n%s", cli)
			}
		})
	}

	t.Run("ucmatose", func(t *testing.T) {
		srv, cli := l.cmPair(t, "h1", []string{"ucmatose"}, "h2", []string{"ucmatose", "-s", "10.0.0.1"})
		if !strings.Contains(srv, "disconnected\ntest complete\nreturn status 0") {
			t.Errorf("ucmatose server did not complete:\n%s", srv)
		}
		if !strings.Contains(cli, "data transfers complete\ntest complete\nreturn status 0") {
			t.Errorf("ucmatose client did not complete:\n%s", cli)
		}
	})

	// udaddy: UD QPs through SIDR (rdma_cm's UDP port space): the client's ESTABLISHED
	// brings the server's QPN, Q_Key and the address handle its ten SENDs use; the
	// server answers each from an AH made from the GRH of the SEND it received. Both
	// directions, IPv4 and IPv6.
	for _, tc := range []struct{ name, srv, cli, addr string }{
		{"udaddy-ipv4", "h1", "h2", "10.0.0.1"}, {"udaddy-ipv6-reverse", "h2", "h1", "fd00::2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := l.cmPair(t, tc.srv, []string{"udaddy", "-b", tc.addr}, tc.cli, []string{"udaddy", "-s", tc.addr})
			if !strings.Contains(srv, "sending replies\ndata transfers complete\ntest complete\nreturn status 0") {
				t.Errorf("udaddy server did not complete:\n%s", srv)
			}
			if !strings.Contains(cli, "receiving data transfers\ndata transfers complete\ntest complete\nreturn status 0") {
				t.Errorf("udaddy client did not complete:\n%s", cli)
			}
		})
	}

	// librdmacm/test/cm_check.c: rejection with private data, connect and accept with
	// the default parameters, a SEND, the disconnect, the pollable channel, the error
	// paths; rdma_set_option (ToS, ACK timeout), the accept's private data in the
	// client's ESTABLISHED, QPs the application moves itself with rdma_init_qp_attr
	// on either side, CONNECT_RESPONSE and rdma_establish; UD through SIDR.
	t.Run("cm_check", func(t *testing.T) {
		srv, cli := l.cmPair(t, "h1", []string{"cm_check", "server", "10.0.0.1", "7471"},
			"h2", []string{"cm_check", "client", "10.0.0.1", "7471"})
		for _, o := range []struct{ out, last string }{{srv, "ok   the client's UD SEND, behind its GRH\n"}, {cli, "ok   a UD SEND to the server\n"}} {
			if strings.Contains(o.out, "FAIL") || !strings.HasSuffix(o.out, o.last) {
				t.Errorf("cm_check:\n%s", o.out)
			}
		}
		t.Logf("cm_check: %d checks in the server, %d in the client", strings.Count(srv, "ok   "), strings.Count(cli, "ok   "))
	})

	// The convenience API (rdma_verbs.h) of rdmacm-utils' examples: synchronous
	// identifiers (rdma_create_ep, rdma_get_request), the library's CQs, rdma_reg_msgs,
	// rdma_post_send/recv and rdma_get_*_comp. Both directions, IPv4 and IPv6.
	// Each case has ports of its own.
	for i, tc := range []struct{ name, srv, cli, addr string }{
		{"ipv4", "h1", "h2", "10.0.0.1"}, {"ipv6", "h1", "h2", "fd00::1"},
		{"ipv4-reverse", "h2", "h1", "10.0.0.2"}, {"ipv6-reverse", "h2", "h1", "fd00::2"},
	} {
		port := func(n int) string { return strconv.Itoa(7500 + 10*i + n) }
		t.Run("rdma_server-"+tc.name, func(t *testing.T) {
			srv, cli := l.cmPair(t, tc.srv, []string{"rdma_server", "-p", port(0)}, tc.cli, []string{"rdma_client", "-s", tc.addr, "-p", port(0)})
			if srv != "rdma_server: start\nrdma_server: end 0\n" || !strings.HasSuffix(cli, "rdma_client: start\nrdma_client: end 0\n") {
				t.Errorf("rdma_server:\n%s\nrdma_client:\n%s", srv, cli)
			}
		})
		// rdma_xserver -c r: RC over the same API, the client's SEND posted inline.
		// -c x: XRC. The server's rdma_create_ep makes an XRC_RECV QP and an XRC SRQ
		// in librdmacm's domain of the device, the client an XRC_SEND QP; the client's
		// SEND names the server's SRQ number from its private data.
		for j, conn := range []string{"r", "x"} {
			t.Run("rdma_xserver-"+conn+"-"+tc.name, func(t *testing.T) {
				p := port(1 + 2*j)
				srv, cli := l.cmPair(t, tc.srv, []string{"rdma_xserver", "-c", conn, "-p", p},
					tc.cli, []string{"rdma_xclient", "-c", conn, "-s", tc.addr, "-p", p})
				if srv != "rdma_xserver: start\nrdma_xserver: end 0\n" || !strings.HasSuffix(cli, "rdma_xclient: start\nrdma_xclient: end 0\n") {
					t.Errorf("rdma_xserver -c %s:\n%s\nrdma_xclient -c %s:\n%s", conn, srv, conn, cli)
				}
			})
		}
		// cmtime: 20 connections at once, each with a QP of rdma_create_qp's own CQs;
		// its server serves until stopped. A client rejected for want of a listener
		// prints the REJECTED event and exits 0: the wrapper makes that a failure, for
		// cmRun to try again.
		t.Run("cmtime-"+tc.name, func(t *testing.T) {
			cli := l.cmServing(t, tc.srv, []string{"cmtime", "-p", port(2)}, tc.cli, []string{"sh", "-c",
				`o=$(cmtime -s "$0" -p "$1" -c 20 2>&1); s=$?; echo "$o"; case "$o" in *REJECTED*) exit 1;; esac; exit $s`, tc.addr, port(2)})
			for _, want := range []string{"connecting\ndisconnecting\ndestroying id\n", "connect      :", "destroy      :"} {
				if !strings.Contains(cli, want) {
					t.Errorf("cmtime client lacks %q:\n%s", want, cli)
				}
			}
			if strings.Contains(cli, "event:") || strings.Contains(cli, "failed") {
				t.Errorf("cmtime client:\n%s", cli)
			}
		})
	}

	// librdmacm/test/ep_check.c: rdma_getaddrinfo, ephemeral ports (from h1's own
	// ip_local_port_range, set here apart from h2's), EADDRINUSE and EADDRNOTAVAIL,
	// REUSEADDR, the synchronous calls and their errors, endpoints with the library's
	// CQs, SRQ, RDMA WRITE and READ through the rdma_verbs.h inlines, a connection to
	// the port the server's port-0 listener got, rdma_migrate_id.
	t.Run("ep_check", func(t *testing.T) {
		if out, err := l.exec("h1", "sh", "-c", "echo 41000 41999 > /proc/sys/net/ipv4/ip_local_port_range").CombinedOutput(); err != nil {
			t.Fatalf("set h1's ip_local_port_range: %v\n%s", err, out)
		}
		srv, cli := l.cmPair(t, "h1", []string{"ep_check", "server", "7480"}, "h2", []string{"ep_check", "client", "10.0.0.1", "7480"})
		for _, o := range []struct{ out, last string }{{srv, "ok   rdma_disconnect returns with DISCONNECTED\n"}, {cli, "ok   rdma_disconnect returns with DISCONNECTED\n"}} {
			if strings.Contains(o.out, "FAIL") || !strings.HasSuffix(o.out, o.last) {
				t.Errorf("ep_check:\n%s", o.out)
			}
		}
		if !strings.Contains(srv, "ok   rdma_bind_addr to port 0: a port of ip_local_port_range (41000-41999)") {
			t.Errorf("the server's ports are not from h1's range:\n%s", srv)
		}
		t.Logf("ep_check: %d checks in the server, %d in the client", strings.Count(srv, "ok   "), strings.Count(cli, "ok   "))
	})

	t.Run("ib_write_bw-R", func(t *testing.T) {
		srv, cli := l.cmPair(t, "h1", []string{"ib_write_bw", "-R", "-n", "200"},
			"h2", []string{"ib_write_bw", "-R", "-n", "200", "10.0.0.1"})
		for _, out := range []string{srv, cli} {
			for _, want := range []string{"rdma_cm QPs\t : ON", "Data ex. method : rdma_cm", " 65536      200 "} {
				if !strings.Contains(out, want) {
					t.Errorf("ib_write_bw -R lacks %q:\n%s", want, out)
				}
			}
		}
	})
}
