package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/experiment"
)

// progressAfter is how long an experiment runs before it shows progress: short runs
// print nothing extra.
const progressAfter = 2 * time.Second

// progress draws an experiment's progress line on a terminal: simulated time, flows
// finished of all, events per wall-clock second and an estimate of the time left
// (from the share of flows finished, so it runs long while big flows are in flight).
type progress struct {
	w     io.Writer
	now   func() time.Time
	start time.Time
	shown bool
}

// newProgress returns a progress line on w if w is a terminal, else nil.
func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil // piped or redirected
	}
	return &progress{w: w, now: time.Now, start: time.Now()}
}

// update redraws the line for p.
func (pr *progress) update(p experiment.Progress) {
	el := pr.now().Sub(pr.start)
	if el < progressAfter {
		return
	}
	eta := "?"
	if p.Done > 0 {
		eta = "~" + (time.Duration(float64(el) * float64(p.Flows-p.Done) / float64(p.Done))).Round(time.Second).String()
	}
	fmt.Fprintf(pr.w, "\r\033[K  simulated %v · flows %d/%d · %.2f M events/s · ETA %s",
		p.Now.Duration().Round(time.Microsecond), p.Done, p.Flows, float64(p.Events)/el.Seconds()/1e6, eta)
	pr.shown = true
}

// clear erases the line, if one was drawn, before the results are printed.
func (pr *progress) clear() {
	if pr.shown {
		fmt.Fprint(pr.w, "\r\033[K")
	}
}
