package lab

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"go.uber.org/zap/zaptest"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab/tuntest"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
)

// The tests here run the lab runtime on in-memory host devices (lab/tuntest): the
// relays, the soft-RNICs' host path, external hosts' wires, the switch and the control
// socket, without namespaces or TAPs, so without root. The test plays each host's
// kernel. lab_test.go runs the same paths through real namespaces and TAPs as root.

// startDoubleLab brings tp up with an in-memory device per host. Each host is recorded
// in the store as netns.AddHost would record it, so status lists it.
func startDoubleLab(t *testing.T, tp *topo.Topology) (*Lab, netns.Store, map[string]*tuntest.ChannelTAP) {
	t.Helper()
	store := netns.Store{Root: t.TempDir()}
	name := fmt.Sprintf("d%dx%d", os.Getpid(), labSeq.Add(1))
	devs := map[string]*tuntest.ChannelTAP{}
	addHost := func(store netns.Store, lab string, h netns.HostConfig) (Device, error) {
		dev := tuntest.New()
		devs[h.Name] = dev
		return dev, store.Update(lab, func(r *netns.Lab) error {
			r.Hosts = append(r.Hosts, netns.Host{Name: h.Name, MAC: h.MAC.String(), IPv4: h.IPv4, IPv6: h.IPv6})
			return nil
		})
	}
	l, err := Up(Config{Name: name, Topology: tp, Store: store, Log: zaptest.NewLogger(t), AddHost: addHost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l, store, devs
}

// udpFrame is a UDP datagram from src to dst over IPv4, or IPv6 when v6, whose payload
// names both ends: a frame no soft-RNIC terminates, so it crosses the fabric from one
// host's kernel to the other's.
func udpFrame(t *testing.T, src, dst topo.Host, v6 bool) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: src.MAC, DstMAC: dst.MAC, EthernetType: layers.EthernetTypeIPv4}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 9}
	payload := gopacket.Payload(fmt.Sprintf("%s to %s, ipv6 %v: padded past the minimum frame", src.Name, dst.Name, v6))
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	var err error
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.IPv6.AsSlice(), DstIP: dst.IPv6.AsSlice()}
		udp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, eth, ip, udp, payload)
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.IPv4.AsSlice(), DstIP: dst.IPv4.AsSlice()}
		udp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, eth, ip, udp, payload)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// deliverAll has every host send a frame (IPv4, and IPv6 where both ends have it) to
// every other, then checks that each host's kernel receives exactly the frames sent to
// it, byte for byte.
func deliverAll(t *testing.T, tp *topo.Topology, devs map[string]*tuntest.ChannelTAP) {
	t.Helper()
	want := map[string]map[string]bool{} // receiver -> frames
	for _, h := range tp.Hosts {
		want[h.Name] = map[string]bool{}
	}
	for _, src := range tp.Hosts {
		for _, dst := range tp.Hosts {
			if src.Name == dst.Name {
				continue
			}
			for _, v6 := range []bool{false, true} {
				if v6 && (!src.IPv6.IsValid() || !dst.IPv6.IsValid()) || !v6 && (!src.IPv4.IsValid() || !dst.IPv4.IsValid()) {
					continue
				}
				f := udpFrame(t, src, dst, v6)
				want[dst.Name][string(f)] = true
				devs[src.Name].Inbound <- f
			}
		}
	}
	for _, h := range tp.Hosts {
		for range len(want[h.Name]) {
			f := receive(t, devs[h.Name], h.Name)
			if !want[h.Name][string(f)] {
				t.Fatalf("%s received a frame not sent to it, or twice: % x", h.Name, f)
			}
			delete(want[h.Name], string(f))
		}
	}
}

// receive takes the next frame written to dev's kernel. The deadline only turns a lost
// frame into a failure instead of a hung test.
func receive(t *testing.T, dev *tuntest.ChannelTAP, host string) []byte {
	t.Helper()
	select {
	case f := <-dev.Outbound:
		return f
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no frame within 10 s", host)
		return nil
	}
}

// TestRelayTwoHosts sends frames both ways over IPv4 and IPv6 through the two-host
// example, reads status and captures the switch port towards h2 while h1 sends to it.
func TestRelayTwoHosts(t *testing.T) {
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, store, devs := startDoubleLab(t, tp)
	deliverAll(t, tp, devs)

	reply, err := Query(store, l.Name(), Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	st := reply.Status
	if len(st.Hosts) != 2 || st.Hosts[0].IPv4 != "10.0.0.1" || st.Hosts[1].IPv6 != "fd00::2" || st.Hosts[1].MAC != "02:00:00:00:00:02" {
		t.Fatalf("status hosts %+v", st.Hosts)
	}
	if r := st.Hosts[0].RNIC; r == nil || r.HostFrames != 2 || r.TxFrames < 2 {
		t.Errorf("h1's RNIC relayed %+v, want the 2 frames its kernel sent", r)
	}
	if len(st.Switches) != 1 || len(st.Switches[0].Ports) != 2 || st.Switches[0].Ports[1].Peer != "h2" ||
		st.Switches[0].Ports[1].Stats.TxFrames < 2 {
		t.Errorf("status switches %+v", st.Switches)
	}

	if _, err := StartCapture(store, l.Name(), Request{Port: "s1:p7"}); err == nil || !strings.Contains(err.Error(), "p0–p1") {
		t.Errorf("capture of a missing port: %v", err)
	}
	conn, err := StartCapture(store, l.Name(), Request{Port: "s1:p1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The capture starts after the reply: h1 sends until a frame shows in it.
	captured := make(chan []byte, 1)
	stream, pw := io.Pipe() // the pcapng inside the capture's chunks
	go func() {
		_, _, err := conn.Copy(pw)
		pw.CloseWithError(err)
	}()
	go func() {
		r, err := pcapgo.NewNgReader(stream, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			captured <- nil
			return
		}
		data, _, _ := r.ReadPacketData()
		captured <- data
	}()
	frame := udpFrame(t, tp.Hosts[0], tp.Hosts[1], false)
	for sent := 0; ; sent++ {
		select {
		case data := <-captured:
			if !bytes.Equal(data, frame) {
				t.Fatalf("the capture of s1:p1 holds % x, want h1's frame % x", data, frame)
			}
			return
		default:
		}
		if sent == 100_000 {
			t.Fatal("100000 frames crossed s1:p1 and its capture holds none")
		}
		devs["h1"].Inbound <- frame
		if got := receive(t, devs["h2"], "h2"); !bytes.Equal(got, frame) {
			t.Fatalf("h2 received % x, want % x", got, frame)
		}
	}
}

// TestRelaySixteenHosts: a 16-host star; every host sends to every other, IPv4 and IPv6.
func TestRelaySixteenHosts(t *testing.T) {
	tp, err := topo.Star(15, topo.Params{Rate: 100e9, Delay: time.Microsecond, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	l, _, devs := startDoubleLab(t, tp)
	if len(l.Network.Hosts) != 16 {
		t.Fatalf("%d hosts", len(l.Network.Hosts))
	}
	deliverAll(t, tp, devs)
}

// TestRelayExternalHosts: an emulated host, an external kernel host and an external
// bridge host exchange frames through their wires and the switch.
func TestRelayExternalHosts(t *testing.T) {
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
	l, _, devs := startDoubleLab(t, tp)
	if len(l.Network.Hosts) != 1 || len(l.Network.Externals) != 2 {
		t.Fatalf("%d emulated, %d external hosts", len(l.Network.Hosts), len(l.Network.Externals))
	}
	deliverAll(t, tp, devs)
}

// TestUpRefusesServicesWithoutNamespaces: the verbs services run inside the hosts'
// namespaces, which in-memory devices do not have.
func TestUpRefusesServicesWithoutNamespaces(t *testing.T) {
	tp, err := topo.Load("../topologies/two-hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Up(Config{Name: "d1", Topology: tp, Store: netns.Store{Root: t.TempDir()},
		AddHost:  func(netns.Store, string, netns.HostConfig) (Device, error) { return tuntest.New(), nil },
		Services: func(*network.Host, *Lab) (Closer, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "Services") {
		t.Fatalf("Up with Services and in-memory devices: %v, want an error naming Services", err)
	}
}
