package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestUndocumentedFails runs the checker as `make lint` does on a fixture package with
// undocumented exported identifiers of every kind: it must fail and name each of them,
// and only them.
func TestUndocumentedFails(t *testing.T) {
	var out bytes.Buffer
	if status := run([]string{"-enforce", "./testdata/mod/...", "-pending", "", "./testdata/mod/..."}, &out); status != 1 {
		t.Fatalf("exit status %d, want 1; output:\n%s", status, &out)
	}
	var got []string
	for _, line := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutSuffix(line, " has no doc comment"); ok {
			got = append(got, name[strings.LastIndex(name, " ")+1:])
		}
	}
	want := []string{"BareFunc", "BareType", "BareType.BareMethod", "Documented.BareGenericMethod", "BareConst", "BareVar"}
	if !slices.Equal(got, want) {
		t.Errorf("undocumented %q, want %q; output:\n%s", got, want, &out)
	}
	if !strings.Contains(out.String(), "testdata/mod/undoc: 6 of 11 exported identifiers undocumented\n") {
		t.Errorf("no per-package count; output:\n%s", &out)
	}
}

// TestNotEnforcedReports: a package outside -enforce is reported, not failed, and a
// documented package passes.
func TestNotEnforcedReports(t *testing.T) {
	var out bytes.Buffer
	if status := run([]string{"-enforce", "./testdata/mod/clean", "./testdata/mod/..."}, &out); status != 0 {
		t.Fatalf("exit status %d, want 0; output:\n%s", status, &out)
	}
	if want := "testdata/mod/undoc: 6 of 11 exported identifiers undocumented (not enforced)\n"; out.String() != want {
		t.Errorf("output %q, want %q", &out, want)
	}
}

// TestPendingRatchet: a pending package is reported, not failed, until it is clean;
// then it fails until it leaves the list.
func TestPendingRatchet(t *testing.T) {
	var out bytes.Buffer
	if status := run([]string{"-enforce", "./testdata/mod/...", "-pending", "testdata/mod/undoc", "./testdata/mod/..."}, &out); status != 0 {
		t.Fatalf("pending undoc: exit status %d, want 0; output:\n%s", status, &out)
	}
	out.Reset()
	if status := run([]string{"-enforce", "./testdata/mod/...", "-pending", "testdata/mod/clean,testdata/mod/undoc", "./testdata/mod/..."}, &out); status != 1 ||
		!strings.Contains(out.String(), "pending package testdata/mod/clean documents every exported identifier") {
		t.Fatalf("pending clean: exit status %d, want 1 naming it; output:\n%s", status, &out)
	}
}

// TestBadPattern: a pattern that matches nothing is an error, not a pass.
func TestBadPattern(t *testing.T) {
	var out bytes.Buffer
	if status := run([]string{"-enforce", "./testdata/nosuch", "./testdata/mod/..."}, &out); status != 2 {
		t.Fatalf("exit status %d, want 2; output:\n%s", status, &out)
	}
}
