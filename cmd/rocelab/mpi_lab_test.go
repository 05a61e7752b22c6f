package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/lab"
)

// TestOpenMPI runs Debian's unmodified Open MPI over UCX across four lab hosts, one rank
// each: apps/mpi/mpi_check.c, compiled here with mpicc, ping-pongs between two hosts
// (every byte checked), allreduces and alltoalls, launched from h1 exactly as
// docs/libibverbs.md tells a user to, with `rocelab rsh` as the remote-shell agent.
// Each rank must report its own host (MPI sees four nodes) and the RNICs must have
// carried the ping-pong's eager messages (UCX's rc_verbs over rocelab0, not TCP): their
// SENDs count as RDMA payload at the sender and at the receiver. (The large messages go
// by UCX's rendezvous, RDMA READs, whose responses the RNICs' data counters leave out.)
func TestOpenMPI(t *testing.T) {
	for _, tool := range []string{"mpicc", "mpirun", "ucx_info"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps-system installs openmpi-bin, libopenmpi-dev and ucx-utils as root)", tool)
		}
	}
	c := newCLI(t)
	dir := filepath.Dir(c.bin)
	buildLibibverbs(t, dir)
	// UCX's RDMA-CM component loads librdmacm: rocelab's, beside libibverbs.so.1.
	if out, err := exec.Command("../../librdmacm/build.sh", filepath.Join(dir, "lib", "librdmacm.so.1")).CombinedOutput(); err != nil {
		t.Fatalf("build librdmacm.so.1: %v\n%s", err, out)
	}
	prog := filepath.Join(dir, "mpi_check")
	if out, err := exec.Command("mpicc", "-O1", "-Wall", "-Werror", "-o", prog, "../../apps/mpi/mpi_check.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	l := upLab(t, c, "mpi", "../../topologies/four-hosts.yaml")
	sent := func() uint64 {
		var st lab.Status
		if err := json.Unmarshal([]byte(c.run("status", "--lab", l.name, "--json")), &st); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, h := range st.Hosts {
			if h.RNIC != nil {
				n += h.RNIC.TxDataBytes + h.RNIC.RxDataBytes
			}
		}
		return n
	}
	before := sent()
	out, err := l.exec("h1", "mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent", "rocelab rsh",
		"-H", "h1,h2,h3,h4", "-np", "4", "--mca", "pml", "ucx", "-x", "UCX_TLS=rc_verbs,ud_verbs,self", prog).CombinedOutput()
	moved := sent() - before
	t.Logf("mpirun (%d bytes of RDMA payload sent and received by the RNICs):\n%s", moved, out)
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("mpirun: %v", err)
	}
	for _, h := range []string{"h1", "h2", "h3", "h4"} {
		if !strings.Contains(string(out), " of 4 on "+h+"\n") {
			t.Errorf("no rank reports host %s: MPI did not see four nodes", h)
		}
	}
	// The ping-pong's eager messages: 100 round trips each of 8, 64, 512 and 4096 bytes,
	// each message counted where it is sent and where it is received.
	if want := uint64(2 * 2 * 100 * (8 + 64 + 512 + 4096)); moved < want {
		t.Errorf("the RNICs sent and received %d bytes of RDMA payload, less than the ping-pong's eager messages' %d: UCX did not run over rocelab0", moved, want)
	}
}
