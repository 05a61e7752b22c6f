//go:build race

package interop

// raceEnabled: under the race detector the lab's real-time loops run too slowly for
// the VM's timeouts; make unit runs this suite again without it.
const raceEnabled = true
