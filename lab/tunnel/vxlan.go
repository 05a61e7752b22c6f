// Package tunnel carries a lab's links between lab processes: a link whose two ends run
// in two parts of a lab (topo.Topology.Tunnels) becomes a VXLAN tunnel (RFC 7348, UDP
// 4789, one VNI per link) between the parts' underlay addresses, behind the same
// link.Endpoint a node attaches to in process. Parts find and authenticate each other
// over a control channel (TCP 4790) keyed by the lab's secret (control.go).
package tunnel

import (
	"encoding/binary"
	"errors"
)

// Ports of the underlay.
const (
	// VXLANPort is the IANA port of VXLAN (RFC 7348 §5).
	VXLANPort = 4789
	// ControlPort is where a part listens for the other parts' control connections.
	ControlPort = 4790
)

// The datagram: an RFC 7348 VXLAN header, the inner Ethernet frame as the lab's nodes
// send it (RoCEv2, telemetry and CNPs unchanged), and a trailer of rocelab's.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|R|R|R|R|I|R|R|R|            Reserved                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                VXLAN Network Identifier (VNI) |   Reserved    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   inner Ethernet frame (destination MAC ... payload, no FCS)  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      magic "rlT1"                             |
//	|                      sequence number                          |
//	|              arrival time (ns, sender's wall clock)           |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The trailer lies after the inner IP packet's own length, so a dissector shows it as
// the inner frame's Ethernet trailer and decodes everything before it unchanged. It
// carries the moment the frame's last bit arrives at the far end in the link's model
// (its departure plus the declared delay), so the receiving part releases it then, and
// a per-tunnel, per-direction sequence number that counts what the underlay lost.
const (
	HeaderLen  = 8
	TrailerLen = 16
	// Overhead is what a datagram adds to its inner frame.
	Overhead = HeaderLen + TrailerLen
	flagVNI  = 0x08
)

var magic = [4]byte{'r', 'l', 'T', '1'}

// Datagram is a decoded tunnel datagram. Frame aliases the decoded bytes.
type Datagram struct {
	VNI     uint32
	Seq     uint32
	Arrival int64 // ns of the sender's wall clock (Unix time)
	Frame   []byte
}

// Errors of Decode.
var (
	ErrShort   = errors.New("tunnel: datagram shorter than a VXLAN header, an Ethernet header and the trailer")
	ErrFlags   = errors.New("tunnel: VXLAN flags without the I bit (0x08), or reserved bits set")
	ErrTrailer = errors.New("tunnel: datagram without rocelab's trailer")
)

// minFrame is the shortest inner frame: an Ethernet header.
const minFrame = 14

// Append appends the datagram carrying frame to dst and returns it.
func Append(dst []byte, vni, seq uint32, arrival int64, frame []byte) []byte {
	var h [HeaderLen]byte
	h[0] = flagVNI
	binary.BigEndian.PutUint32(h[4:], vni<<8)
	dst = append(dst, h[:]...)
	dst = append(dst, frame...)
	var t [TrailerLen]byte
	copy(t[:4], magic[:])
	binary.BigEndian.PutUint32(t[4:], seq)
	binary.BigEndian.PutUint64(t[8:], uint64(arrival))
	return append(dst, t[:]...)
}

// Decode parses a datagram. It never panics and allocates nothing; anything that is
// not a datagram Append made is an error.
func Decode(b []byte) (Datagram, error) {
	if len(b) < Overhead+minFrame {
		return Datagram{}, ErrShort
	}
	// RFC 7348: the I flag must be set, the other flag bits and the reserved fields
	// are zero on transmission; a receiver ignores them, but a lab's parts send
	// nothing else, so anything else is not ours.
	if b[0] != flagVNI || b[1]|b[2]|b[3]|b[7] != 0 {
		return Datagram{}, ErrFlags
	}
	t := b[len(b)-TrailerLen:]
	if [4]byte(t[:4]) != magic {
		return Datagram{}, ErrTrailer
	}
	return Datagram{
		VNI:     binary.BigEndian.Uint32(b[4:]) >> 8,
		Seq:     binary.BigEndian.Uint32(t[4:]),
		Arrival: int64(binary.BigEndian.Uint64(t[8:])),
		Frame:   b[HeaderLen : len(b)-TrailerLen],
	}, nil
}
