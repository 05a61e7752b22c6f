package experiment

import (
	"fmt"
	"os"
	"sync"
)

// scratch is a run's scratch file for the series that grow with simulated time —
// every port's change points, the delivered bytes and the links table's instants —
// so that a run's memory is that of its network, not of its length: a changeLog
// moves each full chunk here (spillChunk) and reads it back when walked. The file is
// unlinked as soon as it is created; the system frees it when it is closed, which
// *os.File does itself once the Result holding it is collected. The ports of the
// parallel driver's partitions spill from their threads, hence the lock (a spill is
// one write per spillChunk bytes of change points).
type scratch struct {
	mu   sync.Mutex
	file *os.File
	size int64
	err  error // the first error writing or reading the file
}

// spillChunk is the bytes of change points a spilling changeLog holds in memory
// before it moves them to its scratch file.
const spillChunk = 4 << 10

// write appends b to the file and returns its offset.
func (s *scratch) write(b []byte) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0
	}
	if s.file == nil {
		if s.file, s.err = os.CreateTemp("", "rocelab-series-*"); s.err != nil {
			return 0
		}
		if s.err = os.Remove(s.file.Name()); s.err != nil {
			return 0
		}
	}
	off := s.size
	if _, err := s.file.WriteAt(b, off); err != nil {
		s.err = err
		return 0
	}
	s.size += int64(len(b))
	return off
}

// read fills b from the file at off; false if it cannot (Err says why).
func (s *scratch) read(off int64, b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	if _, err := s.file.ReadAt(b, off); err != nil {
		s.err = err
		return false
	}
	return true
}

// close frees the file; reading it afterwards fails with errClosed.
func (s *scratch) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.file != nil {
		err = s.file.Close()
	}
	if s.err == nil {
		s.err = errClosed
	}
	return err
}

// Err is the first error writing or reading the file, naming it.
func (s *scratch) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("experiment: the series' scratch file: %w", s.err)
	}
	return nil
}
