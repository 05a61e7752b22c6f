package roce

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// slowICRC is the reference: copy the packet, set the masked fields to ones, prepend
// eight 0xFF bytes and run crc32 over the lot, exactly as WIRE.md states the rule.
func slowICRC(l3 []byte, udp int) uint32 {
	c := append(bytes.Repeat([]byte{0xFF}, 8), l3...)
	h := c[8:]
	if h[0]>>4 == 4 {
		h[1], h[8], h[10], h[11] = 0xFF, 0xFF, 0xFF, 0xFF
	} else {
		h[0] |= 0x0F
		h[1], h[2], h[3], h[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	h[udp+6], h[udp+7] = 0xFF, 0xFF
	h[udp+UDPSize+4] = 0xFF
	return crc32.ChecksumIEEE(c)
}

// TestICRCAgainstReference cross-checks ICRC with slowICRC on random packets and
// checks that ICRC leaves its input as it found it.
func TestICRCAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		v6 := i%2 == 1
		hdr := IPv4MinSize
		if v6 {
			hdr = IPv6Size
		}
		l3 := make([]byte, hdr+UDPSize+BTHSize+rng.IntN(300))
		for j := range l3 {
			l3[j] = byte(rng.Uint32())
		}
		if v6 {
			l3[0] = 0x60 | l3[0]&0x0F
		} else {
			l3[0] = 0x45
		}
		orig := append([]byte(nil), l3...)
		if got, want := ICRC(l3, hdr), slowICRC(l3, hdr); got != want {
			t.Fatalf("packet %d: ICRC %#x, reference %#x", i, got, want)
		}
		if !bytes.Equal(l3, orig) {
			t.Fatalf("packet %d: ICRC modified its input", i)
		}
	}
}
