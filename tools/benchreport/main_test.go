package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/rocelab/rocelab/roce
cpu: AMD EPYC
BenchmarkBuildICRC4096/inplace-2   5729712   208.1 ns/op   19963.17 MB/s   0.6530 ratio   0 B/op   0 allocs/op
BenchmarkDecodeWriteFirst-2   48834276   24.87 ns/op   0 B/op   0 allocs/op
BenchmarkBroken-2   12   fast ns/op
pkg: github.com/rocelab/rocelab/fabric
BenchmarkIncast16   100   1.5e6 ns/op   3.1e6 packet-hops/s
PASS
`

func TestParse(t *testing.T) {
	rep, malformed, err := parse(strings.NewReader(sample), "bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.CPU != "AMD EPYC" {
		t.Fatalf("%+v", rep)
	}
	if len(malformed) != 1 || !strings.Contains(malformed[0].Error(), "bench.txt:6: parsing measurement") {
		t.Errorf("malformed lines: %v, want line 6's", malformed)
	}
	r := rep.Results[0]
	if r.Name != "BuildICRC4096/inplace" || r.Package != "github.com/rocelab/rocelab/roce" ||
		r.Iterations != 5729712 || r.Metrics["ns/op"] != 208.1 || r.Metrics["MB/s"] != 19963.17 ||
		r.Metrics["ratio"] != 0.6530 || r.Metrics["allocs/op"] != 0 || len(r.Metrics) != 5 {
		t.Errorf("%+v", r)
	}
	if r := rep.Results[2]; r.Name != "Incast16" || r.Package != "github.com/rocelab/rocelab/fabric" ||
		r.Metrics["ns/op"] != 1.5e6 || r.Metrics["packet-hops/s"] != 3.1e6 {
		t.Errorf("%+v", r)
	}

	var sb strings.Builder
	printTable(&sb, rep)
	table := sb.String()
	for _, want := range []string{"roce     BuildICRC4096/inplace  208.1", "0.653 ratio", "1.996e+04 MB/s", "fabric   Incast16"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	b, err := json.Marshal(rep.Results[1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"package":"github.com/rocelab/rocelab/roce","name":"DecodeWriteFirst","iterations":48834276,"metrics":{"B/op":0,"allocs/op":0,"ns/op":24.87}}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
}
