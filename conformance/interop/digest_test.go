package interop

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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
	// hold keeps Error and Errorf to msgs, off the test, until release: an attempt
	// that may be run again (a VM that went silent) fails the case only if kept.
	hold bool
}

// heldFailed reports whether the attempt under hold has reported errors.
func (r *recorder) heldFailed() bool { return r.hold && len(r.msgs) > 0 }

// discard forgets the held attempt's messages, for a run of the case again.
func (r *recorder) discard() { r.msgs, r.output = nil, "" }

// release ends the hold: the held messages fail the case.
func (r *recorder) release() {
	if r.hold {
		r.hold = false
		for _, m := range r.msgs {
			r.T.Error(m)
		}
	}
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
	if !r.hold {
		r.T.Error(args...)
	}
}

func (r *recorder) Errorf(format string, args ...any) {
	r.T.Helper()
	r.note(fmt.Sprintf(format, args...))
	if !r.hold {
		r.T.Errorf(format, args...)
	}
}

func (r *recorder) Fatal(args ...any) {
	r.T.Helper()
	r.release()
	r.note(fmt.Sprint(args...))
	r.done()
	r.T.Fatal(args...)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.T.Helper()
	r.release()
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

// TestVMStalled: only a wire silent both ways for vmSilence before the end, with the
// VM the last to send data, blames the VM.
func TestVMStalled(t *testing.T) {
	end := time.Date(2026, 11, 29, 8, 57, 31, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		c      capture
		stalls bool
	}{
		{"VM sent last, silent 90 s", capture{lastAt: end.Add(-90 * time.Second), lastDataFromVM: true}, true},
		{"VM sent last, silent exactly vmSilence", capture{lastAt: end.Add(-vmSilence), lastDataFromVM: true}, true},
		{"VM sent last, silent 29 s", capture{lastAt: end.Add(-29 * time.Second), lastDataFromVM: true}, false},
		{"h1 sent the last data", capture{lastAt: end.Add(-90 * time.Second)}, false},
		{"nothing captured", capture{lastDataFromVM: true}, false},
	} {
		if got := tc.c.vmStalled(end); got != tc.stalls {
			t.Errorf("%s: vmStalled %v, want %v", tc.name, got, tc.stalls)
		}
	}
}
