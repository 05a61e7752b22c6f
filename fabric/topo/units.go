package topo

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseRate parses a line rate such as "100G", "25Gbps", "100Gb/s", "400M" or "1e9"
// (bit/s; decimal prefixes K, M, G, T).
func ParseRate(s string) (uint64, error) {
	v := strings.TrimSpace(s)
	for _, suffix := range []string{"bps", "b/s", "bit/s"} {
		v = strings.TrimSuffix(v, suffix)
	}
	mult := 1.0
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K', 'k':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		case 'T':
			mult = 1e12
		}
		if mult != 1 {
			v = v[:n-1]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0 && f*mult <= 1e15) { // NaN and ±Inf fail too

		return 0, fmt.Errorf("rate %q: want a positive number of bit/s such as 100G or 25Gbps", s)
	}
	return uint64(f * mult), nil
}

// FormatRate formats bit/s the way ParseRate reads it.
func FormatRate(r uint64) string {
	for _, u := range []struct {
		div  uint64
		name string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}} {
		if r >= u.div && r%u.div == 0 {
			return strconv.FormatUint(r/u.div, 10) + u.name
		}
	}
	return strconv.FormatUint(r, 10)
}

// ParseBytes parses a size such as "1500", "64KB", "4MB", "1MiB" (KB = 1000 bytes,
// KiB = 1024).
func ParseBytes(s string) (int, error) {
	v := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 1<<40/mult {
		return 0, fmt.Errorf("size %q: want bytes such as 1500, 64KB or 4MiB", s)
	}
	return n * mult, nil
}

// ParseDuration parses a non-negative duration such as "1us", "1µs" or "500ns".
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want a non-negative duration such as 1us or 500ns", s)
	}
	return d, nil
}
