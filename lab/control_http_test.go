package lab

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
)

// TestControlRefusals: the control socket's HTTP answers to wrong use name the
// problem, with the status net/http clients expect.
func TestControlRefusals(t *testing.T) {
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, store, _ := startDoubleLab(t, tp)
	path := ControlPath(store, l.Name())
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	for _, tc := range []struct {
		method, op, body string
		status           int
		want             string
	}{
		{"GET", "status", "", http.StatusMethodNotAllowed, "GET /status: want POST"},
		{"POST", "nosuch", "", http.StatusNotFound, `unknown op "nosuch": want POST to /capture, /counters, /down-parts, /hold, /record, /recorded, /status`},
		{"POST", "status", strings.Repeat(" ", 5000) + "{}", http.StatusRequestEntityTooLarge, "request body over 4096 bytes"},
		{"POST", "hold", "{not json", http.StatusBadRequest, "bad request"},
		{"POST", "hold", `{"hosts":["h9"],"hold_ns":1000}`, http.StatusBadRequest, `hold: no host "h9"`},
		{"POST", "capture", `{"port":"s1:p9"}`, http.StatusBadRequest, "switch s1 has ports p0–p1, not p9"},
		{"POST", "status", "", http.StatusOK, ""},
	} {
		req, _ := http.NewRequest(tc.method, "http://lab/"+tc.op, strings.NewReader(tc.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s /%s: %v", tc.method, tc.op, err)
		}
		var r Reply
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || !strings.Contains(r.Error, tc.want) || (tc.status == http.StatusOK) != (r.Status != nil) {
			t.Errorf("%s /%s %.20q: %s %q (%v), want %d %q", tc.method, tc.op, tc.body, resp.Status, r.Error, err, tc.status, tc.want)
		}
	}
}

// TestControlTrickledRequest: a client that sends its request's head and then a byte
// of its body, and nothing more, is cut off after controlTimeout instead of holding a
// handler for good.
func TestControlTrickledRequest(t *testing.T) {
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, store, _ := startDoubleLab(t, tp)
	c, err := net.Dial("unix", ControlPath(store, l.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /status HTTP/1.1\r\nHost: lab\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(4 * controlTimeout)) // the test's own bound, far past the lab's
	io.Copy(io.Discard, c)                           // until the lab answers and closes
	if took := time.Since(start); took >= 4*controlTimeout {
		t.Fatalf("the lab still held a trickled request after %v", took)
	}
}
