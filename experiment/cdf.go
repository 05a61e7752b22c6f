package experiment

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// The flow-size distributions of the HPCC paper's evaluation, in the format of its
// simulator's traffic generator (alibaba-edu/High-Precision-Congestion-Control,
// traffic_gen/WebSearch_distribution.txt and FbHdp_distribution.txt): one point a
// line, "size_bytes cumulative_percent".
//
//   - websearch: the web-search workload of the DCTCP paper (Alizadeh et al., SIGCOMM
//     2010); mean 1.71 MB, median 73 KB, the largest 30 MB.
//   - fbhadoop: Facebook's Hadoop cluster (Roy et al., SIGCOMM 2015); mean 120 KB, median
//     700 bytes, the largest 10 MB.
//
//go:embed cdf/*.txt
var cdfFiles embed.FS

// CDFNames are the distributions built in, for --cdf.
var CDFNames = []string{"websearch", "fbhadoop"}

// CDF is a flow-size distribution given by points of its cumulative distribution
// function, linear between them (sizes are uniform within a segment), as the HPCC
// simulator's traffic generator reads and samples it.
type CDF struct {
	Name string
	// Size[i] bytes is the Pct[i] percentile. Both strictly increase; Pct runs from 0
	// to 100.
	Size, Pct []float64
}

// LoadCDF returns a built-in distribution by name (websearch, fbhadoop) or reads the
// file at spec.
func LoadCDF(spec string) (*CDF, error) {
	for _, n := range CDFNames {
		if spec == n {
			b, err := cdfFiles.ReadFile("cdf/" + n + ".txt")
			if err != nil {
				return nil, err
			}
			return ParseCDF(n, bytes.NewReader(b))
		}
	}
	f, err := os.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("experiment: --cdf %q: not one of %v and not a readable file: %w", spec, CDFNames, err)
	}
	defer f.Close()
	return ParseCDF(spec, f)
}

// ParseCDF reads a distribution in the simulator's format: a line per point, the size
// in bytes and the cumulative percentage separated by white space. Blank lines and
// lines starting with # are skipped. The first point must be at 0 %, the last at
// 100 %, and both columns must strictly increase (the simulator's CustomRand.testCdf).
func ParseCDF(name string, r io.Reader) (*CDF, error) {
	c := &CDF{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("experiment: CDF %s line %d: %s", name, line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		fields := strings.Fields(s)
		if len(fields) != 2 {
			return nil, bad("want \"size_bytes cumulative_percent\", got %q", s)
		}
		x, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || x < 0 {
			return nil, bad("size %q: want a non-negative number of bytes", fields[0])
		}
		y, err := strconv.ParseFloat(fields[1], 64)
		if err != nil || y < 0 || y > 100 {
			return nil, bad("percentile %q: want a number from 0 to 100", fields[1])
		}
		if n := len(c.Size); n > 0 && (x <= c.Size[n-1] || y <= c.Pct[n-1]) {
			return nil, bad("point (%v, %v) does not increase both columns over (%v, %v)", x, y, c.Size[n-1], c.Pct[n-1])
		}
		c.Size, c.Pct = append(c.Size, x), append(c.Pct, y)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("experiment: CDF %s: %w", name, err)
	}
	switch {
	case len(c.Size) < 2:
		return nil, fmt.Errorf("experiment: CDF %s: need at least two points", name)
	case c.Pct[0] != 0:
		return nil, fmt.Errorf("experiment: CDF %s: the first point is at %v %%, want 0", name, c.Pct[0])
	case c.Pct[len(c.Pct)-1] != 100:
		return nil, fmt.Errorf("experiment: CDF %s: the last point is at %v %%, want 100", name, c.Pct[len(c.Pct)-1])
	case c.Size[len(c.Size)-1] < 1:
		return nil, fmt.Errorf("experiment: CDF %s: every flow would be empty", name)
	}
	return c, nil
}

// Mean returns the distribution's mean size in bytes: the trapezoid rule over the
// segments, exact for the piecewise-linear CDF (the simulator's getAvg).
func (c *CDF) Mean() float64 {
	s := 0.0
	for i := 1; i < len(c.Size); i++ {
		s += (c.Size[i] + c.Size[i-1]) / 2 * (c.Pct[i] - c.Pct[i-1])
	}
	return s / 100
}

// Quantile returns the size at percentile p (0–100), interpolating linearly between
// the points (the simulator's getValueFromPercentile).
func (c *CDF) Quantile(p float64) float64 {
	for i := 1; i < len(c.Pct); i++ {
		if p <= c.Pct[i] {
			x0, y0, x1, y1 := c.Size[i-1], c.Pct[i-1], c.Size[i], c.Pct[i]
			return x0 + (x1-x0)/(y1-y0)*(p-y0)
		}
	}
	return c.Size[len(c.Size)-1]
}

// Sample draws a flow size by inverse transform: a uniform percentile, its size by
// Quantile, truncated to whole bytes and at least 1 (as traffic_gen.py does).
func (c *CDF) Sample(r *rand.Rand) int {
	return max(1, int(c.Quantile(r.Float64()*100)))
}
