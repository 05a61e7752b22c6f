package fabric

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

func TestParseVLANIPv6PFC(t *testing.T) {
	// VLAN-tagged IPv6 with a Hop-by-Hop header (as IOAM adds) before UDP 4791.
	b := make([]byte, 14+4+40+8+8)
	binary.BigEndian.PutUint16(b[12:], roce.EtherTypeVLAN)
	binary.BigEndian.PutUint16(b[14:], 5<<13|100) // PCP 5, VID 100
	binary.BigEndian.PutUint16(b[16:], roce.EtherTypeIPv6)
	ip := b[18:]
	binary.BigEndian.PutUint32(ip, 6<<28|uint32(26<<2|2)<<20) // DSCP 26, ECT(0)
	ip[6] = 0                                                 // Hop-by-Hop
	ip[40], ip[41] = 17, 0                                    // next UDP, 8 bytes
	binary.BigEndian.PutUint16(ip[48:], 0xC001)
	binary.BigEndian.PutUint16(ip[50:], 4791)
	var h Headers
	if err := h.Parse(b); err != nil {
		t.Fatal(err)
	}
	if !h.VLAN || h.PCP != 5 || h.IPVersion != 6 || h.DSCP != 26 || h.ECN != 2 || h.Proto != 17 || h.SrcPort != 0xC001 || h.DstPort != 4791 {
		t.Fatalf("%+v", h)
	}
	if !setCE(b, &h) || h.Parse(b) != nil || h.ECN != 3 || h.DSCP != 26 {
		t.Fatalf("CE on IPv6: %+v", h)
	}

	var pfc [60]byte
	putPFC(pfc[:], MAC{2}, 1<<3, &[8]uint16{3: 0xFFFF})
	if err := h.Parse(pfc[:]); err != nil || !h.PFC || h.PFCEnable != 8 || h.PFCQuanta[3] != 0xFFFF {
		t.Fatalf("PFC: %+v %v", h, err)
	}
	if err := h.Parse(pfc[:20]); err == nil {
		t.Fatal("truncated PFC accepted")
	}
}

// FuzzHeaders: Parse never panics or reads out of bounds; ECN marking keeps a valid
// IPv4 checksum valid and changes nothing but the ECN bits and the checksum.
func FuzzHeaders(f *testing.F) {
	frame := make([]byte, 64)
	putRoCE(frame, hostMAC(1), hostMAC(2), hostIP(1), hostIP(2), 0xC000, 26, 1, 7)
	f.Add(frame)
	var pfc [60]byte
	putPFC(pfc[:], MAC{2}, 0xff, &[8]uint16{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(pfc[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Headers
		if h.Parse(b) != nil {
			return
		}
		h.FlowHash(b, 1)
		if h.IPVersion != 4 {
			return
		}
		ip := b[h.L3 : h.L3+20]
		valid := binary.BigEndian.Uint16(ip[10:]) == ipv4Checksum(ip)
		before := bytes.Clone(b)
		if !setCE(b, &h) {
			return
		}
		if valid && binary.BigEndian.Uint16(ip[10:]) != ipv4Checksum(ip) {
			t.Fatalf("checksum broken by marking: % x", before)
		}
		for i := range b {
			if i != h.L3+1 && i != h.L3+10 && i != h.L3+11 && b[i] != before[i] {
				t.Fatalf("byte %d changed", i)
			}
		}
	})
}
