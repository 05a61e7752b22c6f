package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/lab/tuntest"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkKeys fails the test for every object key in the JSON documents of out (one or
// more, as a stream) that is not snake_case, naming its path.
func checkKeys(t *testing.T, what, out string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	docs := 0
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		docs++
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					if !snakeCase.MatchString(k) {
						t.Errorf("%s: key %s.%s is not snake_case", what, path, k)
					}
					walk(path+"."+k, e)
				}
			case []any:
				for _, e := range v {
					walk(path+"[]", e)
				}
			}
		}
		walk("", v)
	}
	if docs == 0 {
		t.Fatalf("%s printed no JSON", what)
	}
}

// TestJSONKeysSnakeCase runs every command that prints JSON and checks all its keys.
func TestJSONKeysSnakeCase(t *testing.T) {
	t.Run("status", func(t *testing.T) {
		// A lab on in-memory devices (no root): status --json reads it over the
		// control socket, RNIC and switch port counters included.
		t.Setenv(netns.StateRootEnv, t.TempDir())
		tp, err := topo.Load("../../topologies/two-hosts.yaml")
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("json%d", os.Getpid())
		l, err := lab.Up(lab.Config{Name: name, Topology: tp, Store: netns.DefaultStore(),
			AddHost: func(store netns.Store, labName string, h netns.HostConfig) (lab.Device, error) {
				return tuntest.New(), store.Update(labName, func(r *netns.Lab) error {
					r.Hosts = append(r.Hosts, netns.Host{Name: h.Name, MAC: h.MAC.String(), IPv4: h.IPv4, IPv6: h.IPv6})
					return nil
				})
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out := execute(t, newStatusCmd(), "", "--lab", name, "--json")
		for _, k := range []string{`"rnic": {`, `"host_frames"`, `"queues": [`, `"qlen_bytes"`, `"paused_ns"`} {
			if !strings.Contains(out, k) {
				t.Errorf("status --json lacks %s:\n%s", k, out)
			}
		}
		checkKeys(t, "status --json", out)
	})
	t.Run("experiment", func(t *testing.T) {
		dir := t.TempDir()
		checkKeys(t, "experiment --json", execute(t, newExperimentCmd(), "", "incast", "--senders", "2", "--flow-size", "64KB", "--json", "--out", dir))
		checkKeys(t, "experiment compare --json", execute(t, newExperimentCmd(), "", "compare", dir, dir, "--json"))
		checkKeys(t, "experiment sweep --json", execute(t, newExperimentCmd(), "", "sweep", "incast", "--senders", "2", "--flow-size",
			"64KB", "--grid", "cc=hpcc,dcqcn", "--json"))
	})
	t.Run("decode", func(t *testing.T) {
		captures, _ := filepath.Glob("../../roce/testdata/rxe/*.pcap")
		captures = append(captures, telemetryCapture(t))
		for _, c := range captures {
			checkKeys(t, "decode "+filepath.Base(c), execute(t, newDecodeCmd(), "", c))
		}
	})
	t.Run("hpcc replay", func(t *testing.T) {
		hop := `{"ts_ns":1000,"qlen":0,"tx_bytes":0,"bw_bps":1e11}`
		checkKeys(t, "hpcc replay", execute(t, newHPCCReplayCmd(), `{"seq":0,"snd_nxt":1000,"hops":[`+hop+`]}`))
		checkKeys(t, "hpcc replay --mode receiver", execute(t, newHPCCReplayCmd(), `{"now_ns":0,"hops":[`+hop+`]}`, "--mode", "receiver"))
	})
}

// telemetryCapture writes a pcap of RoCEv2 frames carrying each telemetry format with
// two hops, for decode's telemetry records.
func telemetryCapture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "telemetry.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		codec telemetry.Codec
		ipv6  bool
	}{{intmd.New(), false}, {ioam.New(), true}, {ifa.New(), false}, {hpcchop.New(), false}} {
		frame, err := c.codec.Request(telemetrytest.RoCEFrame(c.ipv6))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			h := telemetrytest.Hop(i)
			frame, _, _ = c.codec.Push(frame, &h)
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// execute runs a fresh command in-process with stdin and args and returns its stdout.
func execute(t *testing.T, cmd *cobra.Command, stdin string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v %v\n%s", args, err, errOut.String())
	}
	return out.String()
}
