// Command benchreport turns `go test -bench` output into the table `make bench` prints
// and the JSON file it writes. It understands the standard benchmark line format,
// custom metrics from b.ReportMetric included, and the "pkg:" lines that say which
// package each benchmark belongs to.
//
//	go test -run '^$' -bench . -benchmem ./... | tee out/bench.txt
//	go run ./tools/benchreport -in out/bench.txt -json out/bench.json
package main

import (
	"bufio"
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
	rep, err := parse(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
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

func parse(r io.Reader) (*Report, error) {
	rep := &Report{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
		case strings.HasPrefix(line, "cpu: "):
			rep.CPU = strings.TrimPrefix(line, "cpu: ")
		case strings.HasPrefix(line, "Benchmark"):
			if res, ok := parseLine(pkg, line); ok {
				rep.Results = append(rep.Results, res)
			}
		}
	}
	return rep, sc.Err()
}

// parseLine reads "BenchmarkName-2  N  v1 unit1  v2 unit2 ...".
func parseLine(pkg, line string) (Result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return Result{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false
	}
	name := strings.TrimPrefix(f[0], "Benchmark")
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // the GOMAXPROCS suffix
		}
	}
	res := Result{Package: pkg, Name: name, Iterations: n, Metrics: map[string]float64{}}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
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
