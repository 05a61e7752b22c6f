package netns

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Cleaner removes labs: [Cleaner.Down] one lab on request, [Cleaner.Clean] the
// leftovers of crashed labs. It removes only what a state file records and what carries
// rocelab's name prefix; it signals only processes that a state file records (pid and
// start time) or that live inside a namespace it is about to delete, and never itself.
type Cleaner struct {
	Store Store
	Log   *zap.Logger // nil logs nothing
	// Grace is how long a process has to exit after SIGTERM before SIGKILL; 0 means
	// DefaultGrace.
	Grace time.Duration
	// DryRun reports what would be removed and changes nothing.
	DryRun bool
	// Indexed makes Clean clean, besides Store, the store of every root the store index
	// records ([IndexedStores]): the labs of tests and tools that keep their own state
	// root.
	Indexed bool
}

// DefaultGrace is the SIGTERM-to-SIGKILL delay when [Cleaner.Grace] is 0.
const DefaultGrace = 2 * time.Second

// Removal is one object removed (or, in a dry run, that would be).
type Removal struct {
	Lab  string `json:"lab"`
	Kind string `json:"kind"` // "process", "device", "host view", "namespace", "socket" or "state"
	Name string `json:"name"`
}

// String returns the removal as the report prints it: lab, kind and name.
func (r Removal) String() string { return fmt.Sprintf("lab %s: %s %s", r.Lab, r.Kind, r.Name) }

// Report is what a Down or Clean did.
type Report struct {
	Removed []Removal `json:"removed"`
	// Running lists the labs Clean left alone because their lab process is alive.
	Running []string `json:"running,omitempty"`
	// Foreign lists namespaces that carry rocelab's prefix but that no state file
	// records and that nothing uses: Clean reports them and never deletes them.
	Foreign []string `json:"foreign,omitempty"`
	// ForeignViews lists pins of host views ([ViewDir]) named like rocelab's that no
	// state file here records (a lab of another state directory, or a leftover):
	// reported, never removed.
	ForeignViews []string `json:"foreign_views,omitempty"`
	// InUse lists namespaces Clean left alone because live processes use them: a
	// namespace no state file here records, with processes in it or holding it (a lab
	// of another state directory), or a crashed lab's namespace that a live process
	// outside it holds (a lab of the same name in another state directory).
	InUse []InUse `json:"in_use,omitempty"`
}

// InUse is a namespace in use by live processes.
type InUse struct {
	Netns string `json:"netns"`
	// Lab is the crashed lab of this store that records the namespace, if any.
	Lab   string    `json:"lab,omitempty"`
	Procs []Process `json:"processes"`
}

// String reads "namespace X alone: in use by pid N, M" (clean's report says "left ...").
func (u InUse) String() string {
	pids := make([]string, len(u.Procs))
	for i, p := range u.Procs {
		pids[i] = strconv.Itoa(p.PID)
	}
	return fmt.Sprintf("namespace %s alone: in use by pid %s", u.Netns, strings.Join(pids, ", "))
}

func (c *Cleaner) log() *zap.Logger {
	if c.Log == nil {
		return zap.NewNop()
	}
	return c.Log
}

func (c *Cleaner) grace() time.Duration {
	if c.Grace == 0 {
		return DefaultGrace
	}
	return c.Grace
}
