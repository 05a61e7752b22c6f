package netns

import (
	"fmt"
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
}

// DefaultGrace is the SIGTERM-to-SIGKILL delay when [Cleaner.Grace] is 0.
const DefaultGrace = 2 * time.Second

// Removal is one object removed (or, in a dry run, that would be).
type Removal struct {
	Lab  string `json:"lab"`
	Kind string `json:"kind"` // "process", "device", "namespace", "socket" or "state"
	Name string `json:"name"`
}

func (r Removal) String() string { return fmt.Sprintf("lab %s: %s %s", r.Lab, r.Kind, r.Name) }

// Report is what a Down or Clean did.
type Report struct {
	Removed []Removal `json:"removed"`
	// Running lists the labs Clean left alone because their lab process is alive.
	Running []string `json:"running,omitempty"`
	// Foreign lists namespaces that carry rocelab's prefix but that no state file
	// records: Clean reports them and never deletes them.
	Foreign []string `json:"foreign,omitempty"`
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
