// Package device opens a lab host's soft-RNIC for the sample apps (ibv_*_pingpong,
// ib_*_bw/lat) and presents its GID table the way the kernel's rxe does, so that the
// same command lines (`-g 1`, `-x 1`) work against rocelab and against a kernel rxe
// peer.
package device

//lint:file-ignore ST1005 error messages reproduce rdma-core's and perftest's wording

import (
	"errors"
	"fmt"
	"os"

	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

// Name is the device name the apps report and accept with -d (besides the host's
// name): a lab host has one soft-RNIC.
const Name = "rocelab0"

// Open checks the device name given with -d ("" = the first device, as ibverbs does)
// and connects to the verbs service at addr ("" = the lab host's, from the
// environment `rocelab exec` sets).
func Open(devName, addr string) (*verbs.Context, error) {
	if devName != "" && devName != Name && devName != os.Getenv(ibv.EnvHost) {
		return nil, fmt.Errorf("IB device %s not found (this host has %s)", devName, Name)
	}
	ctx, err := verbs.Open(addr)
	if errors.Is(err, verbs.ErrNoService) {
		return nil, fmt.Errorf("No IB devices found: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("Couldn't get context for %s: %w", Name, err)
	}
	return ctx, nil
}

// GIDTable reads the device's GID table (rocelab's order: the host's IPv4 address,
// then its IPv6 address).
func GIDTable(ctx *verbs.Context) ([]roce.GID, error) {
	pa, err := ctx.QueryPort(1)
	if err != nil {
		return nil, err
	}
	t := make([]roce.GID, 0, pa.GIDTableLen)
	for i := range pa.GIDTableLen {
		g, err := ctx.QueryGID(i)
		if err != nil {
			return nil, err
		}
		t = append(t, g)
	}
	return t, nil
}

func linkLocal(g roce.GID) bool { return g[0] == 0xfe && g[1]&0xc0 == 0x80 }

// RxeIndex maps a GID index as rxe numbers its table — 0 the fe80:: link-local GID,
// 1 the IPv4 GID ::ffff:a.b.c.d, 2 the IPv6 address — to the index of the same GID in
// the device's table, and returns the GID. rocelab's devices have no link-local GID,
// so index 0 is refused with an explanation. If the device's table itself starts with
// a link-local GID, indices are taken as they are.
func RxeIndex(table []roce.GID, idx int) (roce.GID, int, error) {
	if len(table) > 0 && linkLocal(table[0]) {
		if idx < 0 || idx >= len(table) {
			return roce.GID{}, 0, fmt.Errorf("Could not get local gid for gid index %d", idx)
		}
		return table[idx], idx, nil
	}
	var want func(roce.GID) bool
	switch idx {
	case 0:
		return roce.GID{}, 0, fmt.Errorf("Could not get local gid for gid index 0: as on rxe, index 0 is the fe80:: link-local GID, which rocelab devices do not have; use 1 (IPv4, ::ffff:a.b.c.d) or 2 (IPv6)")
	case 1:
		want = roce.GID.IsIPv4
	case 2:
		want = func(g roce.GID) bool { return !g.IsIPv4() && !linkLocal(g) }
	default:
		return roce.GID{}, 0, fmt.Errorf("Could not get local gid for gid index %d (the table has 1 = IPv4, 2 = IPv6)", idx)
	}
	for i, g := range table {
		if want(g) {
			return g, i, nil
		}
	}
	kind := map[int]string{1: "an IPv4", 2: "an IPv6"}[idx]
	return roce.GID{}, 0, fmt.Errorf("Could not get local gid for gid index %d: the host has no %s address", idx, kind)
}

// PortMTU returns port 1's active MTU.
func PortMTU(ctx *verbs.Context) (roce.MTU, error) {
	pa, err := ctx.QueryPort(1)
	if err != nil {
		return 0, fmt.Errorf("Unable to query port info for port 1: %w", err)
	}
	return pa.ActiveMTU, nil
}
