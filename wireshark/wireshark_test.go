package wireshark

import (
	"bytes"
	"os"
	"testing"
)

func TestInstall(t *testing.T) {
	dir := t.TempDir()
	path, err := Install(dir + "/plugins")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, Script) || len(Script) == 0 {
		t.Fatalf("installed %d bytes (%v), want the %d-byte script", len(got), err, len(Script))
	}
}
