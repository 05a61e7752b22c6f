package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/internal/clock"
)

// TestProgressLine: nothing for the first seconds, then a line with simulated time,
// flows, events/s and the time left; cleared at the end. Piped output gets none.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	wall := time.Unix(0, 0)
	pr := &progress{w: &out, now: func() time.Time { return wall }, start: wall}
	pr.update(experiment.Progress{Now: clock.Time(time.Millisecond), Done: 1, Flows: 4, Events: 1e6})
	if out.Len() != 0 {
		t.Fatalf("progress before %v: %q", progressAfter, out.String())
	}
	wall = wall.Add(4 * time.Second)
	pr.update(experiment.Progress{Now: clock.Time(1500 * time.Microsecond), Done: 1, Flows: 4, Events: 8e6})
	want := "\r\033[K  simulated 1.5ms · flows 1/4 · 2.00 M events/s · ETA ~12s"
	if out.String() != want {
		t.Errorf("line %q, want %q", out.String(), want)
	}
	pr.clear()
	if got := out.String()[len(want):]; got != "\r\033[K" {
		t.Errorf("clear wrote %q", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if newProgress(w) != nil || newProgress(&out) != nil {
		t.Error("progress on a pipe or a buffer")
	}
}
