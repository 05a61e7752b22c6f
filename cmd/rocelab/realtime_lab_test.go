package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rocelab/rocelab/lab"
)

// writeTopology writes a star of hosts around s1, every link at rate with 10 µs of
// delay, and returns the file's path.
func writeTopology(t *testing.T, hosts int, rate, telemetry, cc string) string {
	t.Helper()
	y := fmt.Sprintf("telemetry: %s\ncongestion_control: %s\nhosts:\n", telemetry, cc)
	for i := 1; i <= hosts; i++ {
		y += fmt.Sprintf("  - {name: h%d, ipv4: 10.0.0.%d}\n", i, i)
	}
	y += "switches:\n  - name: s1\nlinks:\n"
	for i := 1; i <= hosts; i++ {
		y += fmt.Sprintf("  - {endpoints: [h%d, s1], rate: %s, delay: 10us, mtu: 1500}\n", i, rate)
	}
	path := filepath.Join(t.TempDir(), "star.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLabRealTimeHPCCStampsEveryProbe: a 1 Gb/s lab with `telemetry: hpcc` — a rate
// the HPCC simulator's rate code cannot say — stamps every telemetry probe an app's
// RDMA WRITEs send (rocelab's rate extension carries the rate), with no stamp error on
// any port. Before the extension the switch dropped every probe (issue 21).
func TestLabRealTimeHPCCStampsEveryProbe(t *testing.T) {
	if raceEnabled {
		t.Skip("real-time lab: not under the race detector, which slows the loops below real time")
	}
	c := newCLI(t)
	name := labName("stamp")
	c.run("up", "-f", writeTopology(t, 2, "1G", "hpcc", "hpcc"), "--name", name)
	defer c.run("down", name)
	const size = 4 << 20
	env := []string{"ROCELAB_TEST_SIZE=" + fmt.Sprint(size)}
	target := c.cmd("exec", "--lab", name, "h1", "--", os.Args[0])
	target.Env = append(target.Env, append(env, "ROCELAB_TEST_APP=write-target")...)
	target.Stderr = os.Stderr
	out, err := target.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer target.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("target: %q %v", line, err)
	}
	source := c.cmd("exec", "--lab", name, "h2", "--", os.Args[0])
	source.Env = append(source.Env, append(env, "ROCELAB_TEST_APP=write-source", "ROCELAB_TEST_PEER=10.0.0.1")...)
	if got, err := source.CombinedOutput(); err != nil {
		t.Fatalf("source: %v\n%s", err, got)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
		t.Fatal(err)
	}
	probes := st.Hosts[1].RNIC.ProbesSent
	toH1 := st.Switches[0].Ports[0].Stats // s1:p0 leads to h1: the probes' egress
	t.Logf("h2 sent %d probes; s1:p0 stamped %d, %d stamp errors", probes, toH1.Stamped, toH1.StampErrors)
	if probes == 0 || toH1.Stamped != probes {
		t.Errorf("s1:p0 stamped %d frames, h2 sent %d probes: want every probe stamped", toH1.Stamped, probes)
	}
	for _, p := range st.Switches[0].Ports {
		if p.Stats.StampErrors != 0 || p.Stats.Drops != 0 {
			t.Errorf("%s: %d stamp errors, %d drops", p.Port, p.Stats.StampErrors, p.Stats.Drops)
		}
	}
	if m := st.Hosts[1].RNIC.RxMalformed + st.Hosts[0].RNIC.RxMalformed; m != 0 {
		t.Errorf("hosts counted %d malformed frames", m)
	}
}
