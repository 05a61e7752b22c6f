package conformance

// The Linux kernel as an IOAM transit node (the topology of
// shared/tools/ioam-kernel-transit.sh): namespace ioA sends a RoCEv2 packet with an
// empty pre-allocated trace that rocelab requested; the router namespace fills its
// node data; namespace ioB receives it. rocelab must decode the kernel's data, strip
// the trace and find the RoCEv2 packet and its ICRC intact; tshark must agree on every
// field. Needs root and a kernel with IOAM (net.ipv6.ioam6_id); skipped otherwise.
//
// The sender and receiver run as this test binary re-executed inside the namespaces
// (TestMain dispatches on ROCELAB_IOAM_HELPER), with AF_PACKET sockets, so nothing
// sleeps: the receiver reports readiness before the sender starts.

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/rocelab/rocelab/roce/decode"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

func TestMain(m *testing.M) {
	switch os.Getenv("ROCELAB_IOAM_HELPER") {
	case "send":
		os.Exit(helperSend(os.Getenv("ROCELAB_IOAM_IF"), os.Getenv("ROCELAB_IOAM_FRAME")))
	case "recv":
		os.Exit(helperRecv(os.Getenv("ROCELAB_IOAM_IF")))
	}
	os.Exit(m.Run())
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func packetSocket(ifname string) (int, *syscall.SockaddrLinklayer, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, nil, err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		return -1, nil, err
	}
	sa := &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifi.Index}
	return fd, sa, syscall.Bind(fd, sa)
}

func helperSend(ifname, frameHex string) int {
	frame, err := hex.DecodeString(frameHex)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fd, sa, err := packetSocket(ifname)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := syscall.Sendto(fd, frame, 0, sa); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperRecv prints "ready", then the hex of the first IPv6 frame with a Hop-by-Hop
// header it receives.
func helperRecv(ifname string) int {
	fd, _, err := packetSocket(ifname)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	buf := make([]byte, 9000)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// IPv6 with a Hop-by-Hop header whose next header is UDP: MLD reports, sent as
		// the veths come up, also carry Hop-by-Hop (Router Alert) but then ICMPv6.
		if n > 54 && buf[12] == 0x86 && buf[13] == 0xDD && buf[20] == 0 && buf[54] == 17 {
			fmt.Println(hex.EncodeToString(buf[:n]))
			return 0
		}
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mac(t *testing.T, ns, dev string) [6]byte {
	f := strings.Fields(run(t, "ip", "-n", ns, "-br", "link", "show", dev))
	hw, err := net.ParseMAC(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return [6]byte(hw)
}

func TestKernelIOAMTransit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := os.Stat("/proc/sys/net/ipv6/ioam6_id"); err != nil {
		t.Skip("kernel without IOAM (no net.ipv6.ioam6_id)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed")
	}
	names := []string{"rlioA", "rlioR", "rlioB"}
	cleanup := func() {
		for _, n := range names {
			exec.Command("ip", "netns", "del", n).Run()
		}
	}
	cleanup()
	t.Cleanup(cleanup)
	for _, n := range names {
		run(t, "ip", "netns", "add", n)
	}
	run(t, "ip", "link", "add", "a0", "netns", "rlioA", "type", "veth", "peer", "name", "r0", "netns", "rlioR")
	run(t, "ip", "link", "add", "r1", "netns", "rlioR", "type", "veth", "peer", "name", "b0", "netns", "rlioB")
	run(t, "ip", "-n", "rlioA", "addr", "add", "fd00:1::1/64", "dev", "a0", "nodad")
	run(t, "ip", "-n", "rlioR", "addr", "add", "fd00:1::2/64", "dev", "r0", "nodad")
	run(t, "ip", "-n", "rlioR", "addr", "add", "fd00:2::1/64", "dev", "r1", "nodad")
	run(t, "ip", "-n", "rlioB", "addr", "add", "fd00:2::2/64", "dev", "b0", "nodad")
	for _, x := range [][2]string{{"rlioA", "a0"}, {"rlioR", "r0"}, {"rlioR", "r1"}, {"rlioB", "b0"}} {
		run(t, "ip", "-n", x[0], "link", "set", x[1], "up")
	}
	bmac := mac(t, "rlioB", "b0")
	// Static neighbour: the router forwards without waiting for neighbour discovery.
	run(t, "ip", "-n", "rlioR", "neigh", "add", "fd00:2::2", "lladdr", net.HardwareAddr(bmac[:]).String(), "dev", "r1", "nud", "permanent")
	for _, kv := range []string{"net.ipv6.conf.all.forwarding=1", "net.ipv6.ioam6_id=0x42",
		"net.ipv6.conf.r0.ioam6_enabled=1", "net.ipv6.conf.r0.ioam6_id=5", "net.ipv6.conf.r1.ioam6_id=6"} {
		run(t, "ip", "netns", "exec", "rlioR", "sysctl", "-qw", kv)
	}
	run(t, "ip", "-n", "rlioR", "ioam", "namespace", "add", "123", "data", "0xdeadbeef")

	// The kernel writes the hop limit the packet leaves with (64 − 1).
	// rocelab requests the trace: namespace 123, Trace-Type bits 0,1,2,3,5 (hop limit
	// + node ID, interface IDs, timestamp seconds and fraction, namespace data), room
	// for 2 nodes — the script's packet, carrying RoCEv2.
	c := &ioam.Codec{Namespace: 123, TraceType: 0xF40000, Nodes: 2, FractionMicros: true}
	b := telemetrytest.Builder(true)
	b.Src, b.Dst = netip.MustParseAddr("fd00:1::1"), netip.MustParseAddr("fd00:2::2")
	b.SrcMAC, b.DstMAC = mac(t, "rlioA", "a0"), mac(t, "rlioR", "r0")
	sent := telemetrytest.Frame(b)
	req, err := c.Request(append(make([]byte, 0, 512), sent...))
	if err != nil {
		t.Fatal(err)
	}

	self, _ := os.Executable()
	recv := exec.Command("ip", "netns", "exec", "rlioB", self, "-test.run=^$")
	recv.Env = append(os.Environ(), "ROCELAB_IOAM_HELPER=recv", "ROCELAB_IOAM_IF=b0")
	stdout, _ := recv.StdoutPipe()
	recv.Stderr = os.Stderr
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Process.Kill(); recv.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("receiver did not start: %q", lines.Text())
	}
	send := exec.Command("ip", "netns", "exec", "rlioA", self, "-test.run=^$")
	send.Env = append(os.Environ(), "ROCELAB_IOAM_HELPER=send", "ROCELAB_IOAM_IF=a0", "ROCELAB_IOAM_FRAME="+hex.EncodeToString(req))
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send: %v %s", err, out)
	}
	if !lines.Scan() {
		t.Fatal("receiver got nothing")
	}
	got, err := hex.DecodeString(lines.Text())
	if err != nil {
		t.Fatal(err)
	}

	var st telemetry.Stack
	h, err := c.Decode(got, &st)
	if err != nil {
		t.Fatalf("decode the kernel's trace: %v\n%x", err, got)
	}
	if st.N != 1 || h.RemainingLen != 5 || h.Overflow || h.Namespace != 123 {
		t.Fatalf("kernel trace: %+v, %d nodes", h, st.N)
	}
	n := st.Hops[0]
	if n.SwitchID != 0x42 || n.IngressPort != 5 || n.PortID != 6 || n.Rate != 0xdeadbeef*1e6 || n.TTL != 63 || n.TS == 0 {
		t.Errorf("kernel node data: switch %#x in %d out %d nsdata %d hop limit %d ts %d",
			n.SwitchID, n.IngressPort, n.PortID, n.Rate/1e6, n.TTL, n.TS)
	}
	stripped, err := c.Strip(append(make([]byte, 0, len(got)+64), got...))
	if err != nil {
		t.Fatal(err)
	}
	if err := telemetrytest.Valid(stripped); err != nil {
		t.Errorf("RoCEv2 packet after the kernel's transit and strip: %v", err)
	}

	// tshark reads the same values from the kernel's bytes.
	if tshark, err := exec.LookPath("tshark"); err == nil {
		rows := tsharkFields(t, tshark, writePcap(t, [][]byte{got}), nil, "ipv6.opt.ioam.trace.node.id",
			"ipv6.opt.ioam.trace.node.iif", "ipv6.opt.ioam.trace.node.eif", "ipv6.opt.ioam.trace.node.nsdata",
			"ipv6.opt.ioam.trace.node.tss", "ipv6.opt.ioam.trace.node.tsf", "ipv6.opt.ioam.trace.remlen")
		want := []uint64{uint64(n.SwitchID), uint64(n.IngressPort), uint64(n.PortID), n.Rate / 1e6, n.TS / 1e9, n.TS % 1e9 / 1e3, uint64(h.RemainingLen)}
		for i, w := range want {
			if len(rows[0][i]) != 1 || num(t, rows[0][i][0]) != w {
				t.Errorf("field %d: tshark %v, rocelab %d", i, rows[0][i], w)
			}
		}
	}
	var d decode.Decoder
	if r := d.Decode(1, got); r.Telemetry == nil || r.ICRCOK == nil || !*r.ICRCOK {
		t.Errorf("rocelab decode of the kernel's packet: %+v", r)
	}
}
