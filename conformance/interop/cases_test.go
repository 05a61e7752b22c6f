package interop

import "fmt"

// appNames are the rocelab apps the cases run (built from cmd/).
var appNames = []string{"ibv_rc_pingpong", "ibv_ud_pingpong"}

// cases lists every pair: each tool against its rdma-core counterpart in the VM, with
// rocelab as client and as server, over the IPv4 GID (index 1) and the IPv6 GID
// (index 2), which rxe and rocelab number alike.
func cases() []interopCase {
	var out []interopCase
	for _, g := range []struct {
		name string
		idx  int
		warm string // run in the VM first
	}{
		{"ipv4", 1, ""},
		// rxe resolves the peer's MAC during modify-QP to RTR and fails at once if the
		// neighbour entry is missing; for IPv6 nothing has filled it yet (the IPv4 OOB
		// connection fills the ARP entry), so the VM pings h1 first, as the rxe-peer
		// README advises.
		{"ipv6", 2, "ping6 -c 1 -w 3 fd00::1 >/dev/null; "},
	} {
		for _, p := range []struct{ ours, theirs, flags string }{
			{"ibv_rc_pingpong", "ibv_rc_pingpong", "-n 100 -c"},
			{"ibv_ud_pingpong", "ibv_ud_pingpong", "-n 100 -s 1024"},
		} {
			vm := fmt.Sprintf("%s%s -d rxe0 -g %d %s", g.warm, p.theirs, g.idx, p.flags)
			host := fmt.Sprintf("%s -g %d %s", p.ours, g.idx, p.flags)
			out = append(out,
				interopCase{name: fmt.Sprintf("%s-client-%s", p.ours, g.name), expect: "iters in",
					server: side{inVM: true, cmd: vm}, client: side{cmd: host + " " + vmIPv4}},
				interopCase{name: fmt.Sprintf("%s-server-%s", p.ours, g.name), expect: "iters in",
					server: side{cmd: host}, client: side{inVM: true, cmd: vm + " " + h1IPv4}},
			)
		}
	}
	return out
}
