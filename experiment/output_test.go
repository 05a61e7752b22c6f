package experiment

import (
	"bytes"
	"encoding/csv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCSVRowMatchesEncodingCSV: csvRow writes the bytes encoding/csv writes for the
// same fields formatted as strings, for random numbers (NaN and infinities among the
// floats) and strings that csv must quote (commas, quotes, line breaks, a leading
// space, `\.`) or not, empty ones first in a row included.
func TestCSVRowMatchesEncodingCSV(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	strs := []string{"", "s1:p0", "a,b", `say "hi"`, "two\nlines", "cr\r", " lead", "\tlead", `\.`, "ü", "x y"}
	floats := []float64{0, math.Copysign(0, -1), 1e-300, 123456789.123, math.NaN(), math.Inf(1), math.Inf(-1), 0.95}
	var rows [][]string
	path := filepath.Join(t.TempDir(), "rows.csv")
	err := writeRows(path, []string{"h1", "h 2"}, func(row *csvRow) error {
		for range 2000 {
			var fields []string
			for range 1 + rng.IntN(6) {
				switch rng.IntN(4) {
				case 0:
					v := rng.Int64() - math.MaxInt64/2
					row.int(v)
					fields = append(fields, itoa(v))
				case 1:
					v := rng.Uint64()
					row.uint(v)
					fields = append(fields, strconv.FormatUint(v, 10))
				case 2:
					v := floats[rng.IntN(len(floats))] * rng.Float64() * 1e9
					if rng.IntN(2) == 0 {
						v = floats[rng.IntN(len(floats))]
					}
					row.float(v)
					fields = append(fields, ftoa(v))
				default:
					s := strs[rng.IntN(len(strs))]
					row.str(s)
					fields = append(fields, s)
				}
			}
			row.end()
			rows = append(rows, fields)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	w := csv.NewWriter(&want)
	w.Write([]string{"h1", "h 2"})
	w.WriteAll(rows)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		for i := range min(len(got), want.Len()) {
			if got[i] != want.Bytes()[i] {
				t.Fatalf("differs at byte %d: %q, want %q", i, got[max(0, i-40):min(len(got), i+40)],
					want.Bytes()[max(0, i-40):min(want.Len(), i+40)])
			}
		}
		t.Fatalf("%d bytes, want %d", len(got), want.Len())
	}
}

// TestResultClose: a closed Result's series are gone, and reading them says so rather
// than giving empty files.
func TestResultClose(t *testing.T) {
	cfg := Defaults()
	cfg.Senders, cfg.FlowSize = 2, 20_000
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Close(); err != nil {
		t.Fatal(err)
	}
	if err := res.EachRate(func(RateSample) {}); err == nil {
		t.Error("EachRate after Close: no error")
	}
	if err := res.WriteData(t.TempDir()); err == nil {
		t.Error("WriteData after Close: no error")
	}
}
