package experiment

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
)

// The HPCC simulator's flow file (simulation/mix/flow.txt, written by its
// traffic_gen.py and read by its scratch/third.cc): the number of flows on the first
// line, then one flow a line,
//
//	src dst priority dport size start_seconds
//
// src and dst are node IDs, size in bytes, the start in seconds with nanosecond
// decimals; its generator starts the arrivals at 2 s (base_t) and writes priority 3
// and port 100.

// SimFlow is one flow of a flow file.
type SimFlow struct {
	Src, Dst        int
	Priority, DPort int
	Size            int
	Start           time.Duration
}

// The generator's constants: its flows start at 2 s, with priority 3 and port 100.
const (
	simBaseTime = 2 * time.Second
	simPriority = 3
	simDPort    = 100
)

// ParseSimFlows reads a flow file. The count line must match the flows that follow;
// blank lines are skipped.
func ParseSimFlows(r io.Reader) ([]SimFlow, error) {
	sc := bufio.NewScanner(r)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("experiment: flow file line %d: %s", line, fmt.Sprintf(format, args...))
	}
	want := -1
	var flows []SimFlow
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
			continue
		case want < 0:
			n, err := strconv.Atoi(f[0])
			if len(f) != 1 || err != nil || n < 0 || n > 1<<24 {
				return nil, bad("want the number of flows, got %q", sc.Text())
			}
			want = n
			continue
		case len(flows) == want:
			return nil, bad("more flows than the %d the first line announces", want)
		case len(f) != 6:
			return nil, bad("want \"src dst priority dport size start_seconds\", got %q", sc.Text())
		}
		var v [5]int
		for i := range v {
			n, err := strconv.Atoi(f[i])
			if err != nil || n < 0 || n > 1<<40 {
				return nil, bad("field %d %q: want a non-negative integer", i+1, f[i])
			}
			v[i] = n
		}
		start, err := parseSeconds(f[5])
		if err != nil {
			return nil, bad("start %q: %v", f[5], err)
		}
		if v[0] == v[1] || v[4] < 1 {
			return nil, bad("flow %d→%d of %d bytes: want two distinct nodes and at least one byte", v[0], v[1], v[4])
		}
		flows = append(flows, SimFlow{Src: v[0], Dst: v[1], Priority: v[2], DPort: v[3], Size: v[4], Start: start})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("experiment: flow file: %w", err)
	}
	switch {
	case want < 0:
		return nil, fmt.Errorf("experiment: flow file: empty: want the number of flows on the first line")
	case len(flows) != want:
		return nil, fmt.Errorf("experiment: flow file: %d flows, the first line announces %d", len(flows), want)
	}
	return flows, nil
}

// parseSeconds reads non-negative seconds with up to nine decimals exactly.
func parseSeconds(s string) (time.Duration, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 {
		return 0, fmt.Errorf("more than nine decimals")
	}
	sec, err := strconv.ParseUint(whole, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want seconds such as 2.000001234")
	}
	var ns uint64
	if frac != "" {
		if ns, err = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("want seconds such as 2.000001234")
		}
	}
	return time.Duration(sec)*time.Second + time.Duration(ns), nil
}

// WriteSimFlows writes flows as a flow file.
func WriteSimFlows(w io.Writer, flows []SimFlow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%d\n", len(flows))
	for _, f := range flows {
		ns := f.Start.Nanoseconds()
		fmt.Fprintf(bw, "%d %d %d %d %d %d.%09d\n", f.Src, f.Dst, f.Priority, f.DPort, f.Size, ns/1e9, ns%1e9)
	}
	return bw.Flush()
}

// GenerateFlows draws the mix scenario's arrivals (mixArrivals: per host a Poisson
// process at cfg.Load of cfg.LinkRate, sizes from cfg.CDF, for cfg.Duration or
// cfg.Flows) among hosts hosts, as a flow file the simulator reads: node IDs 0 to
// hosts−1, starting at 2 s as its generator's do.
func GenerateFlows(cfg Config, hosts int) ([]SimFlow, error) {
	switch {
	case hosts < 2:
		return nil, fmt.Errorf("experiment: --hosts %d: want at least two", hosts)
	case !(cfg.Load > 0 && cfg.Load <= 1):
		return nil, fmt.Errorf("experiment: --load %v: want a fraction of the host link rate in (0, 1]", cfg.Load)
	case cfg.Duration <= 0 && cfg.Flows <= 0:
		return nil, fmt.Errorf("experiment: want an arrival window (--duration) or a number of flows (--flows)")
	case cfg.LinkRate == 0:
		return nil, fmt.Errorf("experiment: --link-rate must be positive")
	}
	cdf, err := LoadCDF(cfg.CDF)
	if err != nil {
		return nil, err
	}
	var out []SimFlow
	for _, f := range mixArrivals(&cfg, cdf, hosts) {
		out = append(out, SimFlow{Src: f.Src, Dst: f.Dst, Priority: simPriority, DPort: simDPort, Size: f.Size,
			Start: simBaseTime + f.Start.Duration()})
	}
	return out, nil
}

// loadSimFlows reads the flow file at path into the mix's flows: node IDs become host
// indexes by hostOf, and the start times are shifted by the whole seconds before the
// first one (the simulator's files start at 2 s). IDs follow the file's order, which
// must be by start time.
func loadSimFlows(path string, hostOf func(node int) (int, bool)) ([]*flow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: --flows: %w", err)
	}
	defer f.Close()
	sf, err := ParseSimFlows(f)
	if err != nil {
		return nil, err
	}
	if len(sf) == 0 {
		return nil, fmt.Errorf("experiment: flow file %s has no flows", path)
	}
	base := sf[0].Start.Truncate(time.Second)
	var flows []*flow
	for i, s := range sf {
		src, ok1 := hostOf(s.Src)
		dst, ok2 := hostOf(s.Dst)
		switch {
		case !ok1 || !ok2:
			return nil, fmt.Errorf("experiment: flow file %s flow %d: node %d or %d is not a host of the topology", path, i+1, s.Src, s.Dst)
		case s.Start < base || i > 0 && s.Start < sf[i-1].Start:
			return nil, fmt.Errorf("experiment: flow file %s flow %d: starts at %v, before the flow above it", path, i+1, s.Start)
		}
		flows = append(flows, &flow{ID: i, Src: src, Dst: dst, Size: s.Size, Start: clock.Time(s.Start - base)})
	}
	return flows, nil
}

// loadTopologyFile reads a topology in rocelab's YAML or the simulator's format
// (whose first line is three numbers), and the function that maps the node IDs of a
// flow file to its host indexes: the simulator's IDs for its format, the host's
// position (from 0) in the YAML.
func loadTopologyFile(path string, p topo.Params) (*topo.Topology, func(int) (int, bool), error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: --topology-file: %w", err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	if _, err := atoisLine(first, 3); err != nil {
		t, err := topo.Parse(data)
		if err != nil {
			return nil, nil, fmt.Errorf("experiment: --topology-file %s: %w", path, err)
		}
		return t, func(n int) (int, bool) { return n, n >= 0 && n < len(t.Hosts) }, nil
	}
	t, err := topo.ParseNS3(strings.NewReader(string(data)), p)
	if err != nil {
		return nil, nil, fmt.Errorf("experiment: --topology-file %s: %w", path, err)
	}
	index := map[int]int{}
	for i, h := range t.Hosts {
		if id, ok := topo.NS3NodeID(h.Name); ok {
			index[id] = i
		}
	}
	return t, func(n int) (int, bool) { i, ok := index[n]; return i, ok }, nil
}

// atoisLine parses a line of want integers.
func atoisLine(s string, want int) ([]int, error) {
	f := strings.Fields(s)
	if len(f) != want {
		return nil, fmt.Errorf("want %d numbers", want)
	}
	out := make([]int, want)
	for i := range f {
		n, err := strconv.Atoi(f[i])
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}
