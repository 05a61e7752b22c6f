package roce

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestFrameICRCEveryTail: the ICRC of a frame, which may run the CRC from the 8 bytes
// before the IP header (masked to the LRH's ones) to leave a shorter tail, equals the
// ICRC over the IP packet alone, for every payload length modulo 16, over IPv4 and
// IPv6, with and without a VLAN tag; and both leave every byte of the frame as it was.
func TestFrameICRCEveryTail(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, vlan := range []bool{false, true} {
			for payload := 4064; payload <= 4096; payload++ {
				frame := writeFirst(t, v6, 0)
				var b Builder
				var p Packet
				if err := p.Decode(frame); err != nil {
					t.Fatal(err)
				}
				b.From(&p)
				b.VLAN, b.VLANTCI = vlan, 0x6005
				b.Payload = make([]byte, payload)
				for i := range b.Payload {
					b.Payload[i] = byte(i*31 + payload)
				}
				buf := make([]byte, 4300)
				n, err := b.Build(buf)
				if err != nil {
					t.Fatal(err)
				}
				frame = buf[:n]
				if err := p.Decode(frame); err != nil {
					t.Fatal(err)
				}
				before := bytes.Clone(frame)
				l3 := bytes.Clone(p.L3())
				want := ICRC(l3, p.udpOff-p.l3Off)
				if got := p.ComputeICRC(); got != want || ReadICRC(p.ICRC) != want {
					t.Fatalf("v6 %v vlan %v payload %d: frame ICRC %#x, built %#x, IP packet alone %#x", v6, vlan, payload, got, ReadICRC(p.ICRC), want)
				}
				if !bytes.Equal(frame, before) {
					t.Fatalf("v6 %v vlan %v payload %d: ComputeICRC changed the frame", v6, vlan, payload)
				}
			}
		}
	}
}

// TestIPv4ChecksumRFC1071: the header checksum summed in 32-bit words equals RFC 1071's
// sum of 16-bit words, for random headers of every length (options included), and a
// header carrying its checksum sums to all ones.
func TestIPv4ChecksumRFC1071(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		ihl := 5 + rng.IntN(11)
		h := make(IPv4, ihl*4)
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		h[0] = 0x40 | byte(ihl)
		var sum uint32
		for i := 0; i < len(h); i += 2 {
			if i != 10 {
				sum += uint32(binary.BigEndian.Uint16(h[i:]))
			}
		}
		for sum > 0xFFFF {
			sum = sum&0xFFFF + sum>>16
		}
		if got, want := h.CalculateChecksum(), ^uint16(sum); got != want {
			t.Fatalf("header % x: checksum %#04x, RFC 1071 %#04x", []byte(h), got, want)
		}
		h.UpdateChecksum()
		sum = 0
		for i := 0; i < len(h); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
		for sum > 0xFFFF {
			sum = sum&0xFFFF + sum>>16
		}
		if sum != 0xFFFF {
			t.Fatalf("header % x with its checksum sums to %#04x, not 0xffff", []byte(h), sum)
		}
	}
}

// TestIPv4AdjustChecksum: after any change of one 16-bit word of a header whose
// checksum is right, the incremental update (RFC 1624) equals the checksum summed
// again, for every word the codecs change (TOS, total length, TTL and protocol).
func TestIPv4AdjustChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200000 {
		h := make(IPv4, IPv4MinSize)
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		h[0] = 0x45
		if i%1000 == 0 { // headers whose sum is all ones or all zeros but for one word
			clear(h[1:])
		}
		h.UpdateChecksum()
		off := []int{0, 2, 8}[i%3]
		old := binary.BigEndian.Uint16(h[off:])
		binary.BigEndian.PutUint16(h[off:], uint16(rng.Uint32()))
		if off == 0 {
			h[0] = 0x45
		}
		h.AdjustChecksum(off, old)
		if got, want := h.Checksum(), h.CalculateChecksum(); got != want {
			t.Fatalf("header % x: word %d changed from %#04x: adjusted %#04x, summed %#04x", []byte(h), off, old, got, want)
		}
	}
}
