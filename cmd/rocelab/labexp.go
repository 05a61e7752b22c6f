package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

// labIncast runs `experiment --lab`: experiment.RunLabIncast on the lab name of store,
// with rocelab's write_bw from beside this binary, as rocelab exec finds it.
// ROCELAB_LAB_POLL=1 keeps perftest's busy polling in the apps.
func labIncast(cfg experiment.Config, store netns.Store, name string, sendersGiven bool) (*experiment.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return experiment.RunLabIncast(cfg, controlLab{store, name}, experiment.LabIncastOptions{
		WriteBW:      filepath.Join(filepath.Dir(self), "write_bw"),
		SendersGiven: sendersGiven,
		Poll:         os.Getenv("ROCELAB_LAB_POLL") != "",
		HoldFor:      30 * time.Second,
		DrainEvery:   250 * time.Millisecond,
		MaxRecorded:  lab.MaxRecorded,
	})
}

// controlLab is experiment.RunningLab over a lab's control socket.
type controlLab struct {
	store netns.Store
	name  string
}

func (c controlLab) query(req lab.Request) (lab.Reply, error) {
	r, err := lab.Query(c.store, c.name, req)
	return r, err
}

func (c controlLab) Status() (experiment.LabStatus, error) {
	r, err := c.query(lab.Request{Op: "status"})
	if err == nil && r.Status == nil {
		err = fmt.Errorf("experiment: lab %s answered status without one", c.name)
	}
	if err != nil {
		return experiment.LabStatus{}, err
	}
	s := r.Status
	st := experiment.LabStatus{Name: c.name, Topology: s.Topology, CongestionControl: s.CongestionControl, Telemetry: s.Telemetry}
	for _, h := range s.Hosts {
		st.Hosts = append(st.Hosts, experiment.LabHost{Name: h.Name, IPv4: h.IPv4})
	}
	for _, sw := range s.Switches {
		x := experiment.LabSwitch{Name: sw.Name}
		for _, p := range sw.Ports {
			x.Ports = append(x.Ports, experiment.LabPort{Port: p.Port, Peer: p.Peer, Rate: p.Rate})
		}
		st.Switches = append(st.Switches, x)
	}
	st.Loops = make([]clock.Lateness, len(s.Loops))
	for i, l := range s.Loops {
		st.Loops[i] = l.Lateness()
	}
	return st, nil
}

func (c controlLab) Hold(hosts []string, d time.Duration) (map[string]bool, error) {
	r, err := c.query(lab.Request{Op: "hold", Hosts: hosts, HoldNs: int64(d)})
	return r.Held, err
}

func (c controlLab) Record(every time.Duration) ([]experiment.LabCounters, uint64, error) {
	return c.rows(lab.Request{Op: "record", EveryNs: int64(every)})
}

func (c controlLab) Recorded() ([]experiment.LabCounters, uint64, error) {
	return c.rows(lab.Request{Op: "recorded"})
}

func (c controlLab) rows(req lab.Request) ([]experiment.LabCounters, uint64, error) {
	r, err := c.query(req)
	if err != nil {
		return nil, 0, err
	}
	rows := make([]experiment.LabCounters, len(r.Recorded))
	for i, x := range r.Recorded {
		sw := make(map[string][]experiment.LabPortCounters, len(x.Switches))
		for name, ports := range x.Switches {
			for _, p := range ports {
				sw[name] = append(sw[name], experiment.LabPortCounters{QLen: p.QLen, TxBytes: p.TxBytes, QueueArea: p.QueueArea})
			}
		}
		rows[i] = experiment.LabCounters{TimeNs: x.TimeNs, Sent: x.Hosts, Received: x.Received, Switches: sw}
	}
	return rows, r.RecordDropped, nil
}

func (c controlLab) Start(host string, cmd *exec.Cmd) error { return c.store.Exec(c.name, host, cmd) }
