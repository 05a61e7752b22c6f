package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/lab"
)

// hogScript creates CQs through pyverbs (Debian's, on rocelab's libibverbs.so.1) until
// the device refuses one, says how many it holds and the errno, and holds them until
// its standard input closes: the client that spends its whole quota.
const hogScript = `import sys
from pyverbs.device import Context
from pyverbs.cq import CQ
from pyverbs.pyverbs_error import PyverbsRDMAError
ctx = Context(name="rocelab0")
cqs = []
try:
    while True:
        cqs.append(CQ(ctx, 1))
except PyverbsRDMAError as e:
    print("held", len(cqs), "errno", e.error_code, flush=True)
sys.stdin.read()
`

// TestLabVerbsBudget: in a lab with the budget derived from the machine, a client of
// h1 that creates CQs until refused holds its share of h1's mappings and no more; it is
// refused with ENOMEM and, with ROCELAB_VERBS_DEBUG=1, one line naming the budget;
// status shows h1's use against its share; and while it holds them, another app of h1
// and h2's app open their devices and move data (ibv_rc_pingpong -c).
func TestLabVerbsBudget(t *testing.T) {
	if _, err := os.Stat("/usr/lib/python3/dist-packages/pyverbs"); err != nil {
		t.Skip("python3-pyverbs is not installed (make deps-system installs it as root)")
	}
	c := newCLI(t)
	buildLibibverbs(t, filepath.Dir(c.bin))
	l := upLab(t, c, "budget", realToolsTopology(t))
	script := filepath.Join(t.TempDir(), "hog.py")
	if err := os.WriteFile(script, []byte(hogScript), 0o644); err != nil {
		t.Fatal(err)
	}
	hog := l.exec("h1", "env", "ROCELAB_VERBS_DEBUG=1", "/usr/bin/python3", script)
	var stderr strings.Builder
	hog.Stderr = &stderr
	stdin, err := hog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := hog.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); hog.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		hog.Wait()
		t.Fatalf("the hog: %v\n%s", err, stderr.String())
	}
	t.Logf("hog: %s", strings.TrimSpace(line))
	if !strings.HasSuffix(line, "errno 12\n") {
		t.Errorf("the hog was refused with %q, want ENOMEM (12)", line)
	}

	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--lab", l.name, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	h1, h2 := st.Hosts[0].Verbs.Budget, st.Hosts[1].Verbs.Budget
	if h1 == nil || h2 == nil {
		t.Fatalf("status has no budgets: %+v %+v", st.Hosts[0].Verbs, st.Hosts[1].Verbs)
	}
	t.Logf("h1 holds %+v of its share %+v (a client's %+v)", h1.Used, h1.Host, h1.Client)
	// The hog's connection and CQs are one client's mappings: all of a client's share
	// but what one more CQ would pass.
	if h1.Used.Maps < h1.Client.Maps-1 || h1.Used.Maps > h1.Client.Maps {
		t.Errorf("h1's clients hold %d mappings, want the one client's share %d", h1.Used.Maps, h1.Client.Maps)
	}
	if h2.Used.Maps != 0 || h2.LabUse != h1.Used {
		t.Errorf("h2 has no client yet, uses %+v; the lab %+v, h1 %+v: h1's hog is charged to h1 alone", h2.Used, h2.LabUse, h1.Used)
	}

	_, out := l.pair(t, pingpongPort, "h1", []string{"ibv_rc_pingpong", "-g", "1", "-n", "100", "-c"}, "h2",
		[]string{"ibv_rc_pingpong", "-g", "1", "-n", "100", "-c"}, "10.0.0.1")
	if !strings.Contains(out, "100 iters in") {
		t.Errorf("ibv_rc_pingpong while h1's hog holds its budget:\n%s", out)
	}
	stdin.Close()
	hog.Wait()
	if !strings.Contains(stderr.String(), "mappings in the lab process, over the budget of") {
		t.Errorf("with ROCELAB_VERBS_DEBUG=1, the refusal names no budget:\n%s", stderr.String())
	}
}
