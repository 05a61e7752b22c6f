package lab

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/netns"
)

// TestQueryTimesOut: a lab process that accepts a control call and never answers (the
// issue's wedged lab) costs its caller QueryTimeout and a message that says so, not a
// hang.
func TestQueryTimesOut(t *testing.T) {
	store := netns.Store{Root: t.TempDir()}
	path := ControlPath(store, "wedged")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			held <- c // read nothing, answer nothing
		}
	}()
	defer func() {
		if c := <-held; c != nil {
			c.Close()
		}
	}()
	old := QueryTimeout
	QueryTimeout = 300 * time.Millisecond
	defer func() { QueryTimeout = old }()
	_, err = Query(store, "wedged", Request{Op: "status"})
	if err == nil || !strings.Contains(err.Error(), `no answer to "status" within 300ms`) {
		t.Fatalf("Query of a wedged lab: %v", err)
	}
	t.Log(err)
}
