package topo

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/fabric/link"
)

// The HPCC authors' ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control,
// simulation/mix/*.txt, read by its scratch/third.cc) describes a topology as plain
// text:
//
//	nodes switches links
//	id id …                      (the switches' node IDs; the other nodes are hosts)
//	a b rate delay error_rate    (one line per link: 100Gbps 1000ns 0)
//
// ParseNS3 reads it into a Topology whose hosts are named h<id> and switches s<id>
// after their node IDs (hosts in ID order, which also orders their addresses); the
// error rate becomes the link's loss. WriteNS3 writes a Topology back, numbering the
// hosts from 0 in their order and the switches after them, as the simulator's own
// files do.

// ParseNS3 reads a topology in the HPCC simulator's format; p gives what the format
// does not carry (MTU, buffers, telemetry, congestion control).
func ParseNS3(r io.Reader, p Params) (*Topology, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	// next returns the next non-blank line's fields.
	next := func() ([]string, bool) {
		for sc.Scan() {
			line++
			if f := strings.Fields(sc.Text()); len(f) > 0 {
				return f, true
			}
		}
		return nil, false
	}
	bad := func(format string, args ...any) error { return errorf(line, "ns-3 topology: "+format, args...) }
	head, ok := next()
	if !ok {
		return nil, bad("empty file: want \"nodes switches links\"")
	}
	counts, err := atois(head, 3)
	if err != nil {
		return nil, bad("first line %q: want \"nodes switches links\"", strings.Join(head, " "))
	}
	nodes, nswitches, nlinks := counts[0], counts[1], counts[2]
	if nodes < 2 || nodes > 1<<16 || nswitches < 0 || nswitches >= nodes || nlinks < 1 || nlinks > 1<<20 {
		return nil, bad("%d nodes, %d switches, %d links: want at least two nodes, fewer switches than nodes and at least one link", nodes, nswitches, nlinks)
	}
	isSwitch := make([]bool, nodes)
	var ids []int
	for len(ids) < nswitches {
		f, ok := next()
		if !ok {
			return nil, bad("%d of %d switch IDs", len(ids), nswitches)
		}
		got, err := atois(f, len(f))
		if err != nil {
			return nil, bad("switch IDs %q: want node numbers", strings.Join(f, " "))
		}
		ids = append(ids, got...)
	}
	if len(ids) != nswitches {
		return nil, bad("%d switch IDs, the first line says %d", len(ids), nswitches)
	}
	for _, id := range ids {
		if id < 0 || id >= nodes || isSwitch[id] {
			return nil, bad("switch ID %d: out of [0, %d) or repeated", id, nodes)
		}
		isSwitch[id] = true
	}
	b := newBuilder(p)
	for id := range nodes {
		if isSwitch[id] {
			b.sw(nodeName(id, true))
		} else {
			b.host(nodeName(id, false))
		}
	}
	for range nlinks {
		f, ok := next()
		if !ok {
			return nil, bad("%d of %d links", len(b.t.Links), nlinks)
		}
		if len(f) != 5 {
			return nil, bad("link %q: want \"a b rate delay error_rate\"", strings.Join(f, " "))
		}
		ends, err := atois(f[:2], 2)
		if err != nil || ends[0] < 0 || ends[0] >= nodes || ends[1] < 0 || ends[1] >= nodes || ends[0] == ends[1] {
			return nil, bad("link %q: endpoints must be two distinct nodes of [0, %d)", strings.Join(f, " "), nodes)
		}
		rate, err := ParseRate(f[2])
		if err != nil {
			return nil, bad("link rate: %v", err)
		}
		delay, err := ParseDuration(f[3])
		if err != nil {
			return nil, bad("link delay: %v", err)
		}
		loss, err := strconv.ParseFloat(f[4], 64)
		if err != nil || !(loss >= 0 && loss <= 1) {
			return nil, bad("error rate %q: want a probability", f[4])
		}
		a, z := nodeName(ends[0], isSwitch[ends[0]]), nodeName(ends[1], isSwitch[ends[1]])
		b.t.Links = append(b.t.Links, Link{Endpoints: [2]string{a, z}, Rate: rate, Delay: delay, MTU: b.p.MTU,
			Faults: link.Faults{Loss: loss}, Line: line})
	}
	if f, ok := next(); ok {
		return nil, bad("%q after the %d links", strings.Join(f, " "), nlinks)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ns-3 topology: %w", err)
	}
	return b.done()
}

// WriteNS3 writes t in the HPCC simulator's topology format.
func (t *Topology) WriteNS3(w io.Writer) error {
	id := map[string]int{}
	for i, h := range t.Hosts {
		id[h.Name] = i
	}
	for i, s := range t.Switches {
		id[s.Name] = len(t.Hosts) + i
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%d %d %d\n", len(t.Hosts)+len(t.Switches), len(t.Switches), len(t.Links))
	for i := range t.Switches {
		if i > 0 {
			bw.WriteByte(' ')
		}
		bw.WriteString(strconv.Itoa(len(t.Hosts) + i))
	}
	bw.WriteByte('\n')
	for _, l := range t.Links {
		fmt.Fprintf(bw, "%d %d %sbps %dns %s\n", id[l.Endpoints[0]], id[l.Endpoints[1]], FormatRate(l.Rate),
			l.Delay.Nanoseconds(), strconv.FormatFloat(l.Faults.Loss, 'f', -1, 64))
	}
	return bw.Flush()
}

// NS3NodeID returns the simulator's node ID a host of a topology ParseNS3 read was
// named after, and false for other names.
func NS3NodeID(name string) (int, bool) {
	if !strings.HasPrefix(name, "h") {
		return 0, false
	}
	id, err := strconv.Atoi(name[1:])
	return id, err == nil && id >= 0
}

func nodeName(id int, isSwitch bool) string {
	if isSwitch {
		return "s" + strconv.Itoa(id)
	}
	return "h" + strconv.Itoa(id)
}

// atois parses want integers.
func atois(f []string, want int) ([]int, error) {
	if len(f) != want {
		return nil, fmt.Errorf("want %d numbers, got %d", want, len(f))
	}
	out := make([]int, want)
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}
