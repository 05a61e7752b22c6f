package interop

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// failures collects what each failed case reported, for TestMain to print once every
// test has run: go test -v streams a case's messages as it runs, minutes before the
// end of the suite, and the tail of a CI log holds only the list of cases.
var failures struct {
	sync.Mutex
	cases []string
}

// recorder is a case's testing.TB that also keeps its failure messages.
type recorder struct {
	*testing.T
	name   string
	msgs   []string
	output string // what the case's programs printed, when it failed
}

// keepOutput notes the programs' outputs for the digest, their last lines only: the
// messages, printed after them, are what a log's tail must show.
func (r *recorder) keepOutput(server, client string, frames []string) {
	r.output = "server (last lines):\n" + lastLines(server, 12) + "client (last lines):\n" + lastLines(client, 12) +
		fmt.Sprintf("the capture's last %d RoCEv2 frames:\n", len(frames)) + strings.Join(frames, "\n") + "\n"
}

func lastLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n")+"\n", "\n")
	return strings.Join(lines[max(0, len(lines)-n-1):], "")
}

func (r *recorder) note(msg string) { r.msgs = append(r.msgs, msg) }

func (r *recorder) Error(args ...any) {
	r.T.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Error(args...)
}

func (r *recorder) Errorf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

func (r *recorder) Fatal(args ...any) {
	r.T.Helper()
	r.note(fmt.Sprint(args...))
	r.done()
	r.T.Fatal(args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.done()
	r.T.Fatalf(format, args...)
}

// done files the case's messages if it failed; a case calls it once it has finished
// (Fatal does before it stops the case).
func (r *recorder) done() {
	if len(r.msgs) == 0 {
		return
	}
	failures.Lock()
	defer failures.Unlock()
	failures.cases = append(failures.cases, fmt.Sprintf("--- %s\n%s%s", r.name, r.output, strings.Join(r.msgs, "\n")))
	r.msgs = nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(failures.cases) > 0 {
		fmt.Printf("\n%d interop case(s) failed; what they reported:\n%s\n", len(failures.cases),
			strings.Join(failures.cases, "\n"))
	}
	os.Exit(code)
}
