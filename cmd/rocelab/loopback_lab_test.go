package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/lab"
)

// newLoopbackLab is a two-host lab whose rocelab binary has rocelab's libibverbs.so.1
// and librdmacm.so.1 beside it. It skips without root or without the RDMA packages.
func newLoopbackLab(t *testing.T) *ibverbsLab {
	c := newCLI(t)
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
	return upLab(t, c, "lpb", realToolsTopology(t))
}

// rnicStats returns host's soft-RNIC counters and verbs service from rocelab status
// --json, as host's machine reports them.
func (l *ibverbsLab) rnicStats(t testing.TB, host string) lab.HostStatus {
	t.Helper()
	var st lab.Status
	if err := json.Unmarshal([]byte(l.cliOf(host).run("status", "--json", "--lab", l.name)), &st); err != nil {
		t.Fatal(err)
	}
	for _, h := range st.Hosts {
		if h.Name == host && h.RNIC != nil {
			return h
		}
	}
	t.Fatalf("rocelab status shows no RNIC counters for %s", host)
	return lab.HostStatus{}
}

// TestLoopbackLab: both ends of unmodified RDMA programs run in ONE host of a two-host
// lab and reach each other through its soft-RNIC's loopback (docs/rnic.md, "Loopback:
// two QPs on one RNIC"), as rdma-core's tests and single-host MPI jobs expect of a
// device: rdma-core's RC, UC and UD pingpongs over IPv4 and IPv6 GIDs, perftest's
// ib_write_bw and ib_read_bw (also over rdma_cm, -R), and rping (RDMA-CM to the host's
// own address, SEND, RDMA READ and WRITE) and udaddy (UD through SIDR) over IPv4 and
// IPv6. None of their frames enters the fabric: a bridge never sends a frame back out
// of the port it came in on, so before the loopback the client's requests were lost
// there and it ended in RETRY_EXC_ERR (status 12).
func TestLoopbackLab(t *testing.T) {
	l := newLoopbackLab(t)
	before := l.rnicStats(t, "h1").RNIC.LoopbackFrames

	for _, gid := range []string{"1", "2"} { // ::ffff:10.0.0.1 and fd00::1
		for _, tc := range []struct {
			tool string
			args []string
		}{
			{"ibv_rc_pingpong", []string{"-c"}}, // -c validates the received buffer
			{"ibv_uc_pingpong", []string{"-c"}},
			{"ibv_ud_pingpong", []string{"-s", "512"}},
		} {
			t.Run(tc.tool+"/gid"+gid, func(t *testing.T) {
				args := append([]string{tc.tool, "-g", gid, "-n", "100"}, tc.args...)
				srv, cli := l.pair(t, pingpongPort, "h1", args, "h1", args, "10.0.0.1")
				if !strings.Contains(srv, "100 iters in") || !strings.Contains(cli, "100 iters in") {
					t.Fatalf("%s in one host:\nserver:\n%s\nclient:\n%s", tc.tool, srv, cli)
				}
			})
		}
	}

	// perftest: RDMA WRITE and READ bandwidth, the QPs connected over TCP (-x 1) or
	// over rdma_cm (-R, which listens on no TCP port: cmPair), both ends in h1.
	for _, args := range [][]string{{"ib_write_bw", "-x", "1"}, {"ib_read_bw", "-x", "1"}, {"ib_write_bw", "-R"}} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			args := append(args, "-n", "200")
			var out string
			if args[1] == "-R" {
				_, out = l.cmPair(t, "h1", args, "h1", append(args, "10.0.0.1"))
			} else {
				_, out = l.pair(t, pingpongPort, "h1", args, "h1", args, "10.0.0.1")
			}
			if !strings.Contains(out, "#bytes") || !strings.Contains(out, " 200 ") {
				t.Fatalf("%s printed no result:\n%s", args[0], out)
			}
		})
	}

	for _, addr := range []string{"10.0.0.1", "fd00::1"} {
		// udaddy: UD QPs through SIDR to the host's own address.
		t.Run("udaddy/"+addr, func(t *testing.T) {
			srv, cli := l.cmPair(t, "h1", []string{"udaddy", "-b", addr}, "h1", []string{"udaddy", "-s", addr})
			if !strings.Contains(srv, "data transfers complete\ntest complete\nreturn status 0") ||
				!strings.Contains(cli, "data transfers complete\ntest complete\nreturn status 0") {
				t.Errorf("udaddy in one host did not complete:\nserver:\n%s\nclient:\n%s", srv, cli)
			}
		})
		t.Run("rping/"+addr, func(t *testing.T) {
			srv, cli := l.cmPair(t, "h1", []string{"rping", "-s", "-a", addr, "-v", "-C", "10"},
				"h1", []string{"rping", "-c", "-a", addr, "-v", "-C", "10"})
			const last = "rdma-ping-9: JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"
			if !strings.Contains(srv, "server ping data: "+last) || !strings.Contains(srv, "server DISCONNECT EVENT") {
				t.Errorf("rping server did not see 10 pings and the disconnect:\n%s", srv)
			}
			if !strings.Contains(cli, "ping data: "+last) {
				t.Errorf("rping client did not see 10 pings:\n%s", cli)
			}
		})
	}

	// Every frame h1's soft-RNIC sent into the fabric is one its kernel sent (ARP, ND)
	// or an ARP request of its own: its RoCE frames all looped back. (The kernel's
	// frames are counted when handed over, before they are sent: the difference is
	// never above them.)
	r := l.rnicStats(t, "h1").RNIC
	looped := r.LoopbackFrames - before
	t.Logf("h1: %d frames looped back of %d sent, %d frames of its kernel", looped, r.TxFrames, r.HostFrames)
	// 6 pingpongs × 200 messages (and the RC ACKs), 2 rpings' connections and 10 pings
	if looped < 6*200 {
		t.Errorf("h1's soft-RNIC looped back %d frames, want at least the pingpongs' 1200 messages", looped)
	}
	if fabric := r.TxFrames - r.LoopbackFrames; fabric > r.HostFrames+r.ARPReqs {
		t.Errorf("h1's soft-RNIC sent %d frames into the fabric, more than its kernel's %d and its %d ARP requests: RoCE left the host",
			fabric, r.HostFrames, r.ARPReqs)
	}
}
