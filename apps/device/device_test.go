package device

import (
	"net/netip"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

func TestRxeIndex(t *testing.T) {
	v4 := roce.GIDFromAddr(netip.MustParseAddr("10.0.0.1"))
	v6 := roce.GIDFromAddr(netip.MustParseAddr("fd00::1"))
	ll := roce.GIDFromAddr(netip.MustParseAddr("fe80::1"))
	for _, tc := range []struct {
		table []roce.GID
		idx   int
		gid   roce.GID
		dev   int
		err   bool
	}{
		{[]roce.GID{v4, v6}, 1, v4, 0, false},
		{[]roce.GID{v4, v6}, 2, v6, 1, false},
		{[]roce.GID{v4, v6}, 0, roce.GID{}, 0, true},
		{[]roce.GID{v4, v6}, 3, roce.GID{}, 0, true},
		{[]roce.GID{v4}, 2, roce.GID{}, 0, true},
		{[]roce.GID{v6}, 1, roce.GID{}, 0, true},
		{[]roce.GID{ll, v4, v6}, 0, ll, 0, false},
		{[]roce.GID{ll, v4, v6}, 2, v6, 2, false},
	} {
		g, d, err := RxeIndex(tc.table, tc.idx)
		if (err != nil) != tc.err || g != tc.gid || d != tc.dev {
			t.Errorf("%v[%d]: %v %d %v", tc.table, tc.idx, g, d, err)
		}
	}
}
