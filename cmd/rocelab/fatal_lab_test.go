package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocelab/rocelab/lab"
)

// rnicGoneBound is how soon after the lab process dies an application blocked on its
// RNIC must return: the library's watcher sees the verbs socket hang up (POLLRDHUP) at
// once, so a second is room for a busy machine, not for a timeout.
const rnicGoneBound = time.Second

// TestLibibverbsRNICGone: an application learns that its RNIC is gone when the lab
// process dies (kill -9), as from a kernel device that hit a fatal error
// (libibverbs/test/fatal_check.c): blocked in ibv_get_cq_event it gets EIO, its
// outstanding receives complete with IBV_WC_FATAL_ERR, a thread blocked in
// ibv_get_async_event gets IBV_EVENT_DEVICE_FATAL, ibv_alloc_pd fails with EIO and
// its destroys succeed, so that it exits cleanly instead of hanging.
func TestLibibverbsRNICGone(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Dir(c.bin)
	buildLibibverbs(t, dir)
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "fatal_check"),
		"../../libibverbs/test/fatal_check.c", "-libverbs", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("build fatal_check: %v\n%s", err, out)
	}
	rnicGone(t, c, upLab(t, c, "gone", "../../topologies/two-hosts.yaml"), filepath.Join(dir, "fatal_check"))
}

// TestLibrdmacmRNICGone: an RDMA-CM application blocked in rdma_get_cm_event when the
// lab process dies gets RDMA_CM_EVENT_DEVICE_REMOVAL for its identifier, as the
// kernel's rdma_cm tells the identifiers of a removed device, and ENODEV after
// (librdmacm/test/cm_gone_check.c).
func TestLibrdmacmRNICGone(t *testing.T) {
	l := newRDMACMLab(t)
	dir := filepath.Dir(l.bin)
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "cm_gone_check"),
		"../../librdmacm/test/cm_gone_check.c", "-lrdmacm", "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("build cm_gone_check: %v\n%s", err, out)
	}
	rnicGone(t, l.cli, l, filepath.Join(dir, "cm_gone_check"))
}

// rnicGone runs prog in h1 of l until it prints "ready", kills the lab process and
// checks that prog then finishes with "ok" within rnicGoneBound.
func rnicGone(t *testing.T, c *cli, l *ibverbsLab, prog string) {
	t.Helper()
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--lab", l.name, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	app := l.exec("h1", prog)
	stdout, err := app.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	app.Stderr = app.Stdout
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	var out strings.Builder
	for !strings.Contains(out.String(), "ready\n") {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			app.Wait()
			t.Fatalf("%s did not get ready:\n%s", filepath.Base(prog), out.String())
		}
	}
	killed := time.Now()
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rest, _ := r.ReadString(0)
	took := time.Since(killed)
	out.WriteString(rest)
	err = app.Wait()
	t.Logf("%s, %v after the kill:\n%s", filepath.Base(prog), took.Round(time.Millisecond), out.String())
	if err != nil || !strings.HasSuffix(out.String(), "ok\n") {
		t.Errorf("%s: %v", filepath.Base(prog), err)
	}
	if took > rnicGoneBound {
		t.Errorf("%s returned %v after the lab process died, want within %v", filepath.Base(prog), took, rnicGoneBound)
	}
}
