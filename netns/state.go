package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultStateRoot holds one directory per lab, as <root>/<lab>/state.json. It is on
// tmpfs on purpose: a reboot removes every namespace, and with them every lab.
const DefaultStateRoot = "/run/rocelab"

// StateRootEnv overrides [DefaultStateRoot], so tests and unprivileged tools can keep
// their labs apart from the machine's.
const StateRootEnv = "ROCELAB_STATE_DIR"

const stateFile = "state.json"

// Lab is the record of one lab: what its state file says it created. The JSON field
// names are part of rocelab's interface (`rocelab status --json` shows hosts as they
// are here).
type Lab struct {
	Name    string    `json:"name"`
	Owner   Process   `json:"owner"` // the lab process; the lab is crashed when it is gone
	Created time.Time `json:"created"`
	Hosts   []Host    `json:"hosts"`
	// Devices created outside the hosts' namespaces (a host's TAP goes with its
	// namespace and is not listed here).
	Devices []Device `json:"devices,omitempty"`
	// Processes started in the lab besides the owner, e.g. by `rocelab exec`. Entries
	// outlive their processes; the start time keeps a reused pid from matching.
	Processes []Process `json:"processes,omitempty"`
	// Sockets are filesystem paths of Unix sockets to remove with the lab. Abstract
	// sockets need no entry: they die with their namespace.
	Sockets []string `json:"sockets,omitempty"`
}

// Host is one emulated host: a namespace with a TAP netdev as its NIC.
type Host struct {
	Name  string       `json:"name"`
	Netns string       `json:"netns"`
	Tap   string       `json:"tap"`
	MAC   string       `json:"mac"`
	IPv4  netip.Prefix `json:"ipv4"`
	IPv6  netip.Prefix `json:"ipv6"`
	// Bridge names the Linux bridge in the namespace that the TAP is a port of, for
	// an external host (HostConfig.Bridge); empty for an emulated host.
	Bridge string `json:"bridge,omitempty"`
}

// Device is a netdev in namespace Netns ("" for the namespace rocelab runs in).
type Device struct {
	Name  string `json:"name"`
	Netns string `json:"netns,omitempty"`
}

// Host returns the host named name, or nil.
func (l *Lab) Host(name string) *Host {
	for i := range l.Hosts {
		if l.Hosts[i].Name == name {
			return &l.Hosts[i]
		}
	}
	return nil
}

// Running reports whether the lab process is alive.
func (l *Lab) Running() bool { return l.Owner.Alive() }

// Store is a directory of lab state directories. The zero Store is not usable: see
// [DefaultStore].
type Store struct {
	Root string
}

// DefaultStore is the store named by $ROCELAB_STATE_DIR, or [DefaultStateRoot].
func DefaultStore() Store {
	if root := os.Getenv(StateRootEnv); root != "" {
		return Store{Root: root}
	}
	return Store{Root: DefaultStateRoot}
}

// Dir is lab's state directory, where the lab process also keeps its pid, logs and
// sockets; it is removed with the lab.
func (s Store) Dir(lab string) string { return filepath.Join(s.Root, lab) }

// Save writes l's state file atomically (a reader sees the old record or the new one,
// never half of one), creating the lab's directory if needed.
func (s Store) Save(l *Lab) error {
	if err := ValidName(l.Name); err != nil {
		return fmt.Errorf("netns: save lab state: %w", err)
	}
	if err := s.save(l); err != nil {
		return fmt.Errorf("netns: save lab %s state: %w", l.Name, err)
	}
	return nil
}

// MakeDir creates lab's state directory, and the store's if needed, owner-only whatever
// the umask: the directory holds the lab's control socket, log and state, which only
// the lab's owner (and root) may reach.
func (s Store) MakeDir(lab string) error {
	if err := ValidName(lab); err != nil {
		return fmt.Errorf("netns: lab state directory: %w", err)
	}
	for _, dir := range []string{s.Root, s.Dir(lab)} {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			if errors.Is(err, os.ErrNotExist) { // a store root below directories that do not exist yet
				err = os.MkdirAll(dir, 0o700)
			}
			if err != nil {
				return err
			}
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	s.register()
	return nil
}

func (s Store) save(l *Lab) error {
	dir := s.Dir(l.Name)
	if err := s.MakeDir(l.Name); err != nil {
		return err
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, stateFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, stateFile))
}

// Load reads lab's state file. A lab without one is an error wrapping [os.ErrNotExist].
func (s Store) Load(lab string) (*Lab, error) {
	if err := ValidName(lab); err != nil { // never a path out of the store: no '/', no ".."
		return nil, fmt.Errorf("netns: load lab state: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir(lab), stateFile))
	if err != nil {
		return nil, fmt.Errorf("netns: load lab %s state: %w", lab, unwrapPathError(err))
	}
	var l Lab
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("netns: load lab %s state: %w", lab, err)
	}
	if l.Name != lab {
		return nil, fmt.Errorf("netns: load lab %s state: file names lab %q", lab, l.Name)
	}
	return &l, nil
}

// Update applies fn to lab's record and saves the result, holding the lab's lock so
// that concurrent updaters (the lab process, `rocelab exec`, `down`) see each other's
// changes. Nothing is saved if fn fails.
func (s Store) Update(lab string, fn func(*Lab) error) error {
	unlock, err := s.lock(lab)
	if err != nil {
		return err
	}
	defer unlock()
	l, err := s.Load(lab)
	if err != nil {
		return err
	}
	if err := fn(l); err != nil {
		return err
	}
	return s.Save(l)
}

// lock takes an exclusive flock on the lab's directory. The lock dies with the process
// holding it, so a crashed holder never blocks cleanup.
func (s Store) lock(lab string) (unlock func(), err error) {
	if err := ValidName(lab); err != nil {
		return nil, fmt.Errorf("netns: lock lab: %w", err)
	}
	fd, err := unix.Open(s.Dir(lab), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			err = os.ErrNotExist
		}
		return nil, fmt.Errorf("netns: lock lab %s: %w", lab, err)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netns: lock lab %s: %w", lab, err)
	}
	return func() { unix.Close(fd) }, nil
}

// List returns every lab the store has a directory for, sorted by name, whether or not
// its process runs (see [Lab.Running]). Directories whose state file cannot be read are
// returned in unreadable rather than failing the whole list.
func (s Store) List() (labs []*Lab, unreadable []error, err error) {
	entries, err := os.ReadDir(s.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("netns: list labs in %s: %w", s.Root, err)
	}
	for _, e := range entries { // sorted by name
		if !e.IsDir() {
			continue
		}
		l, err := s.Load(e.Name())
		if err != nil {
			unreadable = append(unreadable, err)
			continue
		}
		labs = append(labs, l)
	}
	return labs, unreadable, nil
}

// Running returns the labs whose lab process is alive, sorted by name.
func (s Store) Running() ([]*Lab, error) {
	labs, _, err := s.List()
	if err != nil {
		return nil, err
	}
	running := labs[:0]
	for _, l := range labs {
		if l.Running() {
			running = append(running, l)
		}
	}
	return running, nil
}
