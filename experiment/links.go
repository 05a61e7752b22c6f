package experiment

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce/telemetry"
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

// newPortSeries returns the series of a port sampled every every on sw's sampling,
// its change points spilling to spill (nil: held in memory).
func newPortSeries(every time.Duration, sw *sampling, spill *scratch) portSeries {
	return portSeries{every: clock.Time(every), sw: sw, changes: changeLog{spill: spill}}
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
// a long series is never copied to grow. A log with a scratch file (spill) holds at
// most spillChunk bytes in memory: its full chunks go to the file as segments.
type changeLog struct {
	chunks   [][]byte // in memory, after the segments
	spill    *scratch
	segments []segment   // spilled, in order
	n        int         // changes stored
	last     QueueSample // the last change stored, the base of the next one's differences
}

// segment is a stretch of a changeLog's encoding in its scratch file.
type segment struct {
	off int64
	n   int
}

// The first chunk of a changeLog and the size its chunks double up to.
const (
	minChunk = 64
	maxChunk = 32 << 10
)

// add appends q.
func (l *changeLog) add(q QueueSample) {
	var buf [3 * binary.MaxVarintLen64]byte
	b := binary.AppendVarint(buf[:0], int64(q.T-l.last.T))
	b = binary.AppendVarint(b, int64(q.Bytes-l.last.Bytes))
	b = binary.AppendVarint(b, int64(q.TxBytes-l.last.TxBytes)) // wraps back on decoding
	k := len(l.chunks) - 1
	if k < 0 || len(l.chunks[k])+len(b) > cap(l.chunks[k]) {
		if k >= 0 && l.spill != nil && cap(l.chunks[k]) >= spillChunk {
			l.spillChunks()
			k = 0
		} else {
			size := minChunk
			if k >= 0 {
				size = min(2*cap(l.chunks[k]), maxChunk)
			}
			l.chunks = append(l.chunks, make([]byte, 0, size))
			k++
		}
	}
	l.chunks[k] = append(l.chunks[k], b...)
	l.last = q
	l.n++
}

// spillChunks moves the chunks in memory to the scratch file as one segment and
// keeps the last, emptied, for the changes to come.
func (l *changeLog) spillChunks() {
	var seg []byte
	if len(l.chunks) == 1 {
		seg = l.chunks[0]
	} else {
		for _, c := range l.chunks {
			seg = append(seg, c...)
		}
	}
	l.segments = append(l.segments, segment{off: l.spill.write(seg), n: len(seg)})
	last := l.chunks[len(l.chunks)-1][:0]
	l.chunks = append(l.chunks[:0], last)
}

// len is the number of changes stored.
func (l *changeLog) len() int { return l.n }

// changeCursor walks a changeLog in time order: cur is the change in effect at the
// instant it was last advanced to, next the one after it while ahead. A log's
// cursors are walked once the log is complete.
type changeCursor struct {
	log   *changeLog
	part  int    // the next part of the log to decode: its segments, then its chunks
	buf   []byte // the rest of the part being decoded
	own   []byte // a segment read back
	read  int    // changes decoded
	ahead bool
	next  QueueSample
	cur   QueueSample
}

// cursor returns a cursor before the first change (next is the first change).
func (l *changeLog) cursor() changeCursor {
	c := changeCursor{log: l}
	c.step()
	return c
}

// step decodes the change after next into next; ahead is false at the end (or when
// the scratch file cannot be read: its Err says so).
func (c *changeCursor) step() {
	if c.ahead = c.read < c.log.n; !c.ahead {
		return
	}
	for len(c.buf) == 0 {
		if c.ahead = c.load(); !c.ahead {
			return
		}
	}
	dt, n1 := varint(c.buf)
	dq, n2 := varint(c.buf[n1:])
	dx, n3 := varint(c.buf[n1+n2:])
	c.buf = c.buf[n1+n2+n3:]
	c.next = QueueSample{T: c.next.T + clock.Time(dt), Bytes: c.next.Bytes + int(dq), TxBytes: c.next.TxBytes + uint64(dx)}
	c.read++
}

// load makes the log's next part the one decoded.
func (c *changeCursor) load() bool {
	l := c.log
	switch k := c.part - len(l.segments); {
	case k < 0:
		s := l.segments[c.part]
		c.own = slices.Grow(c.own[:0], s.n)[:s.n]
		if !l.spill.read(s.off, c.own) {
			return false
		}
		c.buf = c.own
	case k < len(l.chunks):
		c.buf = l.chunks[k]
	default:
		return false
	}
	c.part++
	return true
}

// varint is binary.Varint with the one- and two-byte encodings, which hold nearly
// every difference of a series (a sample interval, a frame or two of queue), decoded
// inline: the metrics walk a run's series several times, a change at a time.
func varint(b []byte) (int64, int) {
	var u uint64
	switch {
	case len(b) > 0 && b[0] < 0x80:
		u = uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	case len(b) > 1 && b[1] < 0x80:
		u = uint64(b[0]&0x7F) | uint64(b[1])<<7
		return int64(u>>1) ^ -int64(u&1), 2
	}
	return binary.Varint(b)
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
	ports    []linkPort  // in the lab's order: by switch, then port
	sampling []*sampling // per switch (nil for one without ports)
	spill    *scratch    // where the instants go (nil: memory)
	at       changeLog   // the rate samples' instants (T)
	sampled  []changeLog // per switch, per rate sample: its latest sample's instant (T), or -1
}

// linkPort is one port of a linkTable.
type linkPort struct {
	name   string // s1:p0
	sw     int
	series *portSeries
}

// add adds a port of switch number sw (numbered from 0, in the lab's order), before
// the first rate sample.
func (l *linkTable) add(name string, sw int, series *portSeries) {
	l.ports = append(l.ports, linkPort{name: name, sw: sw, series: series})
	for len(l.sampling) <= sw {
		l.sampling = append(l.sampling, nil)
	}
	l.sampling[sw] = series.sw
}

// record takes a rate sample at now.
func (l *linkTable) record(now clock.Time) {
	if l.at.n == 0 {
		l.at.spill = l.spill
		l.sampled = make([]changeLog, len(l.sampling))
		for i := range l.sampled {
			l.sampled[i].spill = l.spill
		}
	}
	l.at.add(QueueSample{T: now})
	for i, sw := range l.sampling {
		at := clock.Time(-1)
		if sw != nil && sw.seen {
			at = sw.latest
		}
		l.sampled[i].add(QueueSample{T: at})
	}
}

// each calls fn with every row, in time order and the lab's port order within a rate
// sample; a port not sampled yet at a rate sample has no row there.
func (l *linkTable) each(fn func(LinkSample)) {
	cursors := make([]changeCursor, len(l.ports))
	for i, p := range l.ports {
		cursors[i] = p.series.changes.cursor()
	}
	switches := make([]changeCursor, len(l.sampled))
	for i := range l.sampled {
		switches[i] = l.sampled[i].cursor()
	}
	for at := l.at.cursor(); at.ahead; at.step() {
		for i, p := range l.ports {
			sampled := switches[p.sw].next.T
			if sampled < 0 {
				continue
			}
			c := &cursors[i]
			c.advance(sampled)
			fn(LinkSample{T: at.next.T, Port: p.name, Sampled: sampled, Bytes: c.cur.Bytes, TxBytes: c.cur.TxBytes})
		}
		for i := range switches {
			switches[i].step()
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
		Buffer: c.Buffer, Telemetry: telemetry.NoTelemetry, CongestionControl: c.CC.CCName()}
	if p.CongestionControl == rnic.CCHPCC {
		if _, err := telemetry.ParseFormat(string(c.Telemetry)); err != nil || c.Telemetry == "" {
			return p, fmt.Errorf("experiment: --telemetry %q: want %s", c.Telemetry, strings.Join(telemetry.FormatNames(), ", "))
		}
		p.Telemetry = c.Telemetry.Name()
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
