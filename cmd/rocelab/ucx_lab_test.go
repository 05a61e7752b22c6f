package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestUCX runs Debian's unmodified UCX (ucx-utils) between two lab hosts over rocelab's
// RNICs: ucx_perftest's tag-matching latency and bandwidth over UCX_TLS=rc_verbs,ud_verbs
// (RC for the data, UD for UCX's wire-up) and over ud_verbs alone, on the IPv4 RoCEv2
// GID UCX picks. Each run must complete its iterations ("Final:" with a message rate).
// UD over IPv4 needs ibv_wc.sl to carry the L3 header type, as ConnectX reports it
// (qp.SLIPv4): with rxe's 0, UCX 1.13 drops every IPv4 packet as a wrong GID.
func TestUCX(t *testing.T) {
	if _, err := exec.LookPath("ucx_perftest"); err != nil {
		t.Skip("ucx_perftest is not installed (make deps-system installs ucx-utils as root)")
	}
	l := newIBVerbsLab(t)
	final := regexp.MustCompile(`(?m)^Final:\s+(\d+)\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)`)
	for i, tc := range []struct{ name, tls, test, iters string }{
		{"rc-ud-tag_lat", "rc_verbs,ud_verbs", "tag_lat", "1000"},
		{"rc-ud-tag_bw", "rc_verbs,ud_verbs", "tag_bw", "200"},
		{"ud-tag_lat", "ud_verbs", "tag_lat", "1000"},
		{"ud-tag_bw", "ud_verbs", "tag_bw", "200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(13400 + i)
			env := []string{"env", "UCX_TLS=" + tc.tls, "UCX_NET_DEVICES=rocelab0:1"}
			// exec -d returns once the server listens on its TCP port for the exchange.
			server := l.cmd(append([]string{"exec", "--lab", l.name, "-d", "h2", "--"}, append(env, "ucx_perftest", "-p", port)...)...)
			server.Stdout, server.Stderr = os.Stderr, os.Stderr
			if err := server.Run(); err != nil {
				t.Fatalf("exec -d ucx_perftest: %v", err)
			}
			out, err := l.exec("h1", append(env, "ucx_perftest", "10.0.0.2", "-p", port, "-t", tc.test, "-n", tc.iters)...).CombinedOutput()
			t.Logf("ucx_perftest -t %s over %s:\n%s", tc.test, tc.tls, out)
			m := final.FindSubmatch(out)
			if err != nil || m == nil || string(m[1]) != tc.iters {
				t.Fatalf("ucx_perftest -t %s over %s: %v, want %s iterations completed", tc.test, tc.tls, err, tc.iters)
			}
		})
	}
}
