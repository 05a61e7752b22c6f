package topo

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the generated files in topologies/")

const dir = "../../topologies"

// examples are the generated files in topologies/ (incast.yaml is written by hand).
func examples(t *testing.T) map[string]*Topology {
	must := func(tp *Topology, err error) *Topology {
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	p := Params{Rate: 100e9, Delay: time.Microsecond}
	two := must(Star(1, p))
	return map[string]*Topology{
		"two-hosts.yaml":  two,
		"dumbbell.yaml":   must(Dumbbell(4, Params{Rate: 100e9, FabricRate: 100e9, Delay: time.Microsecond})),
		"leaf-spine.yaml": must(LeafSpine(4, 4, 4, p)),
		"fat-tree-k4.yaml": must(FatTree(4, Params{Rate: 100e9, Delay: time.Microsecond,
			Telemetry: "int", CongestionControl: "hpcc"})),
	}
}

func TestGeneratedExamplesUpToDate(t *testing.T) {
	for name, tp := range examples(t) {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, tp.YAML(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		clearLines(got)
		if !reflect.DeepEqual(got, tp) {
			t.Errorf("%s differs from its generator; run go test ./fabric/topo -update", name)
		}
	}
}

func clearLines(t *Topology) {
	for i := range t.Machines {
		t.Machines[i].Line = 0
	}
	for i := range t.Hosts {
		t.Hosts[i].Line = 0
	}
	for i := range t.Switches {
		t.Switches[i].Line = 0
	}
	for i := range t.Links {
		t.Links[i].Line = 0
	}
}

// TestLoadAllExamples loads every file in topologies/.
func TestLoadAllExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) < 5 {
		t.Fatalf("only %d example topologies", len(files))
	}
	for _, f := range files {
		tp, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		t.Logf("%s: %d hosts, %d switches, %d links", filepath.Base(f), len(tp.Hosts), len(tp.Switches), len(tp.Links))
	}
	incast, err := Load(filepath.Join(dir, "incast.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(incast.Hosts) != 17 || incast.Switches[0].PFC == nil || incast.Switches[0].ECN == nil {
		t.Fatalf("incast.yaml: %d hosts, pfc %v, ecn %v", len(incast.Hosts), incast.Switches[0].PFC, incast.Switches[0].ECN)
	}
}

func TestRoundTripWithFaults(t *testing.T) {
	tp, err := Dumbbell(1, Params{})
	if err != nil {
		t.Fatal(err)
	}
	tp.Retry = "rxe"
	tp.HPCCMode = "rx"
	tp.Links[0].Faults.Loss = 0.01
	tp.Links[0].Faults.Jitter = 300 * time.Nanosecond
	tp.Links[0].Faults.Flap.Period = time.Millisecond
	tp.Links[0].Faults.Flap.Down = 10 * time.Microsecond
	got, err := Parse(tp.YAML())
	if err != nil {
		t.Fatalf("%v\n%s", err, tp.YAML())
	}
	clearLines(got)
	if !reflect.DeepEqual(got, tp) {
		t.Fatalf("round trip:\n%+v\n%+v", got.Links[0], tp.Links[0])
	}
}

// TestRoundTripAwkwardNames: names YAML would read as something else — with ": " or
// "#", or spelled like a number, a boolean or null — come back as written.
func TestRoundTripAwkwardNames(t *testing.T) {
	tp, err := Dumbbell(2, Params{})
	if err != nil {
		t.Fatal(err)
	}
	rename := map[string]string{"s1": "core: left # rack 1", "s2": "#2", "h1": "h1: db", "h2": "true", "h3": "1e3", "h4": "null"}
	for i := range tp.Switches {
		tp.Switches[i].Name = rename[tp.Switches[i].Name]
	}
	for i := range tp.Hosts {
		tp.Hosts[i].Name = rename[tp.Hosts[i].Name]
	}
	for i := range tp.Links {
		for j, e := range tp.Links[i].Endpoints {
			tp.Links[i].Endpoints[j] = rename[e]
		}
	}
	got, err := Parse(tp.YAML())
	if err != nil {
		t.Fatalf("%v\n%s", err, tp.YAML())
	}
	clearLines(got)
	if !reflect.DeepEqual(got, tp) {
		t.Fatalf("round trip changed the topology:\n%s", tp.YAML())
	}
}

func TestErrorsNameTheLine(t *testing.T) {
	const head = "hosts:\n  - {name: h1, ipv4: 10.0.0.1}\n  - {name: h2, ipv4: 10.0.0.2}\nswitches:\n  - name: s1\n"
	cases := []struct{ yaml, want string }{
		{head + "links:\n  - {endpoints: [h1, s1], rate: 100G}\n  - {endpoints: [h2, s9], rate: 100G}\n",
			`line 8: link h2–s9: unknown node "s9"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: fast}\n",
			`line 7: link.rate: rate "fast"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, delay: -1us}\n",
			`line 7: link.delay: duration "-1us"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, faults: {loss: 2}}\n",
			`line 7: faults.loss: probability "2"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, faults: {loss: NaN}}\n",
			`line 7: faults.loss: probability "NaN"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, faults: {corrupt: Inf}}\n",
			`line 7: faults.corrupt: probability "Inf"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: NaN}\n",
			`line 7: link.rate: rate "NaN"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: InfG}\n",
			`line 7: link.rate: rate "InfG"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, colour: red}\n",
			`line 7: link: unknown field "colour"`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G}\n  - {endpoints: [h2, s1]}\n",
			`line 8: link h2–s1 has no rate`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G}\n",
			`line 3: host "h2" is not connected`},
		{"telemetry: sflow\n", `line 1: unknown telemetry format "sflow"`},
		{"retry: forever\n", `line 1: unknown retry reading "forever"`},
		{"hpcc_mode: fast\n", `line 1: unknown HPCC mode "fast"`},
		{"hosts:\n  - {name: h1, ipv4: 10.0.0.300}\n", `line 2: host.ipv4: "10.0.0.300" is not an IPv4 address`},
		{"hosts:\n  - {name: h1}\n  - {name: h1, ipv4: 10.0.0.1}\n", `line 2: host "h1" has no address`},
		{head + "  - name: h1\n", `line 6: switch "h1": name already used on line 2`},
		{head + "links:\n  - {endpoints: [h1, s1], rate: 1G, mtu: 20000}\n", `line 7: link h1–s1: mtu 20000`},
		{"hosts: [\n", `line 1`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q\n%s", err, c.want, c.yaml)
		}
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]uint64{"100G": 100e9, "25Gbps": 25e9, "100Gb/s": 100e9, "400M": 400e6, "1T": 1e12, "1.5G": 1.5e9} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v", in, got, err)
		}
	}
	for in, want := range map[string]int{"1500": 1500, "64KB": 64000, "4MiB": 4 << 20, "9000B": 9000} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v", in, got, err)
		}
	}
}

// TestForwardingFatTree checks the k=4 fat-tree's ECMP sets and spanning tree.
func TestForwardingFatTree(t *testing.T) {
	tp, err := FatTree(4, Params{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Hosts) != 16 || len(tp.Switches) != 20 || len(tp.Links) != 48 {
		t.Fatalf("%d hosts %d switches %d links", len(tp.Hosts), len(tp.Switches), len(tp.Links))
	}
	fwd := tp.Forwarding()
	far := tp.Hosts[15].MAC.String() // in pod 4
	local := tp.Hosts[0].MAC.String()
	for sw, want := range map[string]int{"edge1-1": 2, "agg1-1": 2, "core1": 1, "edge4-2": 1} {
		if got := len(fwd[sw].Routes[far]); got != want {
			t.Errorf("%s: %d next hops to h16, want %d", sw, got, want)
		}
	}
	if got := fwd["edge1-1"].Routes[local]; len(got) != 1 || got[0] != 2 {
		t.Errorf("edge1-1 reaches h1 through %v, want port 2", got) // ports 0,1 go up
	}
	treeEdges := 0
	for _, tb := range fwd {
		treeEdges += len(tb.Flood)
	}
	// Every tree edge between switches counts twice; each host's edge once.
	if nodes := len(tp.Hosts) + len(tp.Switches); treeEdges != 2*(nodes-1)-len(tp.Hosts) {
		t.Errorf("spanning tree has %d switch port ends for %d nodes", treeEdges, nodes)
	}
}

// FuzzParse: the loader never panics, and whatever it accepts validates and survives a
// round trip through YAML.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Parse(tp.YAML())
		if err != nil {
			t.Fatalf("accepted topology does not round-trip: %v\n%s", err, tp.YAML())
		}
		clearLines(tp)
		clearLines(again)
		if !reflect.DeepEqual(tp, again) {
			t.Fatalf("round trip changed the topology")
		}
	})
}

// TestFatTree3Paper checks the HPCC paper's three-tier fat tree: its counts, its
// oversubscription and the ECMP fan-out at each tier towards a host in another pod.
func TestFatTree3Paper(t *testing.T) {
	c := PaperThreeTier
	tp, err := FatTree3(c, Params{Rate: 100e9, FabricRate: 400e9, Delay: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Hosts) != 320 || len(tp.Switches) != 56 || len(tp.Links) != 320+80+80 {
		t.Fatalf("%d hosts %d switches %d links, want 320, 56, 480", len(tp.Hosts), len(tp.Switches), len(tp.Links))
	}
	if got := c.Oversubscription(100e9, 400e9); got != 1 {
		t.Errorf("oversubscription %v, want 1", got)
	}
	if d := tp.Diameter(); d != 6 {
		t.Errorf("diameter %d links, want 6 (host, ToR, agg, core, agg, ToR, host)", d)
	}
	fwd := tp.Forwarding()
	far := tp.Hosts[319].MAC.String() // on tor5-4
	for sw, want := range map[string]int{"tor1-1": 4, "agg1-1": 4, "core1": 1, "agg5-1": 1, "tor5-4": 1} {
		if got := len(fwd[sw].Routes[far]); got != want {
			t.Errorf("%s: %d next hops to h320, want %d", sw, got, want)
		}
	}
	for _, bad := range []ThreeTier{{Pods: 3, ToRs: 20, Aggs: 20, Cores: 16, HostsPerToR: 16},
		{Pods: 5, ToRs: 20, Aggs: 20, Cores: 15, HostsPerToR: 16}, {Pods: 1, ToRs: 1, Aggs: 1, Cores: 1, HostsPerToR: 1}} {
		if _, err := FatTree3(bad, Params{}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func FuzzParseNS3(f *testing.F) {
	f.Add([]byte("4 1 3\n3\n0 3 100Gbps 1000ns 0\n1 3 100Gbps 1000ns 0\n2 3 25Gbps 2000ns 0.001\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := ParseNS3(bytes.NewReader(data), Params{})
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := tp.WriteNS3(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ParseNS3(bytes.NewReader(out.Bytes()), Params{})
		if err != nil || len(again.Links) != len(tp.Links) || len(again.Hosts) != len(tp.Hosts) {
			t.Fatalf("written topology %q does not read back (%v)", out.String(), err)
		}
		for i, l := range again.Links {
			o := tp.Links[i]
			if l.Rate != o.Rate || l.Delay != o.Delay || l.Faults.Loss != o.Faults.Loss {
				t.Fatalf("link %d read back as %+v, want %+v", i, l, o)
			}
		}
	})
}

// TestSizeLimits (issue 20): a topology over the host limit is refused naming the limit,
// not by a collision of wrapped MACs blamed on the file; generators refuse before they
// build; addresses and MACs past 65,535 hosts do not wrap.
func TestSizeLimits(t *testing.T) {
	big := &Topology{Telemetry: "none", CongestionControl: "none"}
	for i := range MaxHosts + 1 {
		big.Hosts = append(big.Hosts, Host{Name: fmt.Sprintf("h%d", i+1), IPv4: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})})
	}
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "at most 65536 hosts") {
		t.Errorf("%d hosts: %v", len(big.Hosts), err)
	}
	if _, err := FatTree(100, Params{}); err == nil || !strings.Contains(err.Error(), "at most 65536 hosts") {
		t.Errorf("fat-tree k=100: %v", err)
	}
	if _, err := LeafSpine(2, 1, MaxHosts, Params{}); err == nil || !strings.Contains(err.Error(), "at most 65536 hosts") {
		t.Errorf("leaf-spine of 131072 hosts: %v", err)
	}
	tp, err := LeafSpine(2, 1, 32770, Params{}) // 65,540 hosts: over the limit
	if err == nil {
		t.Fatalf("leaf-spine of %d hosts accepted", len(tp.Hosts))
	}
	tp, err = LeafSpine(2, 1, 32768, Params{}) // exactly the limit: every MAC and address distinct
	if err != nil {
		t.Fatal(err)
	}
	last := tp.Hosts[len(tp.Hosts)-1]
	if last.MAC.String() != "02:00:00:01:00:00" || last.IPv4 != netip.MustParseAddr("10.1.0.0") || last.IPv6 != netip.MustParseAddr("fd00::1:0") {
		t.Errorf("host 65536: MAC %s, %v, %v", last.MAC, last.IPv4, last.IPv6)
	}
}
