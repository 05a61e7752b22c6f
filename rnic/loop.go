package rnic

import "github.com/rocelab/rocelab/internal/clock"

// Loop returns the device's event loop, for services that attach work to it (the verbs
// service registers a clock.Watch so that application processes wake the loop
// directly). Loop's own rules apply: use it only from the loop's callbacks (Do) or
// before the clock starts.
func (d *Device) Loop() clock.Loop { return d.loop }
