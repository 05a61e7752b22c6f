// Package conformance runs rocelab's conformance suites: named cases that check the
// wire and telemetry encodings against vectors built from the standards' layouts,
// captures of other implementations (the Linux kernel's rxe and IOAM, ConnectX
// hardware), round trips and every overflow rule. `rocelab conformance` prints the
// results as a table and as JUnit XML and fails when any case fails.
//
// A case passes, fails with a reason, or is skipped with a reason (a vector that is
// only available inside the source tree, for instance).
package conformance

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Case is one named check.
type Case struct {
	Name string
	// Run returns nil on success, ErrSkip (wrapped, with the reason) when the case
	// cannot run here, or the reason it failed.
	Run func() error
}

// Suite is a named list of cases.
type Suite struct {
	Name  string
	Doc   string
	Cases []Case
}

// ErrSkip marks a case that could not run; wrap it with the reason.
var ErrSkip = errors.New("skipped")

// Result is the outcome of one case.
type Result struct {
	Suite, Case string
	Err         error // nil: passed
	Duration    time.Duration
}

// Passed reports whether the case passed.
func (r *Result) Passed() bool { return r.Err == nil }

// Skipped reports whether the case was skipped.
func (r *Result) Skipped() bool { return errors.Is(r.Err, ErrSkip) }

// Failed reports whether the case failed.
func (r *Result) Failed() bool { return r.Err != nil && !r.Skipped() }

// Suites returns every suite, in the order `rocelab conformance` runs them.
func Suites() []Suite {
	return []Suite{roceSuite(), intSuite(), ioamSuite(), ifaSuite(), hpccSuite(), probeSuite()}
}

// Find returns the suite called name.
func Find(name string) (Suite, error) {
	var names []string
	for _, s := range Suites() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return Suite{}, fmt.Errorf("conformance: no suite %q (have %v)", name, names)
}

// Run runs the suites' cases in order. A case that panics fails with the panic value.
func Run(suites ...Suite) []Result {
	var out []Result
	for _, s := range suites {
		for _, c := range s.Cases {
			start := time.Now()
			err := runCase(c)
			out = append(out, Result{Suite: s.Name, Case: c.Name, Err: err, Duration: time.Since(start)})
		}
	}
	return out
}

func runCase(c Case) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return c.Run()
}

// Failures returns the failed results.
func Failures(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if r.Failed() {
			out = append(out, r)
		}
	}
	return out
}

// PrintTable writes one line per case and a count.
func PrintTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUITE\tCASE\tRESULT\tREASON")
	var pass, fail, skip int
	for _, r := range rs {
		status, reason := "pass", ""
		switch {
		case r.Skipped():
			status, reason = "skip", r.Err.Error()
			skip++
		case r.Failed():
			status, reason = "FAIL", r.Err.Error()
			fail++
		default:
			pass++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Suite, r.Case, status, reason)
	}
	fmt.Fprintf(tw, "\n%d passed, %d failed, %d skipped\n", pass, fail, skip)
	return tw.Flush()
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the results as JUnit XML, one testsuite per suite.
func WriteJUnit(w io.Writer, rs []Result) error {
	var doc junitSuites
	index := map[string]int{}
	for _, r := range rs {
		i, ok := index[r.Suite]
		if !ok {
			i = len(doc.Suites)
			index[r.Suite] = i
			doc.Suites = append(doc.Suites, junitSuite{Name: r.Suite})
		}
		s := &doc.Suites[i]
		c := junitCase{Name: r.Case, ClassName: "rocelab.conformance." + r.Suite, Time: seconds(r.Duration)}
		switch {
		case r.Skipped():
			c.Skipped = &junitMessage{Message: r.Err.Error()}
			s.Skipped++
		case r.Failed():
			c.Failure = &junitMessage{Message: r.Err.Error()}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range doc.Suites {
		var d time.Duration
		for _, r := range rs {
			if r.Suite == doc.Suites[i].Name {
				d += r.Duration
			}
		}
		doc.Suites[i].Time = seconds(d)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.6f", d.Seconds()) }
