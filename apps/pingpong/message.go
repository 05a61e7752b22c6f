package pingpong

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/roce"
)

// MessageSize is the size of one out-of-band message, NUL included:
// sizeof "0000:000000:000000:00000000000000000000000000000000" in rdma-core.
const MessageSize = 52

// SRQMessages is how many messages srq_pingpong exchanges in each direction whatever
// -q says: rdma-core's MAX_QP, the unused entries all zeros.
const SRQMessages = 256

// Dest is one QP's address as the pingpong examples exchange it (struct pingpong_dest).
type Dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID roce.GID
}

// WireGID formats a GID as rdma-core's gid_to_wire_gid does: 32 lowercase hex digits,
// the 16 bytes in wire order.
func WireGID(g roce.GID) string { return hex.EncodeToString(g[:]) }

// Encode formats d as "%04x:%06x:%06x:%s" plus the terminating NUL, in 52 bytes.
func (d Dest) Encode() [MessageSize]byte {
	var m [MessageSize]byte
	copy(m[:], fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN, d.PSN, WireGID(d.GID)))
	return m
}

// DecodeDest parses a message as rdma-core's sscanf("%x:%x:%x:%s") and
// wire_gid_to_gid do, but refuses what they would misread: a missing field, a
// non-hex digit or a GID of other than 32 hex digits.
func DecodeDest(m []byte) (Dest, error) {
	s := string(m)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 {
		return Dest{}, fmt.Errorf("malformed address message %q: want LID:QPN:PSN:GID", s)
	}
	var v [3]uint64
	for i, lim := range []int{16, 24, 24} {
		x, err := strconv.ParseUint(f[i], 16, lim)
		if err != nil {
			return Dest{}, fmt.Errorf("malformed address message %q: field %d: %v", s, i+1, err)
		}
		v[i] = x
	}
	var d Dest
	d.LID, d.QPN, d.PSN = uint16(v[0]), uint32(v[1]), uint32(v[2])
	if len(f[3]) != 32 {
		return Dest{}, fmt.Errorf("malformed address message %q: GID has %d hex digits, want 32", s, len(f[3]))
	}
	if _, err := hex.Decode(d.GID[:], []byte(f[3])); err != nil {
		return Dest{}, fmt.Errorf("malformed address message %q: GID: %v", s, err)
	}
	return d, nil
}

// Global reports whether a GRH is used to reach d: rdma-core adds one only when the
// GID's interface-id half (bytes 8..15) is non-zero.
func (d Dest) Global() bool {
	for _, b := range d.GID[8:] {
		if b != 0 {
			return true
		}
	}
	return false
}
