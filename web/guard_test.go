package web

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/netns"
)

// TestGuard: the view answers its own page only. A foreign Host (DNS rebinding) or
// Origin gets 403 for reads and captures alike; a capture without the token gets 403
// even from the page's own origin; with it, the request reaches the handler.
func TestGuard(t *testing.T) {
	s, err := New(netns.Store{Root: t.TempDir()}, "nolab", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, Guard(ln.Addr().String(), s.Handler()))
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)

	for _, c := range []struct {
		method, path, host, origin, token string
		want                              int
	}{
		{"GET", "/", "", "", "", http.StatusOK},
		{"GET", "/", "localhost:" + port, "", "", http.StatusOK},
		{"GET", "/", "[::1]:" + port, "", "", http.StatusOK},
		{"GET", "/api/status", "evil.example:" + port, "", "", http.StatusForbidden},
		{"GET", "/api/status", "evil.example", "", "", http.StatusForbidden},
		{"GET", "/api/status", "localhost:1", "", "", http.StatusForbidden},
		{"GET", "/api/status", "", "http://evil.example", "", http.StatusForbidden},
		{"GET", "/api/status", "", "null", "", http.StatusForbidden},
		{"POST", "/api/capture?port=s1:p0&action=start", "", "http://evil.example", s.Token(), http.StatusForbidden},
		{"POST", "/api/capture?port=s1:p0&action=start", "", "", "", http.StatusForbidden},
		{"POST", "/api/capture?port=s1:p0&action=start", "", "http://" + addr, "wrong", http.StatusForbidden},
		// Past the guard and the token: the lab does not exist, which the handler says.
		{"POST", "/api/capture?port=s1:p0&action=start", "", "http://" + addr, s.Token(), http.StatusBadRequest},
		{"POST", "/api/capture?port=s1:p0&action=start&token=" + s.Token(), "", "", "", http.StatusBadRequest},
	} {
		req, err := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.token != "" {
			req.Header.Set("X-Rocelab-Token", c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s Host %q Origin %q token %v: %d, want %d", c.method, c.path, c.host, c.origin, c.token != "", resp.StatusCode, c.want)
		}
	}
	if len(strings.Trim(s.Token(), "0123456789abcdef")) != 0 || len(s.Token()) != 32 {
		t.Errorf("token %q: want 128 random bits in hex", s.Token())
	}
}
