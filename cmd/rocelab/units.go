package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
)

// Flags that take units are pflag.Values (flag.Var) over topo's parsers, so that cobra reports a
// bad value with the flag's name and --help shows the default in the same units.

// rateValue is a line rate in bit/s: 100G, 25Gbps.
type rateValue struct{ p *uint64 }

func (v rateValue) String() string {
	if v.p == nil {
		return ""
	}
	return topo.FormatRate(*v.p)
}

func (v rateValue) Set(s string) error {
	r, err := topo.ParseRate(s)
	if err != nil {
		return err
	}
	*v.p = r
	return nil
}

func (rateValue) Type() string { return "rate" }

// bytesValue is a size in bytes: 1500, 500KB, 1MiB.
type bytesValue struct{ p *int }

func (v bytesValue) String() string {
	if v.p == nil {
		return ""
	}
	n := *v.p
	switch {
	case n != 0 && n%1e6 == 0:
		return strconv.Itoa(n/1e6) + "MB"
	case n != 0 && n%1e3 == 0:
		return strconv.Itoa(n/1e3) + "KB"
	}
	return strconv.Itoa(n)
}

func (v bytesValue) Set(s string) error {
	n, err := topo.ParseBytes(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (bytesValue) Type() string { return "size" }

// durationValue is a non-negative duration: 1us, 5ms.
type durationValue struct{ p *time.Duration }

func (v durationValue) String() string {
	if v.p == nil || *v.p == 0 {
		return "0" // pflag's zero: --help shows no default
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := topo.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

func (durationValue) Type() string { return "duration" }

// ecnValue is RED marking as K_min,K_max,P_max: 400KB,1600KB,0.2.
type ecnValue struct{ p *fabric.ECN }

func (v ecnValue) String() string {
	if v.p == nil || !v.p.Enabled {
		return ""
	}
	return bytesValue{&v.p.KMin}.String() + "," + bytesValue{&v.p.KMax}.String() + "," + strconv.FormatFloat(v.p.PMax, 'g', -1, 64)
}

func (v ecnValue) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return fmt.Errorf("ECN %q: want K_min,K_max,P_max such as 400KB,1600KB,0.2", s)
	}
	kmin, err := topo.ParseBytes(parts[0])
	if err != nil {
		return err
	}
	kmax, err := topo.ParseBytes(parts[1])
	if err != nil {
		return err
	}
	pmax, err := strconv.ParseFloat(strings.TrimSpace(parts[2]), 64)
	if err != nil || !(pmax >= 0 && pmax <= 1) || kmin > kmax {
		return fmt.Errorf("ECN %q: want K_min ≤ K_max and P_max in [0, 1]", s)
	}
	*v.p = fabric.ECN{Enabled: true, KMin: kmin, KMax: kmax, PMax: pmax}
	return nil
}

func (ecnValue) Type() string { return "kmin,kmax,pmax" }

// flowsValue is --flows: a number of flows, or a flow file in the HPCC simulator's
// format.
type flowsValue struct {
	count *int
	file  *string
}

func (v flowsValue) String() string {
	switch {
	case v.file != nil && *v.file != "":
		return *v.file
	case v.count != nil && *v.count != 0:
		return strconv.Itoa(*v.count)
	}
	return "0"
}

func (v flowsValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return fmt.Errorf("flows %d: must not be negative", n)
		}
		*v.count, *v.file = n, ""
		return nil
	}
	*v.count, *v.file = 0, s
	return nil
}

func (flowsValue) Type() string { return "N|file" }
