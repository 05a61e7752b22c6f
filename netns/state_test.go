package netns

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestStateSaveLoadUpdateList(t *testing.T) {
	store := Store{Root: t.TempDir()}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	lab := &Lab{Name: "a", Owner: self, Hosts: []Host{{
		Name: "h1", Netns: "rl-a-h1", Tap: "rl-h1", MAC: "02:00:00:00:00:01",
		IPv4: netip.MustParsePrefix("10.0.0.1/24"), IPv6: netip.MustParsePrefix("fd00::1/64"),
	}}}
	if err := store.Save(lab); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(&Lab{Name: "b", Owner: Process{PID: self.PID, StartTime: self.StartTime + 1}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Update("a", func(l *Lab) error {
		l.Sockets = append(l.Sockets, "/x.sock")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := store.Load("a")
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Host("h1"); h == nil || h.IPv4 != lab.Hosts[0].IPv4 || h.IPv6 != lab.Hosts[0].IPv6 || len(got.Sockets) != 1 {
		t.Errorf("Load after Update = %+v", got)
	}

	// A directory without a readable state file is reported, not fatal.
	if err := os.Mkdir(filepath.Join(store.Root, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	labs, unreadable, err := store.List()
	if err != nil || len(labs) != 2 || labs[0].Name != "a" || labs[1].Name != "b" || len(unreadable) != 1 {
		t.Errorf("List = %d labs, %v unreadable, %v; want a and b, 1 unreadable", len(labs), unreadable, err)
	}
	running, err := store.Running()
	if err != nil || len(running) != 1 || running[0].Name != "a" {
		t.Errorf("Running = %v, %v; want only a (b's pid is ours, its start time is not)", running, err)
	}
	if _, err := store.Load("missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	if err := store.Save(&Lab{Name: "../x"}); err == nil {
		t.Error("Save accepted lab name ../x")
	}
}

// TestStoreRefusesPathNames: `rocelab down ../evil` and the like must not reach outside
// the store: a lab name that is not a valid name is refused before any file is opened.
func TestStoreRefusesPathNames(t *testing.T) {
	root := t.TempDir()
	s := Store{Root: root + "/labs"}
	// A state file one level up, naming the lab the way a traversal would reach it.
	if err := os.WriteFile(root+"/state.json", []byte(`{"name":".."}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"..", "../labs", "a/b", "/etc", ""} {
		if _, err := s.Load(name); err == nil || errors.Is(err, os.ErrNotExist) {
			t.Errorf("Load(%q) = %v, want a name error", name, err)
		}
		if err := s.Update(name, func(*Lab) error { return nil }); err == nil || errors.Is(err, os.ErrNotExist) {
			t.Errorf("Update(%q) = %v, want a name error", name, err)
		}
	}
}
