package experiment

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rocelab/rocelab/fabric/topo"
)

// The files of a run directory that are read back (`experiment compare`, the web view's
// replay), and the columns each reader needs: WriteData writes them with these names.
const (
	SummaryFile  = "summary.json"
	TopologyFile = "topology.yaml"
	FlowsFile    = "flows.csv"
	RatesFile    = "rates.csv"
	LinksFile    = "links.csv"
)

var (
	flowColumns = []string{"id", "src", "dst", "size_bytes", "start_ns", "finished", "fct_ns", "ideal_fct_ns", "slowdown"}
	rateColumns = []string{"t_ns", "flow", "paced_rate_bps", "window_bytes", "measured_rate_bps", "inflight_bytes", "hpcc_u"}
	linkColumns = []string{"t_ns", "port", "sampled_ns", "queue_bytes", "tx_bytes"}
)

// RunDir is a finished run's --out directory, read back: the one reader of what
// WriteData writes. Its summary is read when it is opened; the tables are streamed row
// by row, since rates.csv and links.csv can hold tens of millions.
type RunDir struct {
	Dir     string
	Summary RunSummary
}

// OpenRun reads dir's summary.json.
func OpenRun(dir string) (*RunDir, error) {
	d := &RunDir{Dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("%w (is %s an experiment's --out directory?)", err, dir)
	}
	if err := json.Unmarshal(data, &d.Summary); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return d, nil
}

// Topology reads the network the run built (topology.yaml).
func (d *RunDir) Topology() (*topo.Topology, error) {
	data, err := os.ReadFile(filepath.Join(d.Dir, TopologyFile))
	if err != nil {
		return nil, fmt.Errorf("%w (runs before rocelab wrote %s cannot be replayed: run the experiment again)", err, TopologyFile)
	}
	t, err := topo.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TopologyFile, err)
	}
	return t, nil
}

// Flows reads flows.csv.
func (d *RunDir) Flows() ([]FlowRecord, error) {
	var flows []FlowRecord
	err := d.read(FlowsFile, flowColumns, func(c *cells) error {
		f := FlowRecord{ID: int(c.int("id")), Src: int(c.int("src")), Dst: int(c.int("dst")), Size: int(c.int("size_bytes")),
			StartNs: c.int("start_ns"), Finished: c.bool("finished"), IdealNs: c.int("ideal_fct_ns")}
		if f.Finished {
			f.FCTNs, f.Slowdown = c.int("fct_ns"), c.float("slowdown")
		}
		if c.err == nil && (f.Size < 0 || math.IsNaN(f.Slowdown)) {
			c.err = fmt.Errorf("flow %d: size %d, slowdown %v", f.ID, f.Size, f.Slowdown)
		}
		flows = append(flows, f)
		return c.err
	})
	return flows, err
}

// RateRow is a row of rates.csv: a flow's sender at a rate sample. HasU is false where
// the flow's congestion control has no U (hpcc_u empty).
type RateRow struct {
	TNs          int64
	Flow         int
	RateBps      float64
	WindowBytes  float64
	InFlight     uint64
	U            float64
	HasU         bool
	MeasuredRate float64
}

// Rates calls each for every row of rates.csv, in file order (time order).
func (d *RunDir) Rates(each func(RateRow) error) error {
	return d.read(RatesFile, rateColumns, func(c *cells) error {
		r := RateRow{TNs: c.int("t_ns"), Flow: int(c.int("flow")), RateBps: c.float("paced_rate_bps"),
			WindowBytes: c.float("window_bytes"), InFlight: c.uint("inflight_bytes"), MeasuredRate: c.float("measured_rate_bps")}
		if c.str("hpcc_u") != "" {
			r.U, r.HasU = c.float("hpcc_u"), true
		}
		if c.err != nil {
			return c.err
		}
		return each(r)
	})
}

// LinkRow is a row of links.csv: a switch egress port at a rate sample, as the switch
// last sampled it (at SampledNs).
type LinkRow struct {
	TNs       int64
	Port      string
	SampledNs int64
	Queue     int64
	TxBytes   uint64
}

// Links calls each for every row of links.csv, in file order (time order).
func (d *RunDir) Links(each func(LinkRow) error) error {
	return d.read(LinksFile, linkColumns, func(c *cells) error {
		r := LinkRow{TNs: c.int("t_ns"), Port: c.str("port"), SampledNs: c.int("sampled_ns"), Queue: c.int("queue_bytes"), TxBytes: c.uint("tx_bytes")}
		if c.err != nil {
			return c.err
		}
		return each(r)
	})
}

// cells is one CSV row read by column name; the first parse error sticks in err.
type cells struct {
	row []string
	col map[string]int
	err error
}

func (c *cells) str(name string) string { return c.row[c.col[name]] }

func (c *cells) int(name string) int64 {
	v, err := strconv.ParseInt(c.str(name), 10, 64)
	c.fail(name, err)
	return v
}

func (c *cells) uint(name string) uint64 {
	v, err := strconv.ParseUint(c.str(name), 10, 64)
	c.fail(name, err)
	return v
}

func (c *cells) float(name string) float64 {
	v, err := strconv.ParseFloat(c.str(name), 64)
	c.fail(name, err)
	return v
}

func (c *cells) bool(name string) bool {
	v, err := strconv.ParseBool(c.str(name))
	c.fail(name, err)
	return v
}

func (c *cells) fail(name string, err error) {
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("%s %q: not what it should be", name, c.str(name))
	}
}

// read streams file's rows to each, after checking its header holds every column of
// want.
func (d *RunDir) read(file string, want []string, each func(*cells) error) error {
	f, err := os.Open(filepath.Join(d.Dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty (no header)", file)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	col := map[string]int{}
	for i, name := range header {
		col[name] = i
	}
	for _, name := range want {
		if _, ok := col[name]; !ok {
			return fmt.Errorf("%s has no %s column (written by an older rocelab? run the experiment again)", file, name)
		}
	}
	for line := 2; ; line++ {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if err := each(&cells{row: row, col: col}); err != nil {
			return fmt.Errorf("%s line %d: %w", file, line, err)
		}
	}
}
