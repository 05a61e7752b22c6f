package experiment

import (
	"encoding/binary"
	"fmt"
	"iter"
	"time"

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

// portSeries is one switch egress port's samples — its queue and the bytes it has
// sent, taken every Config.Sample — kept as change points: a sample is stored only
// when it differs from the one before, so a port costs memory only while it sends
// (a dense series of every port was the largest part of a long mix's memory). Its
// dense form repeats each stored sample at every sampling instant up to the next
// one, to its switch's latest: exactly the samples the switch took. The switch
// reports a port only when its sample changes (fabric.Switch.SampleChanges), so the
// series learns how far the samples run from its switch's sampling.
type portSeries struct {
	every   clock.Time  // the sampling interval
	changes changeLog   // the first sample and every one that differs from its predecessor
	latest  QueueSample // the latest change: the values of the latest sample
	seen    bool
	sw      *sampling // the switch's sampling instants
}

// sampling is how far a switch has sampled its ports: every port of a switch is
// sampled in the same event.
type sampling struct {
	latest clock.Time // the latest instant
	seen   bool       // at least one
}

// tick records a sampling instant.
func (s *sampling) tick(now clock.Time) { s.latest, s.seen = now, true }

func newPortSeries(every time.Duration, sw *sampling) portSeries {
	return portSeries{every: clock.Time(every), sw: sw}
}

// record takes the switch's sample s of the port, sent because it differs from the
// port's sample before or is its first.
func (p *portSeries) record(s fabric.Sample) {
	q := QueueSample{T: s.Time, Bytes: s.QLen, TxBytes: s.TxBytes}
	if !p.seen || q.Bytes != p.latest.Bytes || q.TxBytes != p.latest.TxBytes {
		p.changes.add(q)
		p.latest, p.seen = q, true
	}
}

// samples walks the samples taken from from to to (both included), in time order,
// decoding the change points as it goes: the dense series is never held.
func (p *portSeries) samples(from, to clock.Time) iter.Seq[QueueSample] {
	return func(yield func(QueueSample) bool) {
		if !p.seen {
			return
		}
		to := min(to, p.sw.latest)
		c := p.changes.cursor()
		t := c.next.T // the first sample
		if from > t {
			t += (from - t + p.every - 1) / p.every * p.every
		}
		for ; t <= to; t += p.every {
			c.advance(t)
			q := c.cur
			q.T = t
			if !yield(q) {
				return
			}
		}
	}
}

// all walks the whole dense series.
func (p *portSeries) all() iter.Seq[QueueSample] { return p.samples(0, clock.Never) }

// changeLog is a port's change points, each stored as the differences of its time,
// queue and bytes sent from the change before, as varints: about 6 bytes a change
// instead of a QueueSample's 24 (a busy port changes at nearly every sample, and the
// 1,024-host fat tree has 5,120 ports), in chunks that grow up to maxChunk, so that
// a long series is never copied to grow.
type changeLog struct {
	chunks [][]byte
	n      int         // changes stored
	last   QueueSample // the last change stored, the base of the next one's differences
}

// The first chunk of a changeLog and the size its chunks double up to.
const (
	minChunk = 64
	maxChunk = 32 << 10
)

// add appends q, a sample later than the last one added.
func (l *changeLog) add(q QueueSample) {
	var buf [3 * binary.MaxVarintLen64]byte
	b := binary.AppendVarint(buf[:0], int64(q.T-l.last.T))
	b = binary.AppendVarint(b, int64(q.Bytes-l.last.Bytes))
	b = binary.AppendVarint(b, int64(q.TxBytes-l.last.TxBytes)) // wraps back on decoding
	k := len(l.chunks) - 1
	if k < 0 || len(l.chunks[k])+len(b) > cap(l.chunks[k]) {
		size := minChunk
		if k >= 0 {
			size = min(2*cap(l.chunks[k]), maxChunk)
		}
		l.chunks = append(l.chunks, make([]byte, 0, size))
		k++
	}
	l.chunks[k] = append(l.chunks[k], b...)
	l.last = q
	l.n++
}

// len is the number of changes stored.
func (l *changeLog) len() int { return l.n }

// changeCursor walks a changeLog in time order: cur is the change in effect at the
// instant it was last advanced to, next the one after it while ahead.
type changeCursor struct {
	log        *changeLog
	chunk, off int // where the encoding of the change after next starts
	read       int // changes decoded
	ahead      bool
	next, cur  QueueSample
}

// cursor returns a cursor before the first change (next is the first change).
func (l *changeLog) cursor() changeCursor {
	c := changeCursor{log: l}
	c.step()
	return c
}

// step decodes the change after next into next; ahead is false at the end.
func (c *changeCursor) step() {
	if c.ahead = c.read < c.log.n; !c.ahead {
		return
	}
	b := c.log.chunks[c.chunk][c.off:]
	if len(b) == 0 {
		c.chunk, c.off = c.chunk+1, 0
		b = c.log.chunks[c.chunk]
	}
	dt, n1 := binary.Varint(b)
	dq, n2 := binary.Varint(b[n1:])
	dx, n3 := binary.Varint(b[n1+n2:])
	c.off += n1 + n2 + n3
	c.next = QueueSample{T: c.next.T + clock.Time(dt), Bytes: c.next.Bytes + int(dq), TxBytes: c.next.TxBytes + uint64(dx)}
	c.read++
}

// advance makes the cursor's current change the last one taken at or before t.
func (c *changeCursor) advance(t clock.Time) {
	for c.ahead && c.next.T <= t {
		c.cur = c.next
		c.step()
	}
}

// linkTable is what links.csv holds — every switch egress port's latest sample at
// each rate sample — kept as the instant of each rate sample and, per switch, the
// instant of its latest sample then: a row's queue and bytes sent are the port's
// series at that instant (every port of a switch is sampled in the same event), so
// the rows take memory only as they are written, not 48 bytes per port per rate
// sample for the whole run.
type linkTable struct {
	ports    []linkPort   // in the lab's order: by switch, then port
	sampling []*sampling  // per switch (nil for one without ports)
	at       []clock.Time // the rate samples' instants
	sampled  []clock.Time // per rate sample, per switch: its latest sample's instant, or -1
}

// linkPort is one port of a linkTable.
type linkPort struct {
	name   string // s1:p0
	sw     int
	series *portSeries
}

// add adds a port of switch number sw (numbered from 0, in the lab's order).
func (l *linkTable) add(name string, sw int, series *portSeries) {
	l.ports = append(l.ports, linkPort{name: name, sw: sw, series: series})
	for len(l.sampling) <= sw {
		l.sampling = append(l.sampling, nil)
	}
	l.sampling[sw] = series.sw
}

// record takes a rate sample at now.
func (l *linkTable) record(now clock.Time) {
	l.at = append(l.at, now)
	for _, sw := range l.sampling {
		at := clock.Time(-1)
		if sw != nil && sw.seen {
			at = sw.latest
		}
		l.sampled = append(l.sampled, at)
	}
}

// each calls fn with every row, in time order and the lab's port order within a rate
// sample; a port not sampled yet at a rate sample has no row there.
func (l *linkTable) each(fn func(LinkSample)) {
	cursors := make([]changeCursor, len(l.ports))
	for i, p := range l.ports {
		cursors[i] = p.series.changes.cursor()
	}
	for k, t := range l.at {
		for i, p := range l.ports {
			sampled := l.sampled[k*len(l.sampling)+p.sw]
			if sampled < 0 {
				continue
			}
			c := &cursors[i]
			c.advance(sampled)
			fn(LinkSample{T: t, Port: p.name, Sampled: sampled, Bytes: c.cur.Bytes, TxBytes: c.cur.TxBytes})
		}
	}
}

// starPorts names the star's switch ports: port i leads to host i.
func starPorts(hosts int) []string {
	names := make([]string, hosts)
	for i := range names {
		names[i] = fmt.Sprintf("s1:p%d", i)
	}
	return names
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
