package fabric

// fib maps a destination MAC address to the index of its route (Switch.routes).
//
// The addresses rocelab gives hosts, 02:00:00:xx:xx:xx with a small host number in
// the low bits (topo.Validate), sit in a slice indexed by that number: one load from
// an array of 4-byte entries, where a map of 1,024 entries (a switch of the 1,024-host
// fat tree, looked up twice per frame) was 5% of a simulation's CPU in hashing and
// probing. Every other address sits in a map. Learned entries are bounded
// (maxLearned): a host may send frames from any source address, and a switch must
// not grow without bound for it; past the bound it stops learning, and frames to
// addresses it has not learned are flooded, as a hardware switch whose table is full
// does.
type fib struct {
	dense   []uint32          // route index + 1 by host number; 0: no route
	other   map[uint64]uint32 // by macKey
	learned int               // entries added by learning
}

const (
	// denseOUI is the top three bytes of the addresses kept in fib.dense.
	denseOUI = 0x02_00_00
	// maxDense bounds fib.dense: 256 KiB at most, for a network of up to 65,535 hosts.
	maxDense = 1 << 16
	// maxLearned bounds the entries a switch learns: 64 Ki, a hardware switch's table.
	maxLearned = 1 << 16
)

// macKey is a MAC address as an integer: it hashes several times faster than a
// 6-byte array.
func macKey(m [6]byte) uint64 {
	return uint64(m[0])<<40 | uint64(m[1])<<32 | uint64(m[2])<<24 | uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// denseIndex returns m's slot in fib.dense, or -1 if m is kept in the map.
func denseIndex(m [6]byte) int {
	k := macKey(m)
	if k>>24 != denseOUI || k&0xFF_FF_FF >= maxDense {
		return -1
	}
	return int(k & 0xFF_FF_FF)
}

// get returns the route index of m.
func (t *fib) get(m [6]byte) (uint32, bool) {
	if i := denseIndex(m); i >= 0 {
		if i < len(t.dense) && t.dense[i] != 0 {
			return t.dense[i] - 1, true
		}
		return 0, false
	}
	r, ok := t.other[macKey(m)]
	return r, ok
}

// set installs route as m's, replacing any entry.
func (t *fib) set(m [6]byte, route uint32) {
	if i := denseIndex(m); i >= 0 {
		if i >= len(t.dense) {
			t.dense = append(t.dense, make([]uint32, i+1-len(t.dense))...)
		}
		t.dense[i] = route + 1
		return
	}
	if t.other == nil {
		t.other = make(map[uint64]uint32)
	}
	t.other[macKey(m)] = route
}

// learn installs route as m's, learned from a frame m sent, unless maxLearned entries
// were learned already and m has none.
func (t *fib) learn(m [6]byte, route uint32) {
	if _, ok := t.get(m); !ok {
		if t.learned >= maxLearned {
			return
		}
		t.learned++
	}
	t.set(m, route)
}
