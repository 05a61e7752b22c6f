package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `goos: linux
pkg: github.com/rocelab/rocelab/roce
cpu: AMD EPYC
BenchmarkBuildICRC4096/inplace-2   5729712   208.1 ns/op   19963.17 MB/s   0.6530 ratio   0 B/op   0 allocs/op
BenchmarkDecodeWriteFirst-2   48834276   24.87 ns/op   0 B/op   0 allocs/op
PASS
`
	rep, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.CPU != "AMD EPYC" {
		t.Fatalf("%+v", rep)
	}
	r := rep.Results[0]
	if r.Name != "BuildICRC4096/inplace" || r.Package != "github.com/rocelab/rocelab/roce" ||
		r.Iterations != 5729712 || r.Metrics["ratio"] != 0.6530 || r.Metrics["allocs/op"] != 0 {
		t.Errorf("%+v", r)
	}
	var sb strings.Builder
	printTable(&sb, rep)
	if !strings.Contains(sb.String(), "0.653 ratio") {
		t.Errorf("table:\n%s", sb.String())
	}
}
