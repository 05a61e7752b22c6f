package experiment

import (
	"fmt"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
)

// LinkSample is one switch egress port's queue and the bytes it has sent as of a rate
// sample's instant T: the switch's latest sample then, taken at Sampled, T or up to
// one Config.Sample before (the switch samples on its own loop). With the rate
// samples, what a replay of the run shows of every link (rocelab web --experiment);
// rates over time divide by the Sampled instants.
type LinkSample struct {
	T       clock.Time
	Port    string // s1:p0, numbered as the lab numbers ports: in link order, per switch
	Sampled clock.Time
	Bytes   int
	TxBytes uint64
}

// portWatch keeps every switch port's latest sample, so that the rate monitor can
// record all links at its own instants (the switches sample every Config.Sample).
type portWatch struct {
	names  [][]string // by switch, then port
	latest [][]fabric.Sample
	seen   [][]bool
}

func newPortWatch(names [][]string) *portWatch {
	w := &portWatch{names: names}
	for _, ps := range names {
		w.latest = append(w.latest, make([]fabric.Sample, len(ps)))
		w.seen = append(w.seen, make([]bool, len(ps)))
	}
	return w
}

// record keeps s, a sample of switch number sw (in the topology's order).
func (w *portWatch) record(sw int, s fabric.Sample) {
	if int(s.Port) < len(w.latest[sw]) {
		w.latest[sw][s.Port], w.seen[sw][s.Port] = s, true
	}
}

// appendNow appends every sampled port's latest sample as of now.
func (w *portWatch) appendNow(out []LinkSample, now clock.Time) []LinkSample {
	for i, ps := range w.latest {
		for j, s := range ps {
			if w.seen[i][j] {
				out = append(out, LinkSample{T: now, Port: w.names[i][j], Sampled: s.Time, Bytes: s.QLen, TxBytes: s.TxBytes})
			}
		}
	}
	return out
}

// starPorts names the star's switch ports: port i leads to host i.
func starPorts(hosts int) [][]string {
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("s1:p%d", i)
	}
	return [][]string{names}
}

// topoParams are the links, buffers, telemetry and congestion control of the
// topology a run builds; markECN gives its switches the run's RED marking.
func (c *Config) topoParams() (topo.Params, error) {
	p := topo.Params{Rate: c.LinkRate, FabricRate: c.FabricRate, Delay: c.LinkDelay, MTU: c.linkMTU(),
		Buffer: c.Buffer, Telemetry: "none", CongestionControl: "none"}
	switch c.CC {
	case rnic.ModeNone:
	case rnic.ModeDCQCN:
		p.CongestionControl = "dcqcn"
	default:
		name, err := topologyTelemetry(c.Telemetry)
		if err != nil {
			return p, err
		}
		p.Telemetry, p.CongestionControl = name, "hpcc"
	}
	return p, nil
}

func (c *Config) markECN(t *topo.Topology) {
	if c.CC == rnic.ModeDCQCN && c.ECN.Enabled {
		for i := range t.Switches {
			t.Switches[i].ECN = &topo.ECN{KMin: c.ECN.KMin, KMax: c.ECN.KMax, PMax: c.ECN.PMax}
		}
	}
}

// starTopology describes the incast and fairness scenarios' network (buildStar) as
// a topology: senders h1…hN and the receiver h(N+1) on switch s1, host i+1 behind
// port i.
func (c *Config) starTopology() (*topo.Topology, error) {
	p, err := c.topoParams()
	if err != nil {
		return nil, err
	}
	t, err := topo.Star(c.Senders, p)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	c.markECN(t)
	return t, nil
}
