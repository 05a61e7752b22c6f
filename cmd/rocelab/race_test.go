//go:build race

package main

// raceEnabled: the race detector slows the lab's loops below real time.
const raceEnabled = true
