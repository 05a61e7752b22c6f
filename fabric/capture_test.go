package fabric

import (
	"bytes"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/fabric/capture"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
)

// incastCapture runs a faulty, ECN-marking, stamping 4:1 incast and returns the pcapng
// capture of the bottleneck port.
func incastCapture(t *testing.T, seed uint64) ([]byte, PortStats) {
	var buf bytes.Buffer
	w, err := capture.NewWriter(&buf, "s1:p4", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	v := clock.NewVirtual(seed)
	lc := link.Config{Rate: 100e9, Delay: time.Microsecond, Faults: link.Faults{
		Loss: 0.01, Corrupt: 0.01, Duplicate: 0.01, Reorder: 0.01, Jitter: 100 * time.Nanosecond}}
	cfg := Config{ID: 1, Buffer: 64 << 10, SharedBuffer: true,
		ECN: ECN{Enabled: true, KMin: 5000, KMax: 50000, PMax: 0.2}, Stamper: &recordingStamper{dscp: 26, grow: true}}
	sw, hosts := starWith(v, 4, lc, 100e9, cfg, func(i int, ep link.Endpoint) link.Endpoint {
		if i == 4 {
			return capture.Tap(ep, w)
		}
		return ep
	})
	for i := range 4 {
		hosts[i].ecn = 2
		hosts[i].start(4, 500, clock.Time(i*10))
	}
	v.Run()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sw.Ports()[4].Stats()
}

// TestCaptureDeterministic: the same topology, traffic and seed give byte-identical
// captures; another seed gives another run (the faults and marks are random).
func TestCaptureDeterministic(t *testing.T) {
	a, stats := incastCapture(t, 11)
	b, _ := incastCapture(t, 11)
	c, _ := incastCapture(t, 12)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different captures")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds, identical captures: the seed is not used")
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(a), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if len(data) == 1008 {
			n++ // a stamped data frame: the telemetry is in the capture
		}
	}
	if uint64(n) != stats.TxFrames || stats.ECNMarks == 0 || stats.Drops == 0 {
		t.Fatalf("captured %d stamped frames, port sent %d (marks %d, drops %d)", n, stats.TxFrames, stats.ECNMarks, stats.Drops)
	}
	t.Logf("capture %d bytes, %d frames, %d ECN marks, %d drops", len(a), n, stats.ECNMarks, stats.Drops)
}
