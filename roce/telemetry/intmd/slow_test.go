package intmd

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// hopWordsSlow is HopWords from the table of each bit's size.
func hopWordsSlow(bitmap, domain, dsInst uint16) int {
	sizes := [16]int{1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	n := 0
	for i := range 16 {
		if bitmap&(1<<(15-i)) != 0 {
			n += sizes[i]
		}
	}
	if domain == DomainHPCC {
		if dsInst&DSTxBytes != 0 {
			n += 2
		}
		if dsInst&DSLineRate != 0 {
			n++
		}
	}
	return n
}

// TestHopCodingMatchesSlow checks HopWords, writeHop and readHop, which visit only
// the set bits of a bitmap, against a walk of all sixteen bits, for every bitmap and
// every DS instruction set, with and without the HPCC domain: the same bytes, and the
// same hop read back from random bytes (all-ones fields included).
func TestHopCodingMatchesSlow(t *testing.T) {
	h := telemetrytest.Hop(3)
	h.IngressPort, h.Has = 7, h.Has|telemetry.FieldTxUtil
	rng := rand.New(rand.NewPCG(1, 2))
	fast, slow := make([]byte, 4*40), make([]byte, 4*40)
	var got, want telemetry.Hop
	for bitmap := range 1 << 16 {
		for _, domain := range []uint16{DomainHPCC, 1} {
			for ds := range uint16(4) {
				bm, dsInst := uint16(bitmap), ds<<14
				n := hopWordsSlow(bm, domain, dsInst)
				if got := HopWords(bm, domain, dsInst); got != n {
					t.Fatalf("HopWords(%#04x, %#x, %#04x) = %d, want %d", bm, domain, dsInst, got, n)
				}
				clear(fast)
				clear(slow)
				writeHop(fast[:4*n], bm, domain, dsInst, &h)
				writeHopSlow(slow[:4*n], bm, domain, dsInst, &h)
				if !bytes.Equal(fast, slow) {
					t.Fatalf("writeHop(%#04x, %#x, %#04x) = %x, want %x", bm, domain, dsInst, fast[:4*n], slow[:4*n])
				}
				for i := 0; i < 4*n; i += 4 {
					v := rng.Uint32()
					if rng.IntN(4) == 0 {
						v = 0xFFFFFFFF
					}
					binary.BigEndian.PutUint32(fast[i:], v)
				}
				readHop(fast[:4*n], bm, domain, dsInst, &got)
				readHopSlow(fast[:4*n], bm, domain, dsInst, &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("readHop(%x, %#04x, %#x, %#04x) = %+v, want %+v", fast[:4*n], bm, domain, dsInst, got, want)
				}
			}
		}
	}
}

// writeHopSlow is writeHop as a walk of all sixteen bits, the reference it is
// checked against: it encodes one hop's metadata into b (Hop ML words). Values that do not fit
// their field saturate just below all ones, which means "not supplied".
func writeHopSlow(b []byte, bitmap, domain, dsInst uint16, h *telemetry.Hop) {
	p := 0
	put32 := func(v uint32) { binary.BigEndian.PutUint32(b[p:], v); p += 4 }
	put64 := func(v uint64) { binary.BigEndian.PutUint64(b[p:], v); p += 8 }
	for i := range 16 {
		bit := uint16(1) << (15 - i)
		if bitmap&bit == 0 {
			continue
		}
		switch bit {
		case InstNodeID:
			put32(h.SwitchID)
		case InstL1Ports:
			put32(uint32(telemetry.Saturate(uint64(h.IngressPort), 0xFFFE))<<16 |
				uint32(telemetry.Saturate(uint64(h.PortID), 0xFFFE)))
		case InstHopLatency:
			put32(h.HopLatency)
		case InstQueue:
			put32(uint32(h.QueueID)<<24 | uint32(telemetry.Saturate(h.QLen, 0xFFFFFE)))
		case InstIngressTS:
			put64(h.IngressTS)
		case InstEgressTS:
			put64(h.TS)
		case InstL2Ports:
			put64(uint64(h.IngressPort)<<32 | uint64(h.PortID))
		case InstTxUtil:
			if h.Has&telemetry.FieldTxUtil != 0 {
				put32(h.TxUtil)
			} else {
				put32(0xFFFFFFFF)
			}
		case InstBuffer:
			put32(uint32(h.BufferID)<<24 | uint32(telemetry.Saturate(uint64(h.BufferOcc), 0xFFFFFE)))
		default: // reserved bits and the checksum complement: not supplied
			put32(0xFFFFFFFF)
		}
	}
	if domain != DomainHPCC {
		return
	}
	if dsInst&DSTxBytes != 0 {
		put64(h.TxBytes)
	}
	if dsInst&DSLineRate != 0 {
		put32(uint32(telemetry.Saturate(h.Rate/1e6, 0xFFFFFFFE)))
	}
}

// readHopSlow is readHop as a walk of all sixteen bits: it decodes one hop's
// metadata from b. A field whose bits are all ones was not
// supplied: it is left out of Has and never overrides the same value read from
// another field (the L1 and L2 port IDs).
func readHopSlow(b []byte, bitmap, domain, dsInst uint16, h *telemetry.Hop) {
	*h = telemetry.Hop{}
	p := 0
	get32 := func() uint32 { v := binary.BigEndian.Uint32(b[p:]); p += 4; return v }
	get64 := func() uint64 { v := binary.BigEndian.Uint64(b[p:]); p += 8; return v }
	port := func(f telemetry.Field, v, allOnes uint32) {
		if v == allOnes {
			return
		}
		if f == telemetry.FieldIngressPort {
			h.IngressPort = v
		} else {
			h.PortID = v
		}
		h.Has |= f
	}
	for i := range 16 {
		bit := uint16(1) << (15 - i)
		if bitmap&bit == 0 {
			continue
		}
		switch bit {
		case InstNodeID:
			if v := get32(); v != 0xFFFFFFFF {
				h.SwitchID = v
				h.Has |= telemetry.FieldSwitchID
			}
		case InstL1Ports:
			v := get32()
			port(telemetry.FieldIngressPort, v>>16, 0xFFFF)
			port(telemetry.FieldEgressPort, v&0xFFFF, 0xFFFF)
		case InstHopLatency:
			if v := get32(); v != 0xFFFFFFFF {
				h.HopLatency = v
				h.Has |= telemetry.FieldHopLatency
			}
		case InstQueue:
			v := get32()
			h.QueueID = uint8(v >> 24)
			h.Has |= telemetry.FieldQueueID
			if occ := v & 0xFFFFFF; occ != 0xFFFFFF {
				h.QLen = uint64(occ)
				h.Has |= telemetry.FieldQLen
			}
		case InstIngressTS:
			if v := get64(); v != 0xFFFFFFFFFFFFFFFF {
				h.IngressTS = v
				h.Has |= telemetry.FieldIngressTS
			}
		case InstEgressTS:
			if v := get64(); v != 0xFFFFFFFFFFFFFFFF {
				h.TS = v
				h.Has |= telemetry.FieldTS
			}
		case InstL2Ports:
			v := get64()
			port(telemetry.FieldIngressPort, uint32(v>>32), 0xFFFFFFFF)
			port(telemetry.FieldEgressPort, uint32(v), 0xFFFFFFFF)
		case InstTxUtil:
			if v := get32(); v != 0xFFFFFFFF {
				h.TxUtil = v
				h.Has |= telemetry.FieldTxUtil
			}
		case InstBuffer:
			v := get32()
			h.BufferID = uint8(v >> 24)
			if occ := v & 0xFFFFFF; occ != 0xFFFFFF {
				h.BufferOcc = occ
				h.Has |= telemetry.FieldBufferOcc
			}
		case InstChecksum:
			if v := get32(); v != 0xFFFFFFFF {
				h.Checksum = v
				h.Has |= telemetry.FieldChecksum
			}
		default:
			p += 4
		}
	}
	if domain != DomainHPCC {
		return
	}
	if dsInst&DSTxBytes != 0 {
		if v := get64(); v != 0xFFFFFFFFFFFFFFFF {
			h.TxBytes = v
			h.Has |= telemetry.FieldTxBytes
		}
	}
	if dsInst&DSLineRate != 0 {
		if v := get32(); v != 0xFFFFFFFF {
			h.Rate = uint64(v) * 1e6
			h.Has |= telemetry.FieldRate
		}
	}
}
