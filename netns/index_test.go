package netns

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStoreIndex: a store records its root in the index once, however often it makes
// a lab's directory; the default store is not recorded; a root that no longer exists
// loses its record when the index is read; an index others may write is refused.
func TestStoreIndex(t *testing.T) {
	index := filepath.Join(t.TempDir(), "index")
	t.Setenv(StoreIndexEnv, index)
	a, b := Store{Root: t.TempDir()}, Store{Root: filepath.Join(t.TempDir(), "b")}
	for _, s := range []Store{a, a, b} {
		if err := s.MakeDir("lab1"); err != nil {
			t.Fatal(err)
		}
	}
	Store{Root: DefaultStateRoot}.register()
	got, err := IndexedStores()
	if err != nil {
		t.Fatal(err)
	}
	want := []Store{a, b}
	sortStores := func(s []Store) { slices.SortFunc(s, func(x, y Store) int { return strings.Compare(x.Root, y.Root) }) }
	sortStores(got)
	sortStores(want)
	if !slices.Equal(got, want) {
		t.Fatalf("indexed %v, want %v", got, want)
	}
	entries, _ := os.ReadDir(index)
	if len(entries) != 2 {
		t.Fatalf("index holds %d records, want 2", len(entries))
	}

	// Down of a root's last lab removes the root's record.
	if err := a.Save(&Lab{Name: "lab1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Cleaner{Store: a}).Down("lab1"); err != nil {
		t.Fatal(err)
	}
	if got, err := IndexedStores(); err != nil || !slices.Equal(got, []Store{b}) {
		t.Fatalf("after the last lab of %s went down: indexed %v, %v; want only %s", a.Root, got, err, b.Root)
	}
	if err := a.Save(&Lab{Name: "lab1"}); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(b.Root); err != nil {
		t.Fatal(err)
	}
	if got, err := IndexedStores(); err != nil || !slices.Equal(got, []Store{a}) {
		t.Fatalf("after removing %s: indexed %v, %v; want only %s", b.Root, got, err, a.Root)
	}
	if entries, _ := os.ReadDir(index); len(entries) != 1 {
		t.Fatalf("the removed root's record stays: %d records", len(entries))
	}

	// A record that names a root other than its own name says is not register's.
	if err := os.WriteFile(filepath.Join(index, "0123456789abcdef"), []byte("/etc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := IndexedStores(); !slices.Equal(got, []Store{a}) {
		t.Fatalf("a forged record was read: %v", got)
	}

	if err := os.Chmod(index, 0o777); err != nil {
		t.Fatal(err)
	}
	if got, err := IndexedStores(); err == nil || got != nil || !strings.Contains(err.Error(), "no write access for others") {
		t.Fatalf("an index anyone may write gave %v, %v", got, err)
	}
}
