package interop

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// appNames are the rocelab apps the cases run (built from cmd/); each one's counterpart
// in the VM is rdma-core's ibv_<app> or perftest's ib_<app> (see counterpart).
var appNames = []string{"rc_pingpong", "uc_pingpong", "ud_pingpong", "srq_pingpong", "write_bw", "read_bw", "send_bw",
	"atomic_bw", "send_lat", "write_lat", "read_lat", "cmatose"}

// counterpart names the real tool a rocelab app interoperates with.
func counterpart(app string) string {
	if strings.HasSuffix(app, "_pingpong") {
		return "ibv_" + app
	}
	if app == "cmatose" {
		return "ucmatose"
	}
	return "ib_" + app
}

// realOnHost are the apps whose real counterpart also runs on rocelab's side, on
// rocelab's libibverbs.so.1 (docs/libibverbs.md): the real tool in h1 against the real
// tool on rxe.
var realOnHost = map[string]bool{"rc_pingpong": true, "ud_pingpong": true, "write_bw": true, "read_bw": true,
	"send_lat": true}

// cases lists every pair: each app against its rdma-core or perftest counterpart in
// the VM, with rocelab as client and as server, over the IPv4 GID (index 1) and the
// IPv6 GID (index 2), which rxe and rocelab number alike; and for the apps of
// realOnHost, the same with the real tool in h1.
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
		for _, p := range []struct{ app, flags, name string }{
			{"rc_pingpong", "-n 100 -c", ""},
			{"uc_pingpong", "-n 100 -c", ""},
			{"ud_pingpong", "-n 100 -s 1024", ""},
			{"srq_pingpong", "-n 100 -q 4", ""},
			{"write_bw", "-s 65536 -n 200 --report_gbits", ""},
			{"read_bw", "-s 65536 -n 200 --report_gbits", ""},
			{"send_bw", "-s 65536 -n 200 --report_gbits", ""},
			{"send_bw", "-c UC -s 65536 -n 200 --report_gbits", "send_bw-uc"},
			{"atomic_bw", "-n 1000", ""},
			{"send_lat", "-s 64 -n 1000", ""},
			{"write_lat", "-s 64 -n 1000", ""},
			{"read_lat", "-s 64 -n 1000", ""},
		} {
			expect, ready, gflag := pingpongResult, "local address", "-g"
			if !strings.HasSuffix(p.app, "_pingpong") {
				expect, ready, gflag = perftestResult, "* Waiting for client", "-x"
			}
			var serverExpect *regexp.Regexp
			if p.app == "read_lat" {
				serverExpect = servedOnly
			}
			name := p.name
			if name == "" {
				name = p.app
			}
			vm := fmt.Sprintf("%s%s -d rxe0 %s %d %s", g.warm, counterpart(p.app), gflag, g.idx, p.flags)
			host := fmt.Sprintf("%s %s %d %s", p.app, gflag, g.idx, p.flags)
			out = append(out,
				interopCase{name: fmt.Sprintf("%s-client-%s", name, g.name), expect: expect, serverExpect: serverExpect,
					ready: ready, server: side{inVM: true, cmd: vm}, client: side{cmd: host + " " + vmIPv4},
					boundResends: strings.HasSuffix(p.app, "_bw") && p.app != "atomic_bw" && p.name == ""},
				interopCase{name: fmt.Sprintf("%s-server-%s", name, g.name), expect: expect, serverExpect: serverExpect,
					ready: ready, server: side{cmd: host}, client: side{inVM: true, cmd: vm + " " + h1IPv4}})
			if realOnHost[p.app] {
				real := fmt.Sprintf("%s %s %d %s", counterpart(p.app), gflag, g.idx, p.flags)
				out = append(out,
					interopCase{name: fmt.Sprintf("real-%s-client-%s", counterpart(p.app), g.name), expect: expect,
						serverExpect: serverExpect, ready: ready, server: side{inVM: true, cmd: vm},
						client: side{cmd: real + " " + vmIPv4, real: true}},
					interopCase{name: fmt.Sprintf("real-%s-server-%s", counterpart(p.app), g.name), expect: expect,
						serverExpect: serverExpect, ready: ready, server: side{cmd: real, real: true},
						client: side{inVM: true, cmd: vm + " " + h1IPv4}})
			}
		}
	}
	// RDMA-CM: rocelab's CM agent against the kernel's (CM MADs on QP1), both ways.
	// ucmatose listens without a TCP socket: the VM waits for its listening cm_id.
	out = append(out,
		interopCase{name: "cmatose-client-ipv4", expect: cmatoseResult,
			server:      side{inVM: true, cmd: "ucmatose"},
			vmListening: rxeCMListening,
			client:      side{cmd: "cmatose -s " + vmIPv4}},
		interopCase{name: "cmatose-server-ipv4", expect: cmatoseResult, ready: "cmatose: starting server",
			server: side{cmd: "cmatose"}, client: side{inVM: true, cmd: "ucmatose -s " + h1IPv4}})
	// The real rping and ib_write_bw -R in h1 on rocelab's librdmacm.so.1 against the
	// same on rxe. Their servers listen on no TCP socket (and rping prints nothing before
	// it listens), so the VM's client tries again while h1 rejects it for want of a
	// listener (at most 5 s). Not ib_write_bw -R with rxe as the server: perftest's
	// server listens a second time after its rdma_cm parameter exchange, the client's
	// second REQ can reach it first (REJ "invalid service ID"), and perftest 4.5-0.17's
	// client then retries on identifiers it has just destroyed and freed
	// (rdma_cm_client_connection) and crashes: 3 runs in about 25 here (docs/rdmacm.md).
	const rping, bwR = " -v -C 10", " -s 65536 -n 200 --report_gbits"
	out = append(out,
		interopCase{name: "real-rping-client-ipv4", expect: rpingResult,
			server: side{inVM: true, cmd: "rping -s -a " + vmIPv4 + rping}, vmListening: rxeCMListening,
			client: side{cmd: "rping -c -a " + vmIPv4 + rping, real: true}},
		interopCase{name: "real-rping-server-ipv4", expect: rpingResult,
			server: side{cmd: "rping -s -a " + h1IPv4 + rping, real: true},
			client: side{inVM: true, cmd: "i=0; until rping -c -a " + h1IPv4 + rping +
				"; do i=$((i+1)); [ $i -ge 50 ] && exit 1; sleep 0.1; done"}},
		interopCase{name: "real-ib_write_bw-R-server-ipv4", expect: perftestResult,
			server: side{cmd: "ib_write_bw -R" + bwR, real: true},
			client: side{inVM: true, cmd: "i=0; until ib_write_bw -R" + bwR + " " + h1IPv4 +
				"; do i=$((i+1)); [ $i -ge 50 ] && exit 1; sleep 0.1; done"}})
	// The real udaddy (UD through rdma_cm: SIDR_REQ and SIDR_REP on QP1, then ten UD
	// SENDs each way) in h1 against udaddy on rxe, both ways. A SIDR_REQ that reaches
	// h1 before its server listens is answered "unsupported" (5), and the VM's client
	// tries again.
	out = append(out,
		interopCase{name: "real-udaddy-client-ipv4", expect: cmatoseResult,
			server: side{inVM: true, cmd: "udaddy -b " + vmIPv4}, vmListening: rxeCMListening,
			client: side{cmd: "udaddy -s " + vmIPv4, real: true}},
		interopCase{name: "real-udaddy-server-ipv4", expect: cmatoseResult,
			server: side{cmd: "udaddy -b " + h1IPv4, real: true},
			client: side{inVM: true, cmd: "i=0; until udaddy -s " + h1IPv4 +
				"; do i=$((i+1)); [ $i -ge 50 ] && exit 1; sleep 0.1; done"}})
	// rsockets and the rdma_verbs API: the real rstream (a stream of 4 KiB transfers
	// over rsockets' RDMA WRITE WITH IMMEDIATE protocol) and rdma_server/rdma_client
	// (rdma_getaddrinfo, rdma_create_ep, a synchronous identifier, rdma_post_* and
	// rdma_get_*_comp) in h1 on rocelab's librdmacm.so.1 against the same on rxe's
	// rdma-core, both ways. Neither server listens on a TCP socket.
	const rstream = " -S 4096 -C 200"
	out = append(out,
		interopCase{name: "real-rstream-client-ipv4", expect: rstreamResult,
			server: side{inVM: true, cmd: "rstream" + rstream}, vmListening: rxeCMListening,
			client: side{cmd: "rstream -s " + vmIPv4 + rstream, real: true}},
		interopCase{name: "real-rstream-server-ipv4", expect: rstreamResult,
			server: side{cmd: "rstream" + rstream, real: true},
			client: side{inVM: true, cmd: "i=0; until rstream -s " + h1IPv4 + rstream +
				"; do i=$((i+1)); [ $i -ge 50 ] && exit 1; sleep 0.1; done"}},
		interopCase{name: "real-rdma_client-ipv4", expect: rdmaVerbsResult,
			server: side{inVM: true, cmd: "rdma_server"}, vmListening: rxeCMListening,
			client: side{cmd: "rdma_client -s " + vmIPv4, real: true}},
		interopCase{name: "real-rdma_server-ipv4", expect: rdmaVerbsResult,
			server: side{cmd: "rdma_server", real: true},
			client: side{inVM: true, cmd: "i=0; until rdma_client -s " + h1IPv4 +
				"; do i=$((i+1)); [ $i -ge 50 ] && exit 1; sleep 0.1; done"}})
	// Multicast: the real mckey in h1 sending ten UD datagrams to a group the VM's
	// mckey joined, and the other way round. The switch floods the group's MAC; rxe
	// attaches its QP to the group, rocelab's RNIC filters by its joins.
	const group, count = "239.1.2.3", " -C 10"
	out = append(out,
		interopCase{name: "real-mckey-sender-ipv4", expect: cmatoseResult,
			server: side{inVM: true, cmd: "mckey -m " + group + " -b " + vmIPv4 + count}, vmReady: "receiving data transfers",
			client: side{cmd: "mckey -s -m " + group + " -b " + h1IPv4 + count, real: true}},
		interopCase{name: "real-mckey-receiver-ipv4", expect: cmatoseResult, ready: "receiving data transfers", readyMeansReady: true,
			server: side{cmd: "mckey -m " + group + " -b " + h1IPv4 + count, real: true},
			client: side{inVM: true, cmd: "mckey -s -m " + group + " -b " + vmIPv4 + count}})
	return out
}

// The lines both sides of a finished run print: rdma-core's pingpong summary, and a
// row of numbers under perftest's table header (bandwidth or latency).
var (
	pingpongResult = regexp.MustCompile(`(?m)^\d+ iters in [\d.]+ seconds = [\d.]+ usec/iter`)
	// perftest may print its clock check's warning ("Correlation coefficient r^2: …
	// < 0.9", under QEMU's emulation) between the header and the row.
	perftestResult = regexp.MustCompile(`(?m)^ #bytes .*\n(?:Correlation coefficient r\^2: .*\n)?\s*\d+\s+\d+\s+[\d.]+`)
	// servedOnly is what ib_read_lat's server prints before it serves the reads and
	// exits without a table: its peer's address (its exit status is checked too).
	servedOnly = regexp.MustCompile(`(?m)^ remote address: LID`)
	// cmatoseResult is the line both sides of ucmatose (and of udaddy) print once their
	// messages are in.
	cmatoseResult = regexp.MustCompile(`(?m)^data transfers complete$`)
	// rpingResult is rping -v's tenth ping (the server prints it with "server ").
	rpingResult = regexp.MustCompile("ping data: rdma-ping-9: JKLMNOPQRSTUVWXYZ")
	// rstreamResult is rstream's row for a custom size: all 200 transfers of 4 KiB.
	rstreamResult = regexp.MustCompile(`(?m)^custom\s+4k\s+200\s+1\s+`)
	// rdmaVerbsResult is what rdma_server and rdma_client print once their message is
	// through and they have disconnected (", end 0": no error).
	rdmaVerbsResult = regexp.MustCompile(`(?m)^rdma_(server|client): end 0$`)
)

// rxeCMListening is the VM's shell loop that reports once its server's cm_id listens.
const rxeCMListening = `while ! rdma resource show cm_id 2>/dev/null | grep -q LISTEN; do sleep 0.05; done; echo RXE-LISTENING`

// TestResultPatterns: a finished perftest run is recognised with or without the clock
// warning the real tool prints under emulation; a header alone is not a result.
func TestResultPatterns(t *testing.T) {
	const header = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n"
	const row = " 64      1000          105.35         4799.83      218.40\n"
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{header + row, true},
		{header + "Correlation coefficient r^2: 0.515571 < 0.9\n" + row, true},
		{header + "-----------\n", false},
		{header + "Correlation coefficient r^2: 0.515571 < 0.9\n", false},
	} {
		if got := perftestResult.MatchString(tc.out); got != tc.want {
			t.Errorf("%q: matched %v, want %v", tc.out, got, tc.want)
		}
	}
}

// TestVMClockRefused: a VM-side perftest run that ended on its clock check's refusal
// is recognised (and its case run again); the warning followed by a result row, or
// any other failure, is not.
func TestVMClockRefused(t *testing.T) {
	const header = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{header + "Correlation coefficient r^2: 0.73 < 0.9\n Can't produce a report\nRXE-EXIT rc=1\n", true},
		{header + "Correlation coefficient r^2: 0.73 < 0.9\n\n Can't produce a report\n", true},
		{header + "Correlation coefficient r^2: 0.73 < 0.9\n 8          1000           5.62               5.50                0.720950\n", false},
		{header + " Completion with error at client\nRXE-EXIT rc=1\n", false},
		{" Can't produce a report\n", false}, // not the clock check's
	} {
		if got := vmClockRefused.MatchString(tc.out); got != tc.want {
			t.Errorf("%q: matched %v, want %v", tc.out, got, tc.want)
		}
	}
}

// TestDataFrame: the opcodes counted as message data are SEND and RDMA WRITE packets
// of RC and UC, RC READ responses and SEND with invalidate; never requests for READs
// or atomics, ACKs, UD or CNPs.
func TestDataFrame(t *testing.T) {
	data := map[uint8]bool{0x16: true, 0x17: true}
	for op := range uint8(0x0C) {
		data[op], data[op+0x20] = true, true
	}
	for op := uint8(0x0D); op <= 0x10; op++ {
		data[op] = true
	}
	for op := range 256 {
		if got := dataFrame(uint8(op)); got != data[uint8(op)] {
			t.Errorf("opcode %#02x: data %v, want %v", op, got, data[uint8(op)])
		}
	}
}
