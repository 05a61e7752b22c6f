//go:build race

package experiment

// raceEnabled: the race detector slows the real-time run past what it can keep up with.
const raceEnabled = true
