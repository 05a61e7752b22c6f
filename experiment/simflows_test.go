package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/fabric/topo"
)

// simFlowText is a flow file as the simulator's traffic_gen.py writes one.
const simFlowText = `3
0 2 3 100 1085201 2.000000741
1 0 3 100 311 2.000003792
2 1 3 100 52000 2.000100000
`

// TestSimFlowsRoundTrip: a flow file reads into the flows it lists, to the
// nanosecond, and writes back byte for byte.
func TestSimFlowsRoundTrip(t *testing.T) {
	flows, err := ParseSimFlows(strings.NewReader(simFlowText))
	if err != nil {
		t.Fatal(err)
	}
	want := []SimFlow{
		{Src: 0, Dst: 2, Priority: 3, DPort: 100, Size: 1085201, Start: 2*time.Second + 741},
		{Src: 1, Dst: 0, Priority: 3, DPort: 100, Size: 311, Start: 2*time.Second + 3792},
		{Src: 2, Dst: 1, Priority: 3, DPort: 100, Size: 52000, Start: 2*time.Second + 100*time.Microsecond},
	}
	if !reflect.DeepEqual(flows, want) {
		t.Errorf("parsed %+v, want %+v", flows, want)
	}
	var out bytes.Buffer
	if err := WriteSimFlows(&out, flows); err != nil {
		t.Fatal(err)
	}
	if out.String() != simFlowText {
		t.Errorf("written back as\n%s\nwant\n%s", out.String(), simFlowText)
	}
}

// TestGeneratedFlowsRoundTrip: the flows `experiment flows` draws (WebSearch at 30 %
// among 320 hosts for 5 ms, some 3500 of them, start times to the nanosecond) written
// as a flow file read back into the same flows.
func TestGeneratedFlowsRoundTrip(t *testing.T) {
	cfg := MixDefaults()
	cfg.Duration = 5 * time.Millisecond
	flows, err := GenerateFlows(cfg, 320)
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if err := WriteSimFlows(&file, flows); err != nil {
		t.Fatal(err)
	}
	back, err := ParseSimFlows(&file)
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) < 3000 || !reflect.DeepEqual(back, flows) {
		t.Errorf("%d flows written, %d read back (equal: %v): want the same, about 3500", len(flows), len(back), reflect.DeepEqual(back, flows))
	}
}

// simTopoText is a star in the simulator's topology format: switch 3, hosts 0–2.
const simTopoText = `4 1 3
3
0 3 100Gbps 1000ns 0
1 3 100Gbps 1000ns 0
2 3 25Gbps 2000ns 0.001
`

// TestSimTopologyRoundTrip: a topology in the simulator's format reads into its links
// (hosts h<id>, switches s<id>, rates, delays, error rate as loss) and writes back
// byte for byte.
func TestSimTopologyRoundTrip(t *testing.T) {
	tp, err := topo.ParseNS3(strings.NewReader(simTopoText), topo.Params{})
	if err != nil {
		t.Fatal(err)
	}
	type link struct {
		a, b  string
		rate  uint64
		delay time.Duration
		loss  float64
	}
	var got []link
	for _, l := range tp.Links {
		got = append(got, link{l.Endpoints[0], l.Endpoints[1], l.Rate, l.Delay, l.Faults.Loss})
	}
	want := []link{{"h0", "s3", 100e9, time.Microsecond, 0}, {"h1", "s3", 100e9, time.Microsecond, 0},
		{"h2", "s3", 25e9, 2 * time.Microsecond, 0.001}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("links %+v, want %+v", got, want)
	}
	if len(tp.Hosts) != 3 || len(tp.Switches) != 1 || tp.Switches[0].Name != "s3" {
		t.Errorf("%d hosts, switches %+v: want 3 hosts and s3", len(tp.Hosts), tp.Switches)
	}
	var out bytes.Buffer
	if err := tp.WriteNS3(&out); err != nil {
		t.Fatal(err)
	}
	if out.String() != simTopoText {
		t.Errorf("written back as\n%s\nwant\n%s", out.String(), simTopoText)
	}
}

// TestMixReplaysSimFiles: the mix replays a flow file over a topology file, both in
// the simulator's format: the flows are the file's (node IDs to hosts, shifted by the
// whole 2 s), every one finishes and its ideal FCT is the simulator's standalone FCT
// under the ns3 preset. By hand for the 311-byte flow h1→h0 over two 100 Gb/s 1 µs
// links: base RTT 2·2 µs + 2·1000·8/100 ns = 4160 ns; one packet of 311 + 48 header
// bytes at 100 Gb/s = 28.72 ns, truncated: 4188 ns. The same network given as
// rocelab's YAML (hosts h0–h2 at positions 0–2, so the same IDs) replays into the
// same flow records.
func TestMixReplaysSimFiles(t *testing.T) {
	dir := t.TempDir()
	flows, tpf, yml := filepath.Join(dir, "flows.txt"), filepath.Join(dir, "topology.txt"), filepath.Join(dir, "topology.yaml")
	tp, err := topo.ParseNS3(strings.NewReader(simTopoText), topo.Params{})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{flows: []byte(simFlowText), tpf: []byte(simTopoText), yml: tp.YAML()} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var records [][]FlowRecord
	for _, file := range []string{tpf, yml} {
		cfg := NS3(MixDefaults())
		cfg.FlowFile, cfg.TopologyFile = flows, file
		res := runOK(t, cfg)
		if len(res.Flows) != 3 || res.Metrics.FlowsFinished != 3 {
			t.Fatalf("%s: %d flows, %d finished: want 3 of 3", file, len(res.Flows), res.Metrics.FlowsFinished)
		}
		f := res.Flows[1]
		if f.Src != 1 || f.Dst != 0 || f.Size != 311 || f.StartNs != 3792 || f.IdealNs != 4188 {
			t.Errorf("%s: flow 1: %+v: want h1→h0, 311 bytes, start 3792 ns, ideal 4188 ns", file, f)
		}
		records = append(records, res.Flows)
	}
	if !reflect.DeepEqual(records[0], records[1]) {
		t.Errorf("the simulator's format gave %+v, the YAML %+v: want the same", records[0], records[1])
	}
}

func FuzzParseSimFlows(f *testing.F) {
	f.Add([]byte(simFlowText))
	f.Fuzz(func(t *testing.T, data []byte) {
		flows, err := ParseSimFlows(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteSimFlows(&out, flows); err != nil {
			t.Fatal(err)
		}
		again, err := ParseSimFlows(&out)
		if err != nil || !reflect.DeepEqual(again, flows) {
			t.Fatalf("written flows read back as %+v (%v), want %+v", again, err, flows)
		}
	})
}
