package conformance

import (
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

//go:embed testdata/*.hex
var vectors embed.FS

// Vector returns the bytes of testdata/name (a .hex file: # comments, hex digits).
func Vector(name string) ([]byte, error) {
	b, err := vectors.ReadFile("testdata/" + name)
	if err != nil {
		return nil, err
	}
	return parseHex(string(b))
}

func parseHex(s string) ([]byte, error) {
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(digits.String())
}

// RoCEVectors is the directory holding roce/testdata (rxe captures and the ConnectX
// CNP). Empty means: search the working directory and its parents for
// roce/testdata/rxe, as when rocelab runs inside its source tree.
var RoCEVectors string

func roceVectorDir() (string, error) {
	if RoCEVectors != "" {
		return RoCEVectors, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, "roce", "testdata")
		if st, err := os.Stat(filepath.Join(cand, "rxe")); err == nil && st.IsDir() {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: roce/testdata not found above the working directory (use --vectors)", ErrSkip)
		}
		dir = parent
	}
}
