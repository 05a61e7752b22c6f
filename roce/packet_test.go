package roce

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
)

// writeFirst builds an RC RDMA WRITE First frame with a 1024-byte payload over IPv4 or
// IPv6, the shape most of the tests below mutate.
func writeFirst(t testing.TB, v6 bool, payload int) []byte {
	t.Helper()
	b := Builder{
		DstMAC: [6]byte{0x52, 0x54, 0, 0, 0, 1}, SrcMAC: [6]byte{0x52, 0x54, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.0.0.1"),
		SrcPort: ConnectedSourcePort(0, 0x11, 0x12), IPID: 7,
		BTH:     BTHFields{Opcode: OpRCWriteFirst, PKey: DefaultPKey, DestQP: 0x12, PSN: 0xFFFFFE},
		RETH:    RETHFields{VA: 0x1000, RKey: 0x42, DMALen: 1 << 20},
		Payload: make([]byte, payload),
	}
	if v6 {
		b.Src, b.Dst = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1")
		b.FlowLabel = 0x12345
	}
	for i := range b.Payload {
		b.Payload[i] = byte(i * 7)
	}
	buf := make([]byte, 2048)
	n, err := b.Build(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// icrcCoverage returns, for every byte of the frame, whether the ICRC covers it and
// whether it is a masked field (inside the ICRC's span but fed to it as ones). Ethernet
// and the ICRC itself are neither.
func icrcCoverage(t testing.TB, frame []byte) (covered, masked []bool) {
	var p Packet
	if err := p.Decode(frame); err != nil {
		t.Fatal(err)
	}
	cov := make([]bool, len(frame))
	for i := p.l3Off; i < p.icrcOff; i++ {
		cov[i] = true
	}
	ip := p.l3Off
	var maskedAt []int
	if p.IPv4 != nil {
		maskedAt = append(maskedAt, ip+1, ip+8, ip+10, ip+11) // TOS, TTL, checksum
	} else {
		maskedAt = append(maskedAt, ip+1, ip+2, ip+3, ip+7) // TC low nibble + flow label, hop limit
	}
	maskedAt = append(maskedAt, p.udpOff+6, p.udpOff+7, p.udpOff+UDPSize+4) // UDP checksum, BTH byte 4
	masked = make([]bool, len(frame))
	for _, i := range maskedAt {
		cov[i] = false
		masked[i] = true
	}
	return cov, masked
}

// TestICRCBitFlips flips every bit of a frame: a flip in a covered byte must fail the
// ICRC, one in a masked field must not.
func TestICRCBitFlips(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		frame := writeFirst(t, v6, 64)
		cov, masked := icrcCoverage(t, frame)
		var p Packet
		for i := range frame {
			for bit := 0; bit < 8; bit++ {
				if v6 && i == EthernetSize && bit < 4 {
					// The traffic class's high nibble shares the first byte with the
					// version: masked bits in a covered byte.
					cov[i], masked[i] = false, true
				} else if v6 && i == EthernetSize {
					cov[i], masked[i] = true, false
				}
				frame[i] ^= 1 << bit
				// A flip in a covered byte may also make the frame unparseable (a
				// length, the version): rejected either way, which is what counts.
				err := p.Decode(frame)
				switch {
				case err == nil && cov[i] && p.ICRCOK():
					t.Errorf("v6=%v: flipping bit %d of byte %d left the ICRC valid", v6, bit, i)
				case err == nil && masked[i] && !p.ICRCOK():
					t.Errorf("v6=%v: flipping bit %d of masked byte %d broke the ICRC", v6, bit, i)
				case err != nil && masked[i]:
					t.Errorf("v6=%v: flipping bit %d of masked byte %d: %v", v6, bit, i, err)
				}
				frame[i] ^= 1 << bit
			}
		}
	}
}

// TestMaskedFieldsNamed checks the named masked fields explicitly, as routers change
// them: TTL, DSCP, ECN, UDP checksum, FECN/BECN.
func TestMaskedFieldsNamed(t *testing.T) {
	frame := writeFirst(t, false, 100)
	var p Packet
	mutate := map[string]func(*Packet){
		"ttl":          func(p *Packet) { p.IPv4.SetTTL(3) },
		"dscp+ecn":     func(p *Packet) { p.IPv4.SetTOS(26, 3) },
		"ip checksum":  func(p *Packet) { p.IPv4.UpdateChecksum() },
		"udp checksum": func(p *Packet) { p.UDP.SetChecksum(0xBEEF) },
		"fecn":         func(p *Packet) { p.BTH.SetFECN(true) },
		"becn":         func(p *Packet) { p.BTH.SetBECN(true) },
	}
	for name, m := range mutate {
		f := append([]byte(nil), frame...)
		if err := p.Decode(f); err != nil {
			t.Fatal(err)
		}
		m(&p)
		if err := p.VerifyICRC(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	f := append([]byte(nil), frame...)
	_ = p.Decode(f)
	p.BTH.SetPSN(p.BTH.PSN().Add(1))
	if err := p.VerifyICRC(); !errors.Is(err, ErrBadICRC) {
		t.Errorf("PSN change: got %v, want ErrBadICRC", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := writeFirst(t, false, 64)
	good6 := writeFirst(t, true, 64)
	type tc struct {
		name  string
		frame func() []byte
		want  error
	}
	mod := func(src []byte, f func(b []byte)) func() []byte {
		return func() []byte { b := append([]byte(nil), src...); f(b); return b }
	}
	udp := EthernetSize + IPv4MinSize
	bth := udp + UDPSize
	cases := []tc{
		{"empty", func() []byte { return nil }, ErrTruncated},
		{"vlan cut", func() []byte { b := append([]byte(nil), good[:14]...); b[12], b[13] = 0x81, 0; return b }, ErrTruncated},
		{"ipv4 cut", func() []byte { return good[:20] }, ErrTruncated},
		{"ipv6 cut", func() []byte { return good6[:40] }, ErrTruncated},
		{"arp", mod(good, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), ErrNotRoCE},
		{"tcp", mod(good, func(b []byte) { b[EthernetSize+9] = 6 }), ErrNotRoCE},
		{"other udp port", mod(good, func(b []byte) { b[udp+2], b[udp+3] = 0, 53 }), ErrNotRoCE},
		{"bad version", mod(good, func(b []byte) { b[EthernetSize] = 0x65 }), ErrBadHeader},
		{"bad ihl", mod(good, func(b []byte) { b[EthernetSize] = 0x44 }), ErrBadHeader},
		{"fragment", mod(good, func(b []byte) { b[EthernetSize+6] = 0x20 }), ErrBadHeader},
		{"ipv4-mapped in ipv6", mod(good6, func(b []byte) {
			copy(b[EthernetSize+24:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1})
		}), ErrBadHeader},
		{"ip total too long", mod(good, func(b []byte) { b[EthernetSize+2] = 0xFF }), ErrBadLength},
		{"ip total below header", mod(good, func(b []byte) { b[EthernetSize+2], b[EthernetSize+3] = 0, 10 }), ErrBadLength},
		{"ipv6 payload too long", mod(good6, func(b []byte) { b[EthernetSize+4] = 0xFF }), ErrBadLength},
		{"udp length disagrees", mod(good, func(b []byte) { b[udp+5]-- }), ErrBadLength},
		{"truncated frame", func() []byte { return good[:len(good)-10] }, ErrBadLength},
		{"unknown opcode", mod(good, func(b []byte) { b[bth] = 0x1F }), ErrUnknownOpcode},
		{"pad larger than payload", func() []byte {
			f := writeFirst(t, false, 0)
			f[bth+1] |= 0x30
			return f
		}, ErrBadPadCount},
		{"payload on ACK", mod(good, func(b []byte) { b[bth] = byte(OpRCAck) }), ErrBadLength},
		{"ETH cut", func() []byte {
			f := writeFirst(t, false, 0)
			// shrink IP and UDP lengths so the RETH no longer fits
			f = f[:bth+BTHSize+8+ICRCSize]
			IPv4(f[EthernetSize:]).SetTotalLen(len(f) - EthernetSize)
			UDP(f[udp:]).SetLength(len(f) - udp)
			return f
		}, ErrTruncated},
	}
	for _, c := range cases {
		var p Packet
		err := p.Decode(c.frame())
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
			continue
		}
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: %T is not a *DecodeError", c.name, err)
		}
	}
	var p Packet
	err := p.Decode(mod(good, func(b []byte) { b[bth] = 0xFE })())
	var uo *UnknownOpcodeError
	if !errors.As(err, &uo) || uo.Opcode != 0xFE {
		t.Errorf("unknown opcode: got %v, want *UnknownOpcodeError{0xfe}", err)
	}
}

// TestEthernetPadding: a short frame padded to the Ethernet minimum decodes with the IP
// length, not the frame length.
func TestEthernetPadding(t *testing.T) {
	b := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH:  BTHFields{Opcode: OpRCAck, PKey: DefaultPKey, DestQP: 5, PSN: 9},
		AETH: AETHFields{Syndrome: MakeSyndrome(AckTypeACK, AETHCreditsUnlimited), MSN: 3}}
	buf := make([]byte, 80)
	n, err := b.Build(buf)
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := p.Decode(buf[:n+8]); err != nil {
		t.Fatal(err)
	}
	if !p.ICRCOK() || p.AETH.MSN() != 3 || p.AETH.Syndrome().Type() != AckTypeACK {
		t.Errorf("padded ACK: icrc %v aeth %x", p.ICRCOK(), []byte(p.AETH))
	}
}

// TestSourcePortsMatchKernel checks the UDP source port rules against the captures:
// RC from rdma_get_udp_sport, UD (and the GSI QP's CM MADs) from hash_32.
func TestSourcePortsMatchKernel(t *testing.T) {
	check := func(capture string, tr Transport, want uint16) {
		var p Packet
		seen := 0
		for _, f := range readPcap(t, filepath.Join("testdata", "rxe", capture+".pcap")) {
			if p.Decode(f) != nil || p.Info().Transport != tr || p.BTH.DestQP() == GSIQPN {
				continue
			}
			seen++
			if got := p.UDP.SrcPort(); got != want {
				t.Errorf("%s %s: source port %#x, want %#x", capture, p.BTH.Opcode(), got, want)
				return
			}
		}
		if seen == 0 {
			t.Errorf("%s: no %v packets", capture, tr)
		}
	}
	// Both sides use QPN 0x11 in these captures (see the *.log files).
	check("rc_pingpong", TransportRC, ConnectedSourcePort(0, 0x11, 0x11))
	check("ud_pingpong", TransportUD, DatagramSourcePort(0x11))
	if got := ConnectedSourcePort(0, 0x11, 0x11); got != 0xC121 {
		t.Errorf("ConnectedSourcePort(0, 0x11, 0x11) = %#x, want 0xc121", got)
	}
	var p Packet
	gsi := 0
	for _, f := range readPcap(t, filepath.Join("testdata", "rxe", "rping.pcap")) {
		if p.Decode(f) == nil && p.BTH.DestQP() == GSIQPN {
			gsi++
			if got, want := p.UDP.SrcPort(), DatagramSourcePort(GSIQPN); got != want {
				t.Errorf("CM MAD source port %#x, want %#x", got, want)
			}
		}
	}
	if gsi == 0 {
		t.Error("rping.pcap: no CM MADs on QP1")
	}
}

func TestPSN(t *testing.T) {
	cases := []struct {
		p, q   PSN
		diff   int32
		before bool
	}{
		{5, 3, 2, false},
		{3, 5, -2, true},
		{0, 0xFFFFFF, 1, false},
		{0xFFFFFF, 0, -1, true},
		{0x7FFFFF, 0, 0x7FFFFF, false},
		{0x800000, 0, -0x800000, true},
	}
	for _, c := range cases {
		if d := c.p.Diff(c.q); d != c.diff {
			t.Errorf("%v.Diff(%v) = %d, want %d", c.p, c.q, d, c.diff)
		}
		if c.p.Before(c.q) != c.before {
			t.Errorf("%v.Before(%v) = %v", c.p, c.q, !c.before)
		}
	}
	if got := PSN(0xFFFFFE).Add(3); got != 1 {
		t.Errorf("Add wrap: %v", got)
	}
	if got := PSN(1).Add(-2); got != 0xFFFFFF {
		t.Errorf("Add negative wrap: %v", got)
	}
}

func TestGIDAndMTU(t *testing.T) {
	g := GIDFromAddr(netip.MustParseAddr("10.77.0.1"))
	if !g.IsIPv4() || g.Addr() != netip.MustParseAddr("10.77.0.1") || g.String() != "::ffff:10.77.0.1" {
		t.Errorf("IPv4 GID %v", g)
	}
	g6 := GIDFromAddr(netip.MustParseAddr("fd77::1"))
	if g6.IsIPv4() || g6.Addr() != netip.MustParseAddr("fd77::1") {
		t.Errorf("IPv6 GID %v", g6)
	}
	for e := 1; e <= 5; e++ {
		m, err := MTUFromEnum(e)
		if err != nil || m.Enum() != e || !m.Valid() {
			t.Errorf("MTU enum %d: %v %v", e, m, err)
		}
	}
	if _, err := MTUFromEnum(6); err == nil {
		t.Error("MTUFromEnum(6) succeeded")
	}
	if MTU(1500).Valid() {
		t.Error("MTU 1500 valid")
	}
	if m := MTUForLinkMTU(1500); m != MTU1024 {
		t.Errorf("MTUForLinkMTU(1500) = %v, want 1024 (as rxe reports)", m)
	}
	if m := MTUForLinkMTU(9000); m != MTU4096 {
		t.Errorf("MTUForLinkMTU(9000) = %v", m)
	}
	if !DefaultPKey.Matches(0x7FFF) || PKey(0x7FFF).Matches(0x7FFF) || PKey(0x8001).Matches(0x8002) {
		t.Error("P_Key matching")
	}
}

func TestOpcodeTable(t *testing.T) {
	n := 0
	for i := 0; i < 256; i++ {
		op := Opcode(i)
		if !op.Known() {
			if op.String() != "OPCODE_0x"+hex2(i) {
				t.Errorf("unknown opcode name %q", op.String())
			}
			continue
		}
		n++
	}
	// 23 RC + 23 XRC + 12 UC + 2 UD + CNP + 2 rocelab probes.
	if n != 63 {
		t.Errorf("%d opcodes in the table, want 63", n)
	}
	checks := []struct {
		op   Opcode
		name string
		hdrs Headers
	}{
		{OpRCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", HdrRETH | HdrImmDt},
		{OpUCWriteFirst, "UC_RDMA_WRITE_FIRST", HdrRETH},
		{OpRCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", HdrAETH | HdrAtomicAckETH},
		{OpUDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", HdrDETH | HdrImmDt},
		{OpRCSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", HdrIETH},
		{OpRCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", 0},
		{OpCNP, "CNP", HdrCNP},
		{XRCBase + OpRCWriteOnlyImm, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", HdrXRCETH | HdrRETH | HdrImmDt},
		{XRCBase + OpRCFetchAdd, "XRC_FETCH_ADD", HdrXRCETH | HdrAtomicETH},
		{XRCBase + OpRCReadResponseFirst, "XRC_RDMA_READ_RESPONSE_FIRST", HdrAETH},
		{XRCBase + OpRCAck, "XRC_ACKNOWLEDGE", HdrAETH},
	}
	for _, c := range checks {
		i := c.op.Info()
		if i.Name != c.name || i.Headers != c.hdrs {
			t.Errorf("%#x: %s %b, want %s %b", uint8(c.op), i.Name, i.Headers, c.name, c.hdrs)
		}
	}
	if OpRCReadResponseFirst.Info().Request() || !OpRCReadRequest.Info().Request() {
		t.Error("Request() classification")
	}
	if s := MakeSyndrome(AckTypeNAK, NAKRemoteAccessError); s != 0x62 || s.Type() != AckTypeNAK || !s.Valid() {
		t.Errorf("NAK syndrome %#x", uint8(s))
	}
}

// xrcWriteOnly builds an XRC RDMA WRITE Only frame to SRQ 0xDCBA98 (set as 0xFEDCBA98: the
// builder must drop the top byte) with a 3-byte payload.
func xrcWriteOnly(t testing.TB) []byte {
	t.Helper()
	b := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH:     BTHFields{Opcode: XRCBase + OpRCWriteOnly, DestQP: 0x12, PSN: 7},
		RETH:    RETHFields{VA: 0x1122334455667788, RKey: 0xAABBCCDD, DMALen: 3},
		XRCSRQN: 0xFEDCBA98, Payload: []byte{1, 2, 3},
	}
	frame := make([]byte, 256)
	n, err := b.Build(frame)
	if err != nil {
		t.Fatal(err)
	}
	return frame[:n]
}

// An XRC request's XRCETH sits between the BTH and the RETH, its SRQ number in the
// low 24 bits behind a reserved byte, and survives a decode/build round trip.
func TestXRCETHPlacement(t *testing.T) {
	frame := xrcWriteOnly(t)
	var p Packet
	if err := p.Decode(frame); err != nil {
		t.Fatal(err)
	}
	if got := p.XRCETH.SRQN(); got != 0xDCBA98 {
		t.Errorf("SRQN %#x, want the low 24 bits 0xdcba98", got)
	}
	ethOff := len(frame) - ICRCSize - len(p.Payload) - int(p.BTH.PadCnt()) - XRCETHSize - RETHSize
	if want := []byte{0, 0xDC, 0xBA, 0x98}; !bytes.Equal(frame[ethOff:ethOff+XRCETHSize], want) {
		t.Errorf("XRCETH bytes % x, want % x", frame[ethOff:ethOff+XRCETHSize], want)
	}
	if p.RETH.RKey() != 0xAABBCCDD || p.RETH.VA() != 0x1122334455667788 {
		t.Errorf("RETH after the XRCETH: rkey %#x va %#x", p.RETH.RKey(), p.RETH.VA())
	}
	var again Builder
	again.From(&p)
	frame2 := make([]byte, 256)
	n2, err := again.Build(frame2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, frame2[:n2]) {
		t.Error("XRC frame does not survive From/Build")
	}
}

func hex2(i int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[i>>4], digits[i&15]})
}

func TestBuildErrors(t *testing.T) {
	base := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH: BTHFields{Opcode: OpRCSendOnly}}
	cases := map[string]func(b *Builder){
		"unknown opcode":    func(b *Builder) { b.BTH.Opcode = 0x1F },
		"payload on ACK":    func(b *Builder) { b.BTH.Opcode = OpRCAck; b.Payload = []byte{1} },
		"mixed families":    func(b *Builder) { b.Dst = netip.MustParseAddr("fd00::1") },
		"missing address":   func(b *Builder) { b.Src = netip.Addr{} },
		"dscp out of range": func(b *Builder) { b.DSCP = 64 },
	}
	for name, f := range cases {
		b := base
		f(&b)
		if _, err := b.Build(make([]byte, 256)); err == nil {
			t.Errorf("%s: Build succeeded", name)
		}
	}
	if _, err := base.Build(make([]byte, 10)); !errors.Is(err, ErrBufferTooSmall) {
		t.Errorf("small buffer: %v", err)
	}
}

func TestBuildAllocs(t *testing.T) {
	b := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH: BTHFields{Opcode: OpRCWriteFirst}, Payload: make([]byte, 4096)}
	buf := make([]byte, 5000)
	var p Packet
	allocs := testing.AllocsPerRun(100, func() {
		n, _ := b.Build(buf)
		_ = p.Decode(buf[:n])
		_ = p.VerifyICRC()
	})
	if allocs != 0 {
		t.Errorf("build+decode+verify: %v allocs, want 0", allocs)
	}
}

// TestSkipICRC: a frame built with SkipICRC is the same frame up to its ICRC, which is
// zero, so a receiver that checks it rejects the frame.
func TestSkipICRC(t *testing.T) {
	b := Builder{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		BTH: BTHFields{Opcode: OpRCWriteOnly, PKey: DefaultPKey, DestQP: 0x12}, Payload: make([]byte, 100)}
	with, without := make([]byte, 256), make([]byte, 256)
	n, err := b.Build(with)
	if err != nil {
		t.Fatal(err)
	}
	b.SkipICRC = true
	if m, err := b.Build(without); err != nil || m != n {
		t.Fatalf("SkipICRC build: %d bytes, %v; want %d", m, err, n)
	}
	if string(with[:n-ICRCSize]) != string(without[:n-ICRCSize]) || string(without[n-ICRCSize:n]) != "\x00\x00\x00\x00" {
		t.Errorf("SkipICRC frame differs before its ICRC or has a non-zero ICRC %x", without[n-ICRCSize:n])
	}
	var p Packet
	if err := p.Decode(without[:n]); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.VerifyICRC(), ErrBadICRC) {
		t.Error("a zero ICRC verified")
	}
}
