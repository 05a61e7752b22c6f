package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rocelab/rocelab/lab"
)

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
	l := upLab(t, c, "gone", "../../topologies/two-hosts.yaml")
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--lab", l.name, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	app := l.exec("h1", filepath.Join(dir, "fatal_check"))
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
			t.Fatalf("fatal_check did not get ready:\n%s", out.String())
		}
	}
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rest, _ := bufio.NewReader(r).ReadString(0)
	out.WriteString(rest)
	err = app.Wait()
	t.Logf("fatal_check:\n%s", out.String())
	if err != nil || !strings.HasSuffix(out.String(), "ok\n") {
		t.Errorf("fatal_check: %v", err)
	}
}
