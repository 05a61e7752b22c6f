package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/lab"
)

// buildApps builds the sample apps next to the CLI binary, where rocelab exec finds
// them.
func buildApps(t *testing.T, c *cli, apps ...string) {
	t.Helper()
	for _, a := range apps {
		if out, err := exec.Command("go", "build", "-o", filepath.Dir(c.bin)+"/", "../"+a).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", a, err, out)
		}
	}
}

// portFrames returns the frames a switch port sent and received so far.
func portFrames(t *testing.T, c *cli, name, port string) uint64 {
	t.Helper()
	var st lab.Status
	if err := json.Unmarshal([]byte(c.run("status", "--json", "--lab", name)), &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Switches {
		for _, p := range s.Ports {
			if p.Port == port {
				return p.Stats.TxFrames + p.Stats.RxFrames
			}
		}
	}
	t.Fatalf("no port %s in %+v", port, st)
	return 0
}

// TestCaptureWriteBWRealTime: `rocelab capture s1:p1 -w FILE` of the port carrying a
// default write_bw (5000 64 KiB messages) between the lab's two hosts loses nothing:
// the file holds every frame that crossed the port while the capture ran, its
// statistics block says so (isb_ifrecv = frames, isb_ifdrop = 0), the CLI prints the
// figures, and the port's own counters agree (up to the kernel's idle IPv6 frames
// before the capture started). Real time: it runs in the non-race pass.
func TestCaptureWriteBWRealTime(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows the lab below real time")
	}
	c := newCLI(t)
	buildApps(t, c, "write_bw")
	name := labName("cap")
	c.run("up", "-f", "../../topologies/two-hosts.yaml", "--name", name)
	defer c.run("down", name)

	before := portFrames(t, c, name, "s1:p1")
	file := filepath.Join(t.TempDir(), "s1p1.pcapng")
	capture := c.cmd("capture", "--lab", name, "s1:p1", "-w", file)
	stderr, err := capture.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	defer capture.Process.Kill()
	// exec -d returns once the server listens; the client then connects at once. The
	// server keeps exec's standard output: a file, not a pipe to wait for.
	server := c.cmd("exec", "--lab", name, "-d", "h1", "--", "write_bw", "-x", "1", "--report_gbits")
	server.Stdout, server.Stderr = os.Stderr, os.Stderr
	if err := server.Run(); err != nil {
		t.Fatalf("exec -d write_bw: %v", err)
	}
	out := c.run("exec", "--lab", name, "h2", "--", "write_bw", "-x", "1", "--report_gbits", "10.0.0.1")
	t.Logf("write_bw:\n%s", out)
	if err := capture.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(stderr)
	if err := capture.Wait(); err != nil {
		t.Fatalf("capture: %v\n%s", err, msg)
	}
	t.Logf("capture: %s", msg)
	after := portFrames(t, c, name, "s1:p1")

	m := regexp.MustCompile(`captured (\d+) frames of s1:p1 to .*, dropped (\d+)`).FindSubmatch(msg)
	if m == nil {
		t.Fatalf("capture printed %q, want its figures", msg)
	}
	frames, _ := strconv.ParseUint(string(m[1]), 10, 64)
	dropped, _ := strconv.ParseUint(string(m[2]), 10, 64)

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stats []pcapgo.NgInterfaceStatistics
	r, err := pcapgo.NewNgReader(f, pcapgo.NgReaderOptions{StatisticsCallback: func(_ int, s pcapgo.NgInterfaceStatistics) {
		stats = append(stats, s)
	}})
	if err != nil {
		t.Fatal(err)
	}
	var inFile uint64
	for {
		_, _, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		inFile++
	}
	crossed := after - before
	t.Logf("port s1:p1 counted %d frames, the file holds %d, the capture dropped %d", crossed, inFile, dropped)
	if dropped != 0 || inFile != frames {
		t.Errorf("the capture wrote %d frames (the file holds %d) and dropped %d: want none dropped", frames, inFile, dropped)
	}
	if len(stats) != 1 || stats[0].PacketsReceived != frames || stats[0].PacketsDropped != 0 {
		t.Errorf("statistics blocks %+v, want isb_ifrecv %d, isb_ifdrop 0", stats, frames)
	}
	// Between the two status reads only the capture's window carried write_bw; the
	// kernel's idle IPv6 frames (router solicitations, 3 per host in the first 8 s)
	// may fall outside it.
	if frames > crossed || crossed > frames+6 || frames < 5000 {
		t.Errorf("the port counted %d frames, the capture %d: want them equal, bar the kernel's idle frames", crossed, frames)
	}
}
