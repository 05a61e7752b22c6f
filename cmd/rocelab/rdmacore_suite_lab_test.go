package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rdmaCoreSuite is rdma-core's own test suite (tests/ of v44.0, docs/libibverbs.md),
// kept beside the repository by the project's machines and CI.
const rdmaCoreSuite = "../../../shared/suites/rdma-core"

// rdmaCoreGID is the GID index the suite runs with: the host's IPv4 RoCEv2 GID, index 1
// in rxe's table and in rocelab's (docs/libibverbs.md).
const rdmaCoreGID = "1"

// rdmaCoreTimeout bounds one test: the suite's slowest traffic tests take a few
// seconds; a test still running after this hung.
const rdmaCoreTimeout = 90 * time.Second

// suiteResult is one test's outcome: "ok", "skipped", "FAIL", "ERROR" or "HUNG".
type suiteResult struct {
	id, outcome, reason, output string
}

// TestRDMACoreSuite runs every test of rdma-core's suite (pyverbs, Debian's
// python3-pyverbs 44.0) in lab host h1 on rocelab's libibverbs.so.1 and librdmacm.so.1,
// one process per test with a time limit, and prints the tally by module with the
// reasons tests skip. Any failure, error or hang fails it. ROCELAB_RDMACORE_TESTS (a
// regular expression) narrows it to the test ids it matches.
func TestRDMACoreSuite(t *testing.T) {
	suite, err := filepath.Abs(rdmaCoreSuite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(suite, "tests", "run_tests.py")); err != nil {
		t.Skipf("rdma-core's test suite is not at %s (the machines' ../shared/suites)", suite)
	}
	if _, err := exec.Command("/usr/bin/python3", "-c", "import pyverbs.device").CombinedOutput(); err != nil {
		t.Skip("python3-pyverbs is not installed (make deps-system installs it as root)")
	}
	var only *regexp.Regexp
	if p := os.Getenv("ROCELAB_RDMACORE_TESTS"); p != "" {
		if only, err = regexp.Compile(p); err != nil {
			t.Fatalf("ROCELAB_RDMACORE_TESTS: %v", err)
		}
	}
	l := newRDMACMLab(t)

	run := func(timeout time.Duration, args ...string) (string, bool) {
		x := l.exec("h1", append([]string{"/usr/bin/python3", "tests/run_tests.py"}, args...)...)
		x.Dir = suite
		// shared/ is read-only in CI: no __pycache__.
		x.Env = append(x.Env, "PYTHONDONTWRITEBYTECODE=1")
		var out bytes.Buffer
		x.Stdout, x.Stderr = &out, &out
		// rocelab exec's child runs the test: a hung test is killed with its group.
		x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := x.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { x.Wait(); close(done) }()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		select {
		case <-done:
			return out.String(), true
		case <-ctx.Done():
			syscall.Kill(-x.Process.Pid, syscall.SIGKILL)
			<-done
			return out.String(), false
		}
	}

	list, ok := run(2*time.Minute, "--list-tests")
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "tests.test_") && (only == nil || only.MatchString(line)) {
			ids = append(ids, strings.TrimSpace(line))
		}
	}
	if !ok || len(ids) == 0 {
		t.Fatalf("listing the suite's tests found none:\n%s", list)
	}

	var results []suiteResult
	for _, id := range ids {
		out, finished := run(rdmaCoreTimeout, "--dev", "rocelab0", "--gid", rdmaCoreGID, "-v", id)
		r := classify(id, out, finished)
		results = append(results, r)
		if r.outcome != "ok" && r.outcome != "skipped" {
			t.Errorf("%s: %s\n%s", id, r.outcome, r.output)
		}
	}
	t.Logf("rdma-core v44.0 suite on rocelab (%d tests):\n%s", len(results), tally(results))
}

var (
	// A skip's reason ends the test's line (the line after its docstring's first), or
	// starts a line of its own when the library printed to stderr meanwhile.
	skipLine    = regexp.MustCompile(`(?m)(?:\.\.\. |^)skipped (?:'(.*)'|"(.*)")$`)
	summaryLine = regexp.MustCompile(`(?m)^(OK|FAILED)( \((.*)\))?\s*$`)
)

// classify reads unittest's verbose output of one test.
func classify(id, out string, finished bool) suiteResult {
	r := suiteResult{id: id, output: out}
	m := summaryLine.FindStringSubmatch(out)
	switch {
	case !finished:
		r.outcome = "HUNG"
	case m == nil:
		r.outcome = "ERROR" // the process died without unittest's summary
	case m[1] == "FAILED" && strings.Contains(m[3], "errors="):
		r.outcome = "ERROR"
	case m[1] == "FAILED":
		r.outcome = "FAIL"
	case strings.Contains(m[3], "skipped="):
		r.outcome = "skipped"
		if s := skipLine.FindStringSubmatch(out); s != nil {
			r.reason = s[1] + s[2] // Python quotes a reason holding ' with "
		}
	default:
		r.outcome = "ok"
	}
	return r
}

// tally prints the results by module and the skip reasons with their counts.
func tally(results []suiteResult) string {
	type row struct{ ran, ok, skipped, fail, errs, hung int }
	mods := map[string]*row{}
	reasons := map[string]int{}
	var total row
	for _, r := range results {
		mod := strings.Join(strings.SplitN(r.id, ".", 3)[:2], ".")
		if mods[mod] == nil {
			mods[mod] = &row{}
		}
		for _, x := range []*row{mods[mod], &total} {
			x.ran++
			switch r.outcome {
			case "ok":
				x.ok++
			case "skipped":
				x.skipped++
			case "FAIL":
				x.fail++
			case "ERROR":
				x.errs++
			case "HUNG":
				x.hung++
			}
		}
		if r.outcome == "skipped" {
			reasons[r.reason]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %5s %6s %7s %6s %6s %4s\n", "module", "ran", "passed", "skipped", "failed", "errors", "hung")
	names := make([]string, 0, len(mods))
	for m := range mods {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range append(names, "total") {
		x := mods[m]
		if m == "total" {
			x = &total
		}
		fmt.Fprintf(&b, "%-28s %5d %6d %7d %6d %6d %4d\n", m, x.ran, x.ok, x.skipped, x.fail, x.errs, x.hung)
	}
	b.WriteString("skip reasons:\n")
	rs := make([]string, 0, len(reasons))
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		return reasons[rs[i]] > reasons[rs[j]] || reasons[rs[i]] == reasons[rs[j]] && rs[i] < rs[j]
	})
	for _, r := range rs {
		fmt.Fprintf(&b, "%5d  %s\n", reasons[r], r)
	}
	return b.String()
}
