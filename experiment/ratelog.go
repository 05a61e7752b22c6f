package experiment

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/rocelab/rocelab/internal/clock"
)

// rateLog holds a virtual-time run's rate samples (rates.csv's rows) out of memory,
// in a scratch file: a sample of every flow under way every T/4 is tens of millions
// of samples on the 1,024-host fat tree, gigabytes held in memory for the whole run.
// The file is unlinked as soon as it is created; the system frees it when it is
// closed, which *os.File does itself once the Result holding it is collected.
type rateLog struct {
	file *os.File
	w    *bufio.Writer
	err  error // the first error writing the file; each reports it
}

// rateRecord is the size of a RateSample in the file: T, Flow, Rate, Window,
// Measured, InFlight and U as 8 bytes each (the floats' bits: read back exactly),
// HasU as one.
const rateRecord = 7*8 + 1

// add appends s.
func (l *rateLog) add(s RateSample) {
	if l.err != nil {
		return
	}
	if l.file == nil {
		if l.file, l.err = os.CreateTemp("", "rocelab-rates-*"); l.err != nil {
			return
		}
		if l.err = os.Remove(l.file.Name()); l.err != nil {
			return
		}
		l.w = bufio.NewWriterSize(l.file, 64<<10)
	}
	var b [rateRecord]byte
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(s.T))
	le.PutUint64(b[8:], uint64(s.Flow))
	le.PutUint64(b[16:], math.Float64bits(s.Rate))
	le.PutUint64(b[24:], math.Float64bits(s.Window))
	le.PutUint64(b[32:], math.Float64bits(s.Measured))
	le.PutUint64(b[40:], s.InFlight)
	le.PutUint64(b[48:], math.Float64bits(s.U))
	if s.HasU {
		b[56] = 1
	}
	_, l.err = l.w.Write(b[:])
}

// each calls fn with every sample added, in order.
func (l *rateLog) each(fn func(RateSample)) error {
	if l.err == nil && l.file != nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return fmt.Errorf("experiment: the rate samples' scratch file: %w", l.err)
	}
	if l.file == nil {
		return nil
	}
	size, err := l.file.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("experiment: the rate samples' scratch file: %w", err)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(l.file, 0, size), 64<<10)
	var b [rateRecord]byte
	le := binary.LittleEndian
	for range size / rateRecord {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return fmt.Errorf("experiment: the rate samples' scratch file: %w", err)
		}
		fn(RateSample{T: clock.Time(le.Uint64(b[0:])), Flow: int(le.Uint64(b[8:])),
			Rate: math.Float64frombits(le.Uint64(b[16:])), Window: math.Float64frombits(le.Uint64(b[24:])),
			Measured: math.Float64frombits(le.Uint64(b[32:])), InFlight: le.Uint64(b[40:]),
			U: math.Float64frombits(le.Uint64(b[48:])), HasU: b[56] == 1})
	}
	return nil
}

// EachRate calls fn with every rate sample in order (rates.csv's rows): those of
// Rates, which a lab or real-time run fills, then those a virtual-time run took.
func (r *Result) EachRate(fn func(RateSample)) error {
	for _, s := range r.Rates {
		fn(s)
	}
	return r.rates.each(fn)
}
