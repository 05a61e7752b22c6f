package lab

import (
	"strings"
	"testing"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/netns"
)

// TestCheckNames: names each within their own limit (64) but too long together for the
// verbs socket address fail before anything is created, naming the limit; so does a
// state directory too deep for the control socket; a lab name never leaves the store.
func TestCheckNames(t *testing.T) {
	store := netns.Store{Root: "/run/rocelab"}
	hostTopo := func(host string) *topo.Topology {
		return &topo.Topology{Hosts: []topo.Host{{Name: host}}}
	}
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		store      netns.Store
		lab, host  string
		wantSubstr string
	}{
		{store, "lab1", "h1", ""},
		{store, long[:40], long[:52], ""}, // 92 characters together: the most that fits
		{store, long[:40], long[:53], "at most 92 characters"},
		{store, long, long, "more than a socket address holds (107)"},
		{netns.Store{Root: "/" + strings.Repeat("d", 90)}, "lab1", "h1", "more than a socket path holds (107)"},
		{store, "../evil", "h1", "must not start with"},
		{store, "a/../../evil", "h1", "not allowed"},
		{store, "..", "h1", "must not start with"},
	} {
		err := CheckNames(tc.store, tc.lab, hostTopo(tc.host))
		if tc.wantSubstr == "" && err != nil || tc.wantSubstr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantSubstr)) {
			t.Errorf("CheckNames(%s, %q, %q) = %v, want %q", tc.store.Root, tc.lab, tc.host, err, tc.wantSubstr)
		}
	}
}
