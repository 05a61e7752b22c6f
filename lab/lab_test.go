package lab

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab/labtest"
	"github.com/rocelab/rocelab/netns"
)

func needRoot(t *testing.T) {
	t.Helper()
	if unix.Geteuid() != 0 {
		t.Skip("lab: needs root (CAP_SYS_ADMIN) for namespaces and TAPs")
	}
}

var labSeq atomic.Int32

// startLab brings t up as a lab in a fresh store and registers its teardown, which
// fails the test if any namespace of the lab survives.
func startLab(t *testing.T, tp *topo.Topology) (*Lab, netns.Store) {
	t.Helper()
	store := netns.Store{Root: t.TempDir()}
	name := fmt.Sprintf("t%dx%d", os.Getpid(), labSeq.Add(1))
	var steps []string
	start := time.Now()
	l, err := Up(Config{Name: name, Topology: tp, Store: store, Log: zaptest.NewLogger(t),
		Progress: func(s string) { steps = append(steps, s) }})
	if err != nil {
		(&netns.Cleaner{Store: store}).Down(name)
		t.Fatal(err)
	}
	t.Logf("lab %s up in %v: %s", name, time.Since(start).Round(time.Millisecond), strings.Join(steps, "; "))
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		c := &netns.Cleaner{Store: store, Log: zaptest.NewLogger(t), Grace: 200 * time.Millisecond}
		if _, err := c.Down(name); err != nil {
			t.Errorf("down: %v", err)
		}
		all, _ := netns.ListNamespaces()
		for _, ns := range all {
			if strings.HasPrefix(ns, netns.Prefix+name+"-") {
				t.Errorf("namespace %s survived down", ns)
			}
		}
	})
	return l, store
}

// hosts lists l's emulated hosts for labtest.
func hosts(l *Lab) []labtest.Host {
	var out []labtest.Host
	for _, h := range l.Network.Hosts {
		out = append(out, labtest.Host{Name: h.Name, Namespace: netns.NamespaceName(l.Name(), h.Name),
			IPv4: h.Config.IPv4, IPv6: h.Config.IPv6})
	}
	return out
}

// TestLabTwoHosts brings up the two-host example, pings and talks TCP both ways over
// IPv4 and IPv6 through the Go switch, reads status and counters, and captures the switch port
// towards h2 while h1 pings it.
func TestLabTwoHosts(t *testing.T) {
	needRoot(t)
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, store := startLab(t, tp)
	labtest.PingAllPairs(t, hosts(l))
	labtest.TCPAllPairs(t, hosts(l))

	reply, err := Query(store, l.Name(), Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	st := reply.Status
	if len(st.Hosts) != 2 || st.Hosts[0].IPv4 != "10.0.0.1" || st.Hosts[1].IPv6 != "fd00::2" ||
		st.Hosts[0].Netns != netns.NamespaceName(l.Name(), "h1") || st.Hosts[1].MAC != "02:00:00:00:00:02" {
		t.Fatalf("status hosts %+v", st.Hosts)
	}
	if r := st.Hosts[0].RNIC; r == nil || r.HostFrames == 0 || r.TxFrames == 0 {
		t.Errorf("h1's RNIC relayed nothing: %+v", r)
	}
	if len(st.Switches) != 1 || len(st.Switches[0].Ports) != 2 || st.Switches[0].Ports[1].Peer != "h2" ||
		st.Switches[0].Ports[1].Stats.TxFrames == 0 {
		t.Errorf("status switches %+v", st.Switches)
	}

	// The sampler's counters agree with the status read before them: counters only grow.
	reply, err = Query(store, l.Name(), Request{Op: "counters"})
	if err != nil {
		t.Fatal(err)
	}
	cs := reply.Counters
	if cs == nil || len(cs.Hosts) != 2 || len(cs.Received) != 2 || len(cs.Switches["s1"]) != 2 ||
		cs.Hosts["h1"] < st.Hosts[0].RNIC.TxDataBytes || cs.Received["h2"] < st.Hosts[1].RNIC.RxDataBytes ||
		cs.Switches["s1"][1].TxBytes < st.Switches[0].Ports[1].Stats.TxBytes ||
		cs.TimeNs <= 0 || time.Duration(cs.TimeNs) > time.Minute {
		t.Errorf("counters %+v after status %+v", cs, st)
	}

	// The recorder samples the same counters on the loops, every 1 ms of the lab's
	// clock: complete rows (every host and switch), in time order.
	if _, err := Query(store, l.Name(), Request{Op: "record", EveryNs: 1}); err == nil || !strings.Contains(err.Error(), "want 0 (stop) or") {
		t.Errorf("record every 1 ns: %v", err)
	}
	if _, err := Query(store, l.Name(), Request{Op: "recorded"}); err == nil || !strings.Contains(err.Error(), "nothing is recording") {
		t.Errorf("recorded before record: %v", err)
	}
	if _, err := Query(store, l.Name(), Request{Op: "record", EveryNs: int64(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var rows []Counters
	for deadline := time.Now().Add(10 * time.Second); len(rows) < 5 && time.Now().Before(deadline); {
		reply, err := Query(store, l.Name(), Request{Op: "recorded"})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, reply.Recorded...)
	}
	reply, err = Query(store, l.Name(), Request{Op: "record"}) // stop: the rest
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, reply.Recorded...)
	if len(rows) < 5 {
		t.Fatalf("recorded %d rows in 10 s at 1 ms", len(rows))
	}
	for i, r := range rows {
		if len(r.Hosts) != 2 || len(r.Received) != 2 || len(r.Switches["s1"]) != 2 || (i > 0 && r.TimeNs <= rows[i-1].TimeNs) ||
			r.Hosts["h1"] < cs.Hosts["h1"] || r.Received["h2"] < cs.Received["h2"] {
			t.Fatalf("recorded row %d of %d: %+v (the row before: %+v)", i, len(rows), r, rows[max(i-1, 0)])
		}
	}
	if _, err := Query(store, l.Name(), Request{Op: "recorded"}); err == nil {
		t.Errorf("recorded after the recorder stopped: no error")
	}

	// A hold of an idle host keeps nothing back; a host the lab lacks, or a hold
	// longer than MaxHold, is refused by name.
	reply, err = Query(store, l.Name(), Request{Op: "hold", Hosts: []string{"h1"}, HoldNs: int64(time.Second)})
	if err != nil || reply.Held == nil || reply.Held["h1"] {
		t.Errorf("hold of idle h1: %+v, %v", reply, err)
	}
	if _, err := Query(store, l.Name(), Request{Op: "hold", Hosts: []string{"h1"}}); err != nil {
		t.Errorf("release: %v", err)
	}
	if _, err := Query(store, l.Name(), Request{Op: "hold", Hosts: []string{"h9"}, HoldNs: 1}); err == nil || !strings.Contains(err.Error(), `"h9"`) {
		t.Errorf("hold of a missing host: %v", err)
	}
	if _, err := Query(store, l.Name(), Request{Op: "hold", Hosts: []string{"h1"}, HoldNs: int64(2 * MaxHold)}); err == nil || !strings.Contains(err.Error(), "want 0") {
		t.Errorf("hold beyond MaxHold: %v", err)
	}

	if _, err := StartCapture(store, l.Name(), Request{Port: "s1:p7"}); err == nil || !strings.Contains(err.Error(), "p0–p1") {
		t.Errorf("capture of a missing port: %v", err)
	}
	conn, err := StartCapture(store, l.Name(), Request{Port: "s1:p1"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	type result struct {
		figures *CaptureStatus
		err     error
	}
	done := make(chan result, 1)
	go func() { f, _, err := conn.Copy(&buf); done <- result{f, err} }()
	// The capture starts once the reply is out; pings until one is seen in it is the
	// only way to know, so send a few.
	for range 3 {
		if err := labtest.Ping(netns.NamespaceName(l.Name(), "h1"), netip.MustParseAddr("10.0.0.2")); err != nil {
			t.Fatal(err)
		}
	}
	// Ending our side ends the capture: the lab sends the rest and its figures.
	conn.Stop()
	res := <-done
	conn.Close()
	if res.err != nil {
		t.Fatal(res.err)
	}
	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("capture stream: %v (%d bytes)", err, buf.Len())
	}
	if res.figures.Frames == 0 || res.figures.Dropped != 0 || res.figures.Running {
		t.Errorf("capture figures %+v, want frames, none dropped, ended", res.figures)
	}
	icmpFrames := 0
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if len(data) > 34 && data[12] == 0x08 && data[13] == 0 && data[23] == 1 {
			icmpFrames++
		}
	}
	if icmpFrames == 0 {
		t.Errorf("the capture of s1:p1 holds no ICMP frame (%d bytes)", buf.Len())
	}
}

// TestLabSixteenHosts: a 16-host star; every pair pings and talks TCP, IPv4 and IPv6.
func TestLabSixteenHosts(t *testing.T) {
	needRoot(t)
	tp, err := topo.Star(15, topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := startLab(t, tp)
	if len(l.Network.Hosts) != 16 {
		t.Fatalf("%d hosts", len(l.Network.Hosts))
	}
	labtest.PingAllPairs(t, hosts(l))
	labtest.TCPAllPairs(t, hosts(l))
}

// TestLabExternalHosts: an emulated host, an external kernel host and an external
// bridge host with a veth standing in for a VM. Everyone pings everyone (IPv4 and
// IPv6) through the Go switch, and the capture of the bridge host's port sees it.
func TestLabExternalHosts(t *testing.T) {
	needRoot(t)
	tp, err := topo.Parse([]byte(`telemetry: int
congestion_control: hpcc
hosts:
  - {name: h1, ipv4: 10.0.0.1, ipv6: "fd00::1"}
  - {name: k1, ipv4: 10.0.0.50, ipv6: "fd00::50", mac: "02:00:00:00:00:50", external: kernel}
  - {name: vm, ipv4: 10.0.0.100, ipv6: "fd00::100", mac: "52:54:0a:00:00:64", external: bridge}
switches:
  - name: s1
links:
  - {endpoints: [h1, s1], rate: 10G, delay: 1us}
  - {endpoints: [k1, s1], rate: 10G, delay: 1us}
  - {endpoints: [vm, s1], rate: 10G, delay: 1us}
`))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := startLab(t, tp)
	if len(l.Network.Hosts) != 1 || len(l.Network.Externals) != 2 {
		t.Fatalf("%d emulated, %d external hosts", len(l.Network.Hosts), len(l.Network.Externals))
	}
	// The "VM": a namespace with a veth whose other end joins the external host's bridge.
	vmns := fmt.Sprintf("rlt-vm%d", os.Getpid())
	if err := netns.CreateNamespace(vmns); err != nil {
		t.Fatal(err)
	}
	defer netns.DeleteNamespace(vmns)
	bridgeNS := netns.NamespaceName(l.Name(), "vm")
	for _, args := range [][]string{
		{"-n", bridgeNS, "link", "add", "vmport", "type", "veth", "peer", "name", "eth0", "netns", vmns},
		{"-n", bridgeNS, "link", "set", "vmport", "master", "br0", "up"},
		{"-n", vmns, "link", "set", "eth0", "address", "52:54:0a:00:00:64", "up"},
		{"-n", vmns, "link", "set", "lo", "up"},
		{"-n", vmns, "addr", "add", "10.0.0.100/24", "dev", "eth0"},
		{"-n", vmns, "addr", "add", "fd00::100/64", "dev", "eth0", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	for _, src := range []struct{ ns, name string }{
		{netns.NamespaceName(l.Name(), "h1"), "h1"},
		{netns.NamespaceName(l.Name(), "k1"), "k1"},
		{vmns, "vm"},
	} {
		for _, dst := range tp.Hosts {
			if dst.Name == src.name {
				continue
			}
			for _, a := range []netip.Addr{dst.IPv4, dst.IPv6} {
				if err := labtest.Ping(src.ns, a); err != nil {
					t.Errorf("ping %s→%s (%v): %v", src.name, dst.Name, a, err)
				}
			}
		}
	}
}
