package cmatose

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/apps/apptest"
)

// TestServerClient runs cmatose's exchange between two in-process lab hosts: both
// sides print cmatose's progress lines and finish.
func TestServerClient(t *testing.T) {
	l := apptest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := ParseArgs([]string{"-C", "10", "-S", "100"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Service = l.Addrs[0]
	var srvOut strings.Builder
	done := make(chan error, 1)
	go func() { done <- Run(ctx, srv, &srvOut) }()
	cli, err := ParseArgs([]string{"-s", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cli.Service = l.Addrs[1]
	var cliOut strings.Builder
	// The server listens once its channel exists; a client too early is rejected
	// (invalid service ID), as the real ucmatose's would be: retry.
	for {
		cliOut.Reset()
		err = Run(ctx, cli, &cliOut)
		if err == nil || !strings.Contains(cliOut.String(), "REJECTED") || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("client: %v\n%s", err, cliOut.String())
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, srvOut.String())
	}
	if !strings.HasSuffix(srvOut.String(), "data transfers complete\ncmatose: disconnecting\ndisconnected\n") {
		t.Errorf("server output:\n%s", srvOut.String())
	}
	if !strings.Contains(cliOut.String(), "sending replies\ndata transfers complete\n") {
		t.Errorf("client output:\n%s", cliOut.String())
	}
}

func TestParseArgs(t *testing.T) {
	c, err := ParseArgs([]string{"-s", "10.0.0.1", "-p", "9000", "-C5", "-S", "64"})
	if err != nil || c.Server != "10.0.0.1" || c.Port != 9000 || c.MessageCount != 5 || c.MessageSize != 64 {
		t.Errorf("%+v %v", c, err)
	}
	for _, bad := range [][]string{{"-c", "2"}, {"-p", "70000"}, {"-C", "x"}, {"extra"}} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
