package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/roce"
)

// Sizes of perftest 4.5-0.17's out-of-band messages (without -R).
const (
	VersionString = "6.06"
	VersionSize   = 16  // MAX_VERSION: NUL-padded
	KeyMsgSize    = 108 // KEY_PRINT_FMT_GID plus NUL
	DoneSize      = 5   // "done\0"
	CycleBuffer   = 4096
	CacheLine     = 64
)

// KeyMsg is one QP's key message (struct pingpong_dest as perftest sends it).
type KeyMsg struct {
	LID      uint16
	OutReads uint16
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits
	RKey     uint32
	VAddr    uint64
	GID      roce.GID
	SRQN     uint32
}

// Encode formats k as "%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 × "%02x:" + "%08x:" and
// a NUL: 108 bytes.
func (k KeyMsg) Encode() [KeyMsgSize]byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", k.LID, k.OutReads, k.QPN, k.PSN, k.RKey, k.VAddr)
	for _, x := range k.GID {
		fmt.Fprintf(&b, "%02x:", x)
	}
	fmt.Fprintf(&b, "%08x:", k.SRQN)
	var m [KeyMsgSize]byte
	copy(m[:], b.String())
	return m
}

// DecodeKeyMsg parses a key message (as perftest's sscanf with KEY_PRINT_FMT_GID).
func DecodeKeyMsg(m []byte) (KeyMsg, error) {
	s := string(m)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f := strings.Split(strings.TrimSuffix(s, ":"), ":")
	if len(f) != 6+16+1 {
		return KeyMsg{}, fmt.Errorf("malformed key message %q: %d fields, want 23", s, len(f))
	}
	var v [6]uint64
	for i, bits := range []int{16, 16, 24, 24, 32, 64} {
		x, err := strconv.ParseUint(f[i], 16, bits)
		if err != nil {
			return KeyMsg{}, fmt.Errorf("malformed key message %q: field %d: %v", s, i+1, err)
		}
		v[i] = x
	}
	k := KeyMsg{LID: uint16(v[0]), OutReads: uint16(v[1]), QPN: uint32(v[2]), PSN: uint32(v[3]), RKey: uint32(v[4]), VAddr: v[5]}
	for i := range 16 {
		if len(f[6+i]) != 2 {
			return KeyMsg{}, fmt.Errorf("malformed key message %q: GID byte %d", s, i)
		}
		if _, err := hex.Decode(k.GID[i:i+1], []byte(f[6+i])); err != nil {
			return KeyMsg{}, fmt.Errorf("malformed key message %q: GID byte %d: %v", s, i, err)
		}
	}
	x, err := strconv.ParseUint(f[22], 16, 32)
	if err != nil {
		return KeyMsg{}, fmt.Errorf("malformed key message %q: SRQN: %v", s, err)
	}
	k.SRQN = uint32(x)
	return k, nil
}

// BWReport is what the two sides exchange after a bandwidth test (struct
// bw_report_data): five 8-byte big-endian values, one exchange each.
type BWReport struct {
	Size, Iters            uint64
	BWPeak, BWAvg, MsgRate float64
}

// Words returns the report's five values as they go on the wire, in order.
func (r BWReport) Words() [5][8]byte {
	var w [5][8]byte
	be := binary.BigEndian
	be.PutUint64(w[0][:], r.Size)
	be.PutUint64(w[1][:], r.Iters)
	be.PutUint64(w[2][:], math.Float64bits(r.BWPeak))
	be.PutUint64(w[3][:], math.Float64bits(r.BWAvg))
	be.PutUint64(w[4][:], math.Float64bits(r.MsgRate))
	return w
}

// ReportFromWords decodes Words.
func ReportFromWords(w [5][8]byte) BWReport {
	be := binary.BigEndian
	return BWReport{Size: be.Uint64(w[0][:]), Iters: be.Uint64(w[1][:]), BWPeak: math.Float64frombits(be.Uint64(w[2][:])),
		BWAvg: math.Float64frombits(be.Uint64(w[3][:])), MsgRate: math.Float64frombits(be.Uint64(w[4][:]))}
}

// EncodeVersion is the 16-byte version message.
func EncodeVersion(v string) [VersionSize]byte {
	var b [VersionSize]byte
	copy(b[:VersionSize-1], v)
	return b
}

// EncodeMTU is the 2-byte MTU message: the ibv_mtu enum's digit and a NUL.
func EncodeMTU(m roce.MTU) [2]byte { return [2]byte{byte('0' + m.Enum()), 0} }

// DecodeMTU parses the MTU message.
func DecodeMTU(b []byte) (roce.MTU, error) {
	if len(b) < 1 || b[0] < '1' || b[0] > '5' {
		return 0, fmt.Errorf("malformed MTU message %q", b)
	}
	return roce.MTUFromEnum(int(b[0] - '0'))
}

// comm is the out-of-band channel: the client writes first at every step and the
// server answers with as many bytes (ctx_xchg_data).
type comm struct {
	c      net.Conn
	client bool
}

func (m *comm) xchg(mine []byte) ([]byte, error) {
	theirs := make([]byte, len(mine))
	if m.client {
		if _, err := m.c.Write(mine); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(m.c, theirs); err != nil {
			return nil, err
		}
		return theirs, nil
	}
	if _, err := io.ReadFull(m.c, theirs); err != nil {
		return nil, err
	}
	if _, err := m.c.Write(mine); err != nil {
		return nil, err
	}
	return theirs, nil
}

func (m *comm) handShake(k KeyMsg) (KeyMsg, error) {
	e := k.Encode()
	b, err := m.xchg(e[:])
	if err != nil {
		return KeyMsg{}, fmt.Errorf("Failed to exchange data between server and clients: %w", err)
	}
	return DecodeKeyMsg(b)
}

func (m *comm) xchgReports(r BWReport) (BWReport, error) {
	var theirs [5][8]byte
	for i, w := range r.Words() {
		b, err := m.xchg(w[:])
		if err != nil {
			return BWReport{}, fmt.Errorf("Failed to exchange data between server and clients: %w", err)
		}
		copy(theirs[i][:], b)
	}
	return ReportFromWords(theirs), nil
}

// close is ctx_close_connection: a last handshake, then "done\0" each way. The peer
// may close first; that is not an error at this point (perftest only says so).
func (m *comm) close(k KeyMsg) {
	if _, err := m.handShake(k); err == nil {
		m.c.Write([]byte("done\x00"))
		var b [DoneSize]byte
		io.ReadFull(m.c, b[:])
	}
	m.c.Close()
}
