package roce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

// tagged returns frame with VLAN tags of TPID tpids[i] and TCI 0x1000+i inserted after
// the MAC addresses, outermost first.
func tagged(frame []byte, tpids ...uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	for i, tpid := range tpids {
		out = binary.BigEndian.AppendUint16(out, tpid)
		out = binary.BigEndian.AppendUint16(out, 0x1000+uint16(i))
	}
	return append(out, frame[12:]...)
}

// Untagged, 802.1Q, QinQ (802.1ad over 802.1Q) and a stack of three locate the same IP
// packet; the TCI is the outermost tag's.
func TestLocateTags(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		base := writeFirst(t, ipv6, 64)
		for _, tpids := range [][]uint16{nil, {EtherTypeVLAN}, {EtherTypeQinQ, EtherTypeVLAN}, {EtherTypeQinQ, EtherTypeQinQ, EtherTypeVLAN}} {
			f := tagged(base, tpids...)
			l, err := Locate(f)
			if err != nil {
				t.Fatalf("ipv6 %v, tags %x: %v", ipv6, tpids, err)
			}
			l3 := EthernetSize + VLANTagSize*len(tpids)
			want := Layout{Tags: len(tpids), EtherType: EtherTypeIPv4, L3: l3, IPVersion: 4, L4: l3 + IPv4MinSize, Proto: IPProtoUDP, End: len(f)}
			if ipv6 {
				want.EtherType, want.IPVersion, want.L4 = EtherTypeIPv6, 6, l3+IPv6Size
			}
			if len(tpids) > 0 {
				want.TCI = 0x1000
			}
			if l != want {
				t.Errorf("ipv6 %v, tags %x: %+v, want %+v", ipv6, tpids, l, want)
			}
			var p Packet
			if err := p.Decode(f); err != nil || p.VLAN != (len(tpids) > 0) || !p.ICRCOK() {
				t.Errorf("ipv6 %v, tags %x: packet decode %v, VLAN %v", ipv6, tpids, err, p.VLAN)
			}
			if got, want := l.Dst(f), netip.MustParseAddr("10.0.0.1"); !ipv6 && got != want {
				t.Errorf("dst %v, want %v", got, want)
			}
		}
	}
}

func TestLocateErrors(t *testing.T) {
	good := writeFirst(t, false, 64)
	mod := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	for _, c := range []struct {
		name  string
		frame []byte
		want  LayoutError
		is    error
	}{
		{"short", good[:13], ErrEthernetCutOff, ErrTruncated},
		{"second tag cut", tagged(good, EtherTypeQinQ, EtherTypeVLAN)[:20], ErrEthernetCutOff, ErrTruncated},
		{"ip cut", good[:EthernetSize+10], ErrIPCutOff, ErrTruncated},
		{"version", mod(func(b []byte) { b[EthernetSize] = 0x65 }), ErrIPVersion, ErrBadHeader},
		{"ihl", mod(func(b []byte) { b[EthernetSize] = 0x44 }), ErrIPHeaderLen, ErrBadHeader},
		{"total", mod(func(b []byte) { b[EthernetSize+2] = 0xFF }), ErrIPLength, ErrBadLength},
	} {
		_, err := Locate(c.frame)
		if err != c.want || !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Not IP: located, IPVersion 0.
	arp := mod(func(b []byte) { Ethernet(b).SetEtherType(EtherTypeARP) })
	if l, err := Locate(tagged(arp, EtherTypeQinQ, EtherTypeVLAN)); err != nil || l.IPVersion != 0 || l.EtherType != EtherTypeARP || l.L3 != 22 {
		t.Errorf("ARP: %+v %v", l, err)
	}
}

// The switch locates every frame it forwards: good, malformed or not IP, it must not
// allocate.
func TestLocateAllocs(t *testing.T) {
	good := tagged(writeFirst(t, true, 64), EtherTypeQinQ, EtherTypeVLAN)
	for _, f := range [][]byte{good, good[:20], good[:30], good[:len(good)-1]} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Locate(f) }); n != 0 {
			t.Errorf("%d-byte frame: %v allocations", len(f), n)
		}
	}
}

// TestLocateFastPath: Locate's path for untagged IPv4 without options gives exactly
// the general walk's layout and error, around every condition it tests: EtherType,
// version and header length, total length against 20 and against the frame.
func TestLocateFastPath(t *testing.T) {
	good := writeFirst(t, false, 64)
	check := func(name string, b []byte) {
		t.Helper()
		l, err := Locate(b)
		wl, werr := walk(b)
		if l != wl || err != werr {
			t.Errorf("%s: Locate %+v, %v; walk %+v, %v", name, l, err, wl, werr)
		}
	}
	check("good", good)
	for n := 0; n <= len(good); n++ {
		check(fmt.Sprintf("cut to %d bytes", n), good[:n])
	}
	for _, c := range []struct {
		at  int
		val byte
	}{{12, 0x86}, {13, 0x01}, {14, 0x46}, {14, 0x55}, {14, 0x44}} {
		b := bytes.Clone(good)
		b[c.at] = c.val
		check(fmt.Sprintf("byte %d = %#x", c.at, c.val), b)
	}
	for _, total := range []int{0, 19, 20, 21, len(good) - 15, len(good) - 14, len(good) - 13, 0xFFFF} {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint16(b[16:], uint16(total))
		check(fmt.Sprintf("total length %d", total), b)
	}
}

// FuzzLocate: Locate never panics, agrees with the general walk, and what it locates
// lies inside the frame.
func FuzzLocate(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Locate(b)
		if wl, werr := walk(b); l != wl || err != werr {
			t.Fatalf("Locate %+v, %v; walk %+v, %v", l, err, wl, werr)
		}
		if err != nil || l.IPVersion == 0 {
			return
		}
		if !(l.L3 <= l.L4 && l.L4 <= l.End && l.End <= len(b)) {
			t.Fatalf("layout %+v outside a %d-byte frame", l, len(b))
		}
		l.DSCP(b)
		l.TTL(b)
		l.Dst(b)
	})
}
