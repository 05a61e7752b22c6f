package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

// runTests runs the package's tests as a harness should run labs: every lab that `up`
// starts goes down when this binary exits ($ROCELAB_EXIT_WITH), even killed by its
// timeout, and the stores of this binary's labs are indexed apart from the machine's
// ($ROCELAB_STORE_INDEX, unless the caller chose one), so that the `rocelab clean`
// these tests run never removes a crashed lab that another package's test is looking
// at.
func runTests(m *testing.M) int {
	os.Setenv(exitWithEnv, strconv.Itoa(os.Getpid()))
	if os.Getenv(netns.StoreIndexEnv) == "" {
		index, err := os.MkdirTemp("", "rocelab-stores-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(index)
		os.Setenv(netns.StoreIndexEnv, index)
	}
	return m.Run()
}

// hungLabs is what TestHelperHangsWithLabs started, for the test that runs it.
type hungLabs struct {
	Daemon      string // a lab started by up
	DaemonPID   int    // its lab process
	ExecPID     int    // a process started in it by rocelab exec
	InProcess   string // a lab run by lab.Up in the test binary itself
	InsidePID   int    // a process started in its namespace directly
	InProcStore string
}

const hungPrefix = "HUNG "

// TestHelperHangsWithLabs is not a test of its own: TestTimedOutTestLeavesNoLab runs
// it in a child test binary, where it starts a lab with up, a process in it, a lab in
// its own process and a process in that lab's namespace, says so, and hangs until the
// binary's -test.timeout kills it.
func TestHelperHangsWithLabs(t *testing.T) {
	if os.Getenv("ROCELAB_TEST_HANG") == "" {
		t.Skip("run by TestTimedOutTestLeavesNoLab")
	}
	c := &cli{t: t, bin: os.Getenv("ROCELAB_TEST_BIN"), store: netns.Store{Root: t.TempDir()}}
	var h hungLabs
	h.Daemon = labName("tod")
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", h.Daemon)
	sleeper := c.cmd("exec", "--lab", h.Daemon, "h1", "--", "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	rec := c.execRecorded(t, h.Daemon)
	h.DaemonPID, h.ExecPID = rec.Owner.PID, rec.Processes[0].PID

	tp, err := topo.Load("../../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.InProcess, h.InProcStore = labName("toi"), t.TempDir()
	if _, err := lab.Up(lab.Config{Name: h.InProcess, Topology: tp, Store: netns.Store{Root: h.InProcStore}}); err != nil {
		t.Fatal(err)
	}
	inside := exec.Command("sleep", "300")
	if err := netns.StartIn(netns.NamespaceName(h.InProcess, "h1"), inside); err != nil {
		t.Fatal(err)
	}
	h.InsidePID = inside.Process.Pid
	b, _ := json.Marshal(h)
	fmt.Printf("%s%s\n", hungPrefix, b)
	select {} // until -test.timeout panics: no cleanup of this test runs
}

// TestTimedOutTestLeavesNoLab: a test binary killed by its -test.timeout leaves no lab
// behind. Its lab started by up goes down by itself (--exit-with, from
// $ROCELAB_EXIT_WITH), with the process started in it; the lab it ran in its own
// process, under a temporary state directory, is found and removed by a plain
// `rocelab clean` that is not told that directory (the store index), with the process
// in its namespace.
func TestTimedOutTestLeavesNoLab(t *testing.T) {
	c := newCLI(t)
	index := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestHelperHangsWithLabs$", "-test.timeout=30s", "-test.v")
	child.Env = append(os.Environ(), "ROCELAB_TEST_HANG=1", "ROCELAB_TEST_BIN="+c.bin,
		netns.StoreIndexEnv+"="+index, "TMPDIR="+t.TempDir())
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var h hungLabs
	var log strings.Builder
	for sc := bufio.NewScanner(out); sc.Scan(); {
		log.WriteString(sc.Text() + "\n")
		if line, ok := strings.CutPrefix(sc.Text(), hungPrefix); ok {
			if err := json.Unmarshal([]byte(line), &h); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = child.Wait()
	head, _, _ := strings.Cut(log.String(), "\ngoroutine ") // the timeout's stack dump is long
	t.Logf("the child test binary: %v\n%s", err, head)
	if h.Daemon == "" {
		t.Fatal("the child test started no labs")
	}
	if !strings.Contains(log.String(), "test timed out after 30s") {
		t.Fatal("the child test binary did not end by its timeout")
	}

	// The daemon lab goes down by itself: its lab process and exec'd process exit and
	// its namespaces go.
	waitGone(t, h.DaemonPID, "the lab process of a lab whose --exit-with process exited")
	waitGone(t, h.ExecPID, "the process exec'd in that lab")
	for deadline := time.Now().Add(30 * time.Second); len(namespacesOf(t, h.Daemon)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lab of an exited --exit-with process still has namespaces %v", namespacesOf(t, h.Daemon))
		}
	}

	// The in-process lab is left, its owner dead; clean finds it through the index.
	if got := namespacesOf(t, h.InProcess); len(got) != 2 {
		t.Fatalf("the in-process lab's namespaces are %v before clean, want its 2", got)
	}
	clean := exec.Command(c.bin, "clean")
	clean.Env = append(os.Environ(), netns.StateRootEnv+"="+t.TempDir(), netns.StoreIndexEnv+"="+index)
	cleaned, err := clean.CombinedOutput()
	t.Logf("clean: %v\n%s", err, cleaned)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"removed lab " + h.InProcess + ": namespace " + netns.NamespaceName(h.InProcess, "h1"),
		"removed lab " + h.InProcess + ": state " + h.InProcStore} {
		if !strings.Contains(string(cleaned), want) {
			t.Errorf("clean did not say %q", want)
		}
	}
	if got := namespacesOf(t, h.InProcess); len(got) != 0 {
		t.Errorf("namespaces left after clean: %v", got)
	}
	waitGone(t, h.InsidePID, "the process in the in-process lab's namespace")
}
