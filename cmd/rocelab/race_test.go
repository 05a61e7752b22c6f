//go:build race

package main

// raceEnabled: the race detector slows real-time labs past what they can keep up with.
const raceEnabled = true
