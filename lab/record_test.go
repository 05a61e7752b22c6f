package lab

import (
	"testing"

	"github.com/rocelab/rocelab/internal/clock"
)

// TestRecorderRowsOfOneTime: a loop that catches up on its sampling instants reads
// several at one time (its time stays put while it runs overdue timers): the rows of
// one time become one, the latest reading, whether or not the first was drained, so
// that a sampler never divides by a zero interval. (TestLabTwoHosts met three rows at
// 8.974763 ms when the recorder's first timer was armed late.)
func TestRecorderRowsOfOneTime(t *testing.T) {
	r := &recorder{nodes: 2}
	read := func(k int64, at clock.Time, tx uint64) {
		r.add(k, at, false, func(c *Counters) { c.Hosts["h1"] = tx })
		r.add(k, at, true, func(c *Counters) { c.Switches["s1"] = []PortCounters{{TxBytes: tx}} })
	}
	read(6, 8_974_763, 10)
	read(7, 8_974_763, 11)
	read(8, 8_974_763, 12)
	read(9, 9_000_000, 13)
	rows, dropped := r.drain(9_000_000)
	if dropped != 0 || len(rows) != 2 || rows[0].TimeNs != 8_974_763 || rows[0].Hosts["h1"] != 12 || rows[1].TimeNs != 9_000_000 {
		t.Fatalf("rows %+v, %d dropped: want two, at 8974763 ns (the latest of its three readings) and 9000000 ns", rows, dropped)
	}
	read(10, 9_000_000, 14) // the time of a row already drained: left out
	read(11, 10_000_000, 15)
	rows, _ = r.drain(10_000_000)
	if len(rows) != 1 || rows[0].TimeNs != 10_000_000 {
		t.Fatalf("after a drain: rows %+v, want the one at 10000000 ns", rows)
	}
}
