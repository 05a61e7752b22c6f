package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/decode"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// runDecode executes a fresh `decode` command in-process.
func runDecode(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	cmd := newDecodeCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under rootCmd
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), err
}

func pcapOf(t *testing.T, frames ...[]byte) string {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{CaptureLength: len(f), Length: len(f)}, f); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "c.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// `rocelab decode` of a plain RoCEv2 frame whose DSCP is the HPCC block's decodes it
// with a note; --hpcc-dscp moves the signal; out-of-range values are refused; a
// capture cut short fails after printing what it read.
func TestDecodeSignalsAndCutShort(t *testing.T) {
	b := telemetrytest.Builder(false)
	b.DSCP, b.BTH.Opcode, b.RETH, b.AETH = hpcchop.DefaultDSCP, roce.OpRCReadResponseOnly, roce.RETHFields{}, roce.AETHFields{MSN: 1}
	plain := telemetrytest.Frame(b)
	c := hpcchop.New()
	c.DSCP = 40
	stamped, err := c.Request(telemetrytest.RoCEFrame(false))
	if err != nil {
		t.Fatal(err)
	}
	path := pcapOf(t, plain, stamped)

	records := func(out string) []decode.Record {
		var rs []decode.Record
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var r decode.Record
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("%v in %s", err, out)
			}
			rs = append(rs, r)
		}
		return rs
	}
	out, err := runDecode(t, path)
	rs := records(out)
	if err != nil || len(rs) != 2 || rs[0].BTH == nil || rs[0].Note == "" || rs[0].Error != "" || rs[1].Telemetry != nil {
		t.Fatalf("default signals: %v\n%s", err, out)
	}
	out, err = runDecode(t, "--hpcc-dscp", "40", path)
	rs = records(out)
	if err != nil || len(rs) != 2 || rs[0].Note != "" || rs[1].Telemetry == nil || rs[1].ICRCOK == nil || !*rs[1].ICRCOK {
		t.Fatalf("--hpcc-dscp 40: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"--int-dscp", "64"}, {"--hpcc-dscp", "300"}} {
		if _, err := runDecode(t, append(bad, path)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}

	whole, _ := os.ReadFile(path)
	if err := os.WriteFile(path, whole[:len(whole)-len(stamped)], 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runDecode(t, path)
	if rs := records(out); len(rs) != 1 || err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("cut short: %d records, %v", len(rs), err)
	}
}

// TestDecodeEveryCaptureFrame runs `rocelab decode` over every capture in roce's
// testdata and checks every frame, RoCE or not: one record per packet, numbered as
// Wireshark numbers them; a frame the shared locator finds no IP header in (ARP)
// reports no IP, no telemetry and no note; and none of the kernel's frames, which
// carry no telemetry, gets a note.
func TestDecodeEveryCaptureFrame(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "roce", "testdata", "*", "*.pcap*"))
	if len(paths) == 0 {
		t.Fatal("no captures in roce/testdata")
	}
	for _, path := range paths {
		var frames [][]byte
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = decode.ReadFrames(f, func(fr *decode.Frame) error {
			frames = append(frames, append([]byte(nil), fr.Data...))
			return nil
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, err := runDecode(t, path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		var n, nonIP, rocev2 int
		for ; dec.More(); n++ {
			var r decode.Record
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if r.Frame != n+1 || n >= len(frames) {
				t.Fatalf("%s: record %d is frame %d of %d", path, n+1, r.Frame, len(frames))
			}
			l, _ := roce.Locate(frames[n])
			if ip := l.IPVersion != 0; ip != (r.IP != nil) {
				t.Errorf("%s frame %d: IP record %+v, locator says IP version %d", path, r.Frame, r.IP, l.IPVersion)
			}
			if l.IPVersion == 0 {
				nonIP++
			}
			if r.RoCE {
				rocev2++
			}
			if r.Note != "" || r.Telemetry != nil || r.Error != "" {
				t.Errorf("%s frame %d: note %q, telemetry %v, error %q", path, r.Frame, r.Note, r.Telemetry, r.Error)
			}
		}
		if n != len(frames) || nonIP == 0 || rocev2 == 0 {
			t.Errorf("%s: %d records for %d frames, %d of them not IP, %d RoCEv2", path, n, len(frames), nonIP, rocev2)
		}
	}
}
