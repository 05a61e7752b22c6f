// Command benchreport turns `go test -bench` output into the table `make bench` prints
// and the JSON file it writes. golang.org/x/perf/benchfmt reads the standard benchmark
// format: custom metrics from b.ReportMetric included, and the "pkg:" and "cpu:" lines
// that say which package and machine each benchmark belongs to.
//
//	go test -run '^$' -bench . -benchmem ./... | tee out/bench.txt
//	go run ./tools/benchreport -in out/bench.txt -json out/bench.json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/perf/benchfmt"
)

// Result is one benchmark line.
type Result struct {
	Package    string             `json:"package"`
	Name       string             `json:"name"`
	Iterations int64              `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"` // unit -> value, e.g. "ns/op", "allocs/op", "ratio"
}

// Report is the JSON document.
type Report struct {
	Time    time.Time `json:"time"`
	CPU     string    `json:"cpu,omitempty"`
	Results []Result  `json:"results"`
}

func main() {
	in := flag.String("in", "-", "benchmark output to read (- for stdin)")
	jsonOut := flag.String("json", "", "write the report as JSON to this file")
	flag.Parse()
	r := os.Stdin
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		defer f.Close()
		r = f
	}
	rep, malformed, err := parse(r, r.Name())
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	for _, err := range malformed {
		fmt.Fprintln(os.Stderr, "benchreport: skipped:", err)
	}
	rep.Time = time.Now().UTC()
	printTable(os.Stdout, rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		fmt.Printf("\nwrote %s\n", *jsonOut)
	}
}

// parse reads `go test -bench` output with golang.org/x/perf/benchfmt. Benchmark lines
// it cannot read are left out of the report and returned as errors naming name and
// their line.
func parse(r io.Reader, name string) (*Report, []error, error) {
	rep := &Report{}
	var malformed []error
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			malformed = append(malformed, rec)
		case *benchfmt.Result:
			if cpu := rec.GetConfig("cpu"); cpu != "" {
				rep.CPU = cpu
			}
			rep.Results = append(rep.Results, result(rec))
		}
	}
	return rep, malformed, br.Err()
}

// result is one benchmark in the units the benchmark printed ("ns/op", not benchfmt's
// tidied "sec/op"), named without its GOMAXPROCS suffix.
func result(rec *benchfmt.Result) Result {
	base, parts := rec.Name.Parts()
	name := string(base)
	for _, p := range parts {
		if p[0] != '-' {
			name += string(p)
		}
	}
	res := Result{Package: rec.GetConfig("pkg"), Name: name, Iterations: int64(rec.Iters), Metrics: map[string]float64{}}
	for _, v := range rec.Values {
		if v.OrigUnit != "" {
			res.Metrics[v.OrigUnit] = v.OrigValue
		} else {
			res.Metrics[v.Unit] = v.Value
		}
	}
	return res
}

func printTable(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tbenchmark\tns/op\tallocs/op\tother metrics")
	for _, r := range rep.Results {
		var other []string
		for _, unit := range sortedUnits(r.Metrics) {
			if unit != "ns/op" && unit != "allocs/op" && unit != "B/op" {
				other = append(other, fmt.Sprintf("%s %s", strconv.FormatFloat(r.Metrics[unit], 'g', 4, 64), unit))
			}
		}
		short := r.Package[strings.LastIndex(r.Package, "rocelab/")+len("rocelab/"):]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", short, r.Name, metric(r, "ns/op"), metric(r, "allocs/op"), strings.Join(other, ", "))
	}
	tw.Flush()
}

func metric(r Result, unit string) string {
	v, ok := r.Metrics[unit]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 5, 64)
}

func sortedUnits(m map[string]float64) []string {
	units := make([]string, 0, len(m))
	for u := range m {
		units = append(units, u)
	}
	sort.Strings(units)
	return units
}
