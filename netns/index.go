package netns

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultStoreIndex is where every store other than the default one records its root,
// so that `rocelab clean` finds the labs of every store and not only of
// $ROCELAB_STATE_DIR's: a test keeps its labs under a temporary state root, and a test
// binary killed by its timeout runs none of its cleanups. Like [DefaultStateRoot] it is
// on tmpfs, and root's alone.
const DefaultStoreIndex = "/run/rocelab-stores"

// StoreIndexEnv overrides [DefaultStoreIndex], so that a test of the index keeps its
// records apart from those of the tests that run beside it.
const StoreIndexEnv = "ROCELAB_STORE_INDEX"

func storeIndex() string {
	if dir := os.Getenv(StoreIndexEnv); dir != "" {
		return dir
	}
	return DefaultStoreIndex
}

// indexEntry is the index file that records root: a hash of the path, so that every
// root has one name whatever characters it holds.
func indexEntry(index, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(index, hex.EncodeToString(sum[:8]))
}

// indexedRoot is the store's root as the index records it, absolute; ok is false for
// the default store, which the index never records (clean always reads it).
func (s Store) indexedRoot() (root string, ok bool) {
	root, err := filepath.Abs(s.Root)
	return root, err == nil && root != DefaultStateRoot
}

// register records the store's root in the index unless it is there already. A store
// the index cannot record (a user without write access to it) still works: its labs
// are then found only through $ROCELAB_STATE_DIR, and register says nothing.
func (s Store) register() {
	root, ok := s.indexedRoot()
	if !ok {
		return
	}
	index := storeIndex()
	entry := indexEntry(index, root)
	if _, err := os.Stat(entry); err == nil {
		return
	}
	if err := os.Mkdir(index, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return
	}
	tmp, err := os.CreateTemp(index, ".new.*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, werr := tmp.WriteString(root + "\n")
	if errors.Join(werr, tmp.Close()) == nil && os.Rename(tmp.Name(), entry) == nil {
		IndexedStores() // drops the records of roots gone meanwhile: the index stays small
	}
}

// unregisterIfEmpty removes the store's record from the index once its root holds no
// lab (Down removed the last), so that the index does not keep a record for every
// temporary root a test made. A lab made in the root afterwards records it again
// (register runs with every save).
func (s Store) unregisterIfEmpty() {
	root, ok := s.indexedRoot()
	if !ok {
		return
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) > 0 {
		return
	}
	os.Remove(indexEntry(storeIndex(), root))
}

// IndexedStores returns the stores the index records, the default store excepted. It
// removes the records of roots that no longer exist (a test's temporary directory,
// removed after its test). An index that others than its owner could write is not
// trusted: clean would act on the labs its records name.
func IndexedStores() ([]Store, error) {
	index := storeIndex()
	var st unix.Stat_t
	if err := unix.Stat(index, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("netns: store index %s: %w", index, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("netns: store index %s: owned by uid %d with mode %#o, want uid %d and no write access for others: ignored",
			index, st.Uid, st.Mode&0o777, os.Geteuid())
	}
	entries, err := os.ReadDir(index)
	if err != nil {
		return nil, fmt.Errorf("netns: store index %s: %w", index, err)
	}
	var stores []Store
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(index, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		root := strings.TrimSuffix(string(b), "\n")
		if !filepath.IsAbs(root) || indexEntry(index, root) != path {
			continue // not a record register wrote
		}
		if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
			os.Remove(path)
			continue
		}
		stores = append(stores, Store{Root: root})
	}
	return stores, nil
}
