package experiment

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/internal/clock"
)

// fakeLab is a RunningLab in memory: a status, and nothing else.
type fakeLab struct{ st LabStatus }

var errFake = errors.New("not in the fake")

func (f *fakeLab) Status() (LabStatus, error) { return f.st, nil }
func (f *fakeLab) Hold([]string, time.Duration) (map[string]bool, error) {
	return nil, errFake
}
func (f *fakeLab) Record(time.Duration) ([]LabCounters, uint64, error) { return nil, 0, errFake }
func (f *fakeLab) Recorded() ([]LabCounters, uint64, error)            { return nil, 0, errFake }
func (f *fakeLab) Start(string, *exec.Cmd) error                       { return errFake }

func threeHosts() LabStatus {
	return LabStatus{Name: "x", Topology: "/nonexistent.yaml", CongestionControl: "hpcc", Telemetry: "int",
		Hosts:    []LabHost{{"h1", "10.0.0.1"}, {"h2", "10.0.0.2"}, {"h3", "10.0.0.3"}},
		Switches: []LabSwitch{{Name: "s1", Ports: []LabPort{{"s1:p0", "h1", "10G"}, {"s1:p1", "h2", "10G"}, {"s1:p2", "h3", "10G"}}}},
	}
}

// TestLabIncastRoles: the last host receives, the others send unless told how many,
// the link rate is the receiver's port's, and a lab that cannot hold the incast is
// refused with what it lacks.
func TestLabIncastRoles(t *testing.T) {
	cfg := Defaults()
	in, err := newLabIncast(&cfg, threeHosts(), LabIncastOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.recv.Name != "h3" || len(in.senders) != 2 || in.port != 2 || cfg.LinkRate != 10e9 || cfg.Senders != 2 {
		t.Errorf("receiver %s, senders %v, port %d, rate %d", in.recv.Name, in.senders, in.port, cfg.LinkRate)
	}
	cfg.Senders = 5
	if _, err := newLabIncast(&cfg, threeHosts(), LabIncastOptions{SendersGiven: true}); err == nil || !strings.Contains(err.Error(), "too few for 5 senders") {
		t.Errorf("5 senders in 3 hosts: %v", err)
	}
	st := threeHosts()
	st.Switches[0].Ports = st.Switches[0].Ports[:2]
	if _, err := newLabIncast(&cfg, st, LabIncastOptions{}); err == nil || !strings.Contains(err.Error(), "no switch port leads to the receiver h3") {
		t.Errorf("no port to the receiver: %v", err)
	}
}

// TestLabIncastFlowsFromSamples: a flow lasts from the sample before its sender's bytes
// first grew to the last sample in which they grew, its rate is bytes over the
// interval, and rows read no later than the last are skipped.
func TestLabIncastFlowsFromSamples(t *testing.T) {
	cfg := Defaults()
	f := &fakeLab{st: threeHosts()}
	in, err := newLabIncast(&cfg, f.st, LabIncastOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in.lab = f
	row := func(ns int64, h1, h2 uint64) LabCounters {
		return LabCounters{TimeNs: ns, Sent: map[string]uint64{"h1": h1, "h2": h2}, Received: map[string]uint64{"h3": h1 + h2},
			Switches: map[string][]LabPortCounters{"s1": {{}, {}, {QLen: 100, TxBytes: h1 + h2}}}}
	}
	rows := []LabCounters{row(5e6, 0, 0), row(6e6, 1250, 0), row(6e6, 9999, 0), row(7e6, 2500, 1250), row(8e6, 2500, 2500), row(9e6, 2500, 2500)}
	if err := in.record(rows, 3, nil); err != nil {
		t.Fatal(err)
	}
	if in.dropped != 3 || len(in.series) != 5 {
		t.Fatalf("dropped %d, %d samples, want 3 and 5 (the row at the same time skipped)", in.dropped, len(in.series))
	}
	res, err := in.result()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Flows) != 2 {
		t.Fatalf("flows %+v", res.Flows)
	}
	ms := int64(time.Millisecond)
	if f0, f1 := res.Flows[0], res.Flows[1]; f0.StartNs != 0 || f0.FCTNs != 2*ms || f1.StartNs != ms || f1.FCTNs != 2*ms {
		t.Errorf("flows %+v", res.Flows)
	}
	if r := res.Rates[0]; r.T != clock.Time(ms) || r.Rate != 1250*8e9/1e6 {
		t.Errorf("first rate %+v, want 10 Mb/s at 1 ms", r)
	}
	if len(res.Queue) != 5 || res.Queue[1].Bytes != 100 {
		t.Errorf("queue %+v", res.Queue)
	}
	if err := in.record(nil, 0, errFake); err == nil || !strings.Contains(err.Error(), "lab x: record") {
		t.Errorf("a failed record: %v", err)
	}
}
