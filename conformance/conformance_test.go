package conformance

import (
	"bytes"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
)

func TestSuitesPass(t *testing.T) {
	for _, r := range Run(Suites()...) {
		if r.Failed() {
			t.Errorf("%s/%s: %v", r.Suite, r.Case, r.Err)
		}
	}
}

// A failing case is named with its reason in the table, in JUnit and by Failures.
func TestFailureReporting(t *testing.T) {
	s := Suite{Name: "demo", Cases: []Case{
		{"ok", func() error { return nil }},
		{"broken", func() error { return errors.New("E bit not set") }},
		{"panics", func() error { panic("boom") }},
		{"skipped", func() error { return ErrSkip }},
	}}
	rs := Run(s)
	if f := Failures(rs); len(f) != 2 || f[0].Case != "broken" || !strings.Contains(f[1].Err.Error(), "boom") {
		t.Fatalf("failures: %+v", f)
	}
	var table, junit bytes.Buffer
	if err := PrintTable(&table, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "broken   FAIL    E bit not set") || !strings.Contains(table.String(), "1 passed, 2 failed, 1 skipped") {
		t.Fatalf("table:\n%s", table.String())
	}
	if err := WriteJUnit(&junit, rs); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(junit.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Suites[0]; got.Tests != 4 || got.Failures != 2 || got.Skipped != 1 || got.Cases[1].Failure.Message != "E bit not set" {
		t.Fatalf("junit: %+v", got)
	}
}
