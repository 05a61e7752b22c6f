package roce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// DefaultTTL is the IPv4 TTL and IPv6 hop limit rxe uses.
const DefaultTTL = 64

// Builder describes a RoCEv2 frame to build. Fill the fields the opcode needs (see the
// opcode table), then call Build; the Builder may be reused for the next packet. Fields
// an opcode does not carry are ignored.
//
// Conventions that match the Linux kernel's rxe on the wire:
//   - IPv4 DF is set and the UDP checksum is 0 (RoCEv2 relies on the ICRC);
//   - TTL 0 means DefaultTTL;
//   - the UDP source port is whatever SrcPort says: derive it with ConnectedSourcePort
//     or DatagramSourcePort as rxe does;
//   - the pad count is computed from the payload length and pad bytes are zero.
type Builder struct {
	DstMAC, SrcMAC [6]byte
	VLAN           bool   // insert an 802.1Q tag
	VLANTCI        uint16 // PCP 3 bits, DEI 1, VID 12

	Src, Dst  netip.Addr // both IPv4 or both IPv6 (IPv4-mapped addresses count as IPv4)
	DSCP      uint8      // 0..63
	ECN       uint8      // 0..3
	TTL       uint8      // IPv4 TTL or IPv6 hop limit; 0 = DefaultTTL
	IPID      uint16     // IPv4 identification
	FlowLabel uint32     // IPv6 flow label, 20 bits
	SrcPort   uint16     // UDP source port (flow entropy)
	DstPort   uint16     // UDP destination port; 0 = UDPPort

	BTH       BTHFields
	DETH      DETHFields
	RETH      RETHFields
	AtomicETH AtomicETHFields
	AETH      AETHFields
	AtomicAck uint64 // AtomicAckETH: the original remote data
	Imm       uint32 // ImmDt, network byte order value as carried
	IETHRKey  uint32 // IETH: the R_Key to invalidate
	XRCSRQN   uint32 // XRCETH: the target XRC SRQ's number (24 bits)

	Payload []byte

	// SkipICRC leaves the ICRC field zero instead of computing it: a simulation that
	// carries no payload bytes (rnic.Config.PayloadFree), whose receivers do not check
	// it, saves a CRC over every frame. Frames built so are not valid RoCEv2.
	SkipICRC bool
}

// DETHFields holds the values of a DETH.
type DETHFields struct {
	QKey  uint32
	SrcQP QPN
}

// RETHFields holds the values of a RETH.
type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AtomicETHFields holds the values of an AtomicETH.
type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// AETHFields holds the values of an AETH.
type AETHFields struct {
	Syndrome Syndrome
	MSN      uint32
}

// ErrBufferTooSmall is returned by Build when buf cannot hold the frame.
var ErrBufferTooSmall = errors.New("roce: buffer too small for frame")

// PadLen returns the number of pad bytes that align n bytes of payload to 4.
func PadLen(n int) int { return -n & 3 }

// Len returns the length of the frame Build would write, or an error naming what is
// wrong with the description.
func (b *Builder) Len() (int, error) {
	info := b.BTH.Opcode.Info()
	if info == nil {
		return 0, &UnknownOpcodeError{Opcode: b.BTH.Opcode}
	}
	if !info.Payload && len(b.Payload) != 0 {
		return 0, fmt.Errorf("roce: %s carries no payload, got %d bytes", info.Name, len(b.Payload))
	}
	if !b.Src.IsValid() || !b.Dst.IsValid() {
		return 0, errors.New("roce: source and destination IP addresses are required")
	}
	if b.Src.Unmap().Is4() != b.Dst.Unmap().Is4() {
		return 0, fmt.Errorf("roce: source %v and destination %v are not the same IP version", b.Src, b.Dst)
	}
	if b.DSCP > 63 || b.ECN > 3 {
		return 0, fmt.Errorf("roce: DSCP %d / ECN %d out of range (0..63 / 0..3)", b.DSCP, b.ECN)
	}
	n := EthernetSize + b.l3Len()
	if b.VLAN {
		n += VLANTagSize
	}
	return n, nil
}

func (b *Builder) ipHeaderLen() int {
	if b.Src.Unmap().Is4() {
		return IPv4MinSize
	}
	return IPv6Size
}

// l3Len is the IP packet's length: IP header, UDP, BTH, ETHs, payload, pad, ICRC.
func (b *Builder) l3Len() int {
	return b.ipHeaderLen() + UDPSize + BTHSize + b.BTH.Opcode.Info().Headers.Size() +
		len(b.Payload) + PadLen(len(b.Payload)) + ICRCSize
}

// PayloadOffset returns where in the frame Build writes the payload. A transmit path
// that reads the message from memory directly into buf[off:off+n] and sets Payload to
// that slice saves Build a copy, as a NIC DMAs payload into its packet buffer.
func (b *Builder) PayloadOffset() (int, error) {
	n, err := b.Len()
	if err != nil {
		return 0, err
	}
	return n - ICRCSize - PadLen(len(b.Payload)) - len(b.Payload), nil
}

// Build writes the frame into buf and returns its length. It does not allocate.
func (b *Builder) Build(buf []byte) (int, error) {
	n, err := b.Len()
	if err != nil {
		return 0, err
	}
	if len(buf) < n {
		return 0, fmt.Errorf("%w: need %d bytes, have %d", ErrBufferTooSmall, n, len(buf))
	}
	frame := buf[:n]
	eth := Ethernet(frame)
	eth.SetDst(b.DstMAC)
	eth.SetSrc(b.SrcMAC)
	off := EthernetSize
	ipv4 := b.Src.Unmap().Is4()
	etherType := uint16(EtherTypeIPv6)
	if ipv4 {
		etherType = EtherTypeIPv4
	}
	if b.VLAN {
		eth.SetEtherType(EtherTypeVLAN)
		binary.BigEndian.PutUint16(frame[off+vlanTCI:], b.VLANTCI)
		binary.BigEndian.PutUint16(frame[off+vlanEtherType:], etherType)
		off += VLANTagSize
	} else {
		eth.SetEtherType(etherType)
	}

	l3 := frame[off:]
	ttl := b.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ipv4 {
		h := IPv4(l3[:IPv4MinSize])
		h[ipv4VersIHL] = ipv4VersIHLMin
		h.SetTOS(b.DSCP, b.ECN)
		h.SetTotalLen(len(l3))
		binary.BigEndian.PutUint16(h[ipv4ID:], b.IPID)
		binary.BigEndian.PutUint16(h[ipv4FlagsFrag:], ipv4DFBit<<8) // DF, no fragment offset
		h.SetTTL(ttl)
		h.SetProtocol(IPProtoUDP)
		src, dst := b.Src.Unmap().As4(), b.Dst.Unmap().As4()
		copy(h[ipv4Src:ipv4Src+ipv4AddrSize], src[:])
		copy(h[ipv4Dst:ipv4Dst+ipv4AddrSize], dst[:])
		h.UpdateChecksum()
	} else {
		h := IPv6(l3[:IPv6Size])
		binary.BigEndian.PutUint32(h[ipv6VersTCFlow:], 6<<28|b.FlowLabel&ipv6FlowLabelMax)
		h.SetTrafficClass(b.DSCP, b.ECN)
		h.SetPayloadLen(len(l3) - IPv6Size)
		h.SetNextHeader(IPProtoUDP)
		h.SetHopLimit(ttl)
		src, dst := b.Src.As16(), b.Dst.As16()
		copy(h[ipv6Src:ipv6Src+ipv6AddrSize], src[:])
		copy(h[ipv6Dst:ipv6Dst+ipv6AddrSize], dst[:])
	}
	udpOff := b.ipHeaderLen()
	udp := UDP(l3[udpOff : udpOff+UDPSize])
	udp.SetSrcPort(b.SrcPort)
	dport := b.DstPort
	if dport == 0 {
		dport = UDPPort
	}
	udp.SetDstPort(dport)
	udp.SetLength(len(l3) - udpOff)
	udp.SetChecksum(0)

	p := udpOff + UDPSize
	bth := b.BTH
	bth.PadCnt = uint8(PadLen(len(b.Payload)))
	BTH(l3[p : p+BTHSize]).Encode(&bth)
	p += BTHSize
	p = b.putExtensionHeaders(l3, p)
	// The transmit path reads memory straight into the frame (see PayloadOffset): when
	// Payload already sits at its place in buf, there is nothing to copy.
	if len(b.Payload) > 0 && &l3[p] != &b.Payload[0] {
		copy(l3[p:], b.Payload)
	}
	p += len(b.Payload)
	clear(l3[p : p+int(bth.PadCnt)])
	p += int(bth.PadCnt)
	if b.SkipICRC {
		PutICRC(l3[p:], 0)
	} else {
		l3Off := len(frame) - len(l3)
		PutICRC(l3[p:], frameICRC(frame, l3Off, l3Off+p, udpOff))
	}
	return n, nil
}

// putExtensionHeaders writes the opcode's extension headers at l3[p:] in wire order and
// returns the offset after them.
func (b *Builder) putExtensionHeaders(l3 []byte, p int) int {
	hdrs := b.BTH.Opcode.Info().Headers
	for _, e := range headerOrder {
		if hdrs&e.hdr == 0 {
			continue
		}
		h := l3[p : p+e.size]
		switch e.hdr {
		case HdrDETH:
			DETH(h).SetQKey(b.DETH.QKey)
			DETH(h).SetSrcQP(b.DETH.SrcQP)
		case HdrRETH:
			RETH(h).SetVA(b.RETH.VA)
			RETH(h).SetRKey(b.RETH.RKey)
			RETH(h).SetDMALen(b.RETH.DMALen)
		case HdrAtomicETH:
			AtomicETH(h).SetVA(b.AtomicETH.VA)
			AtomicETH(h).SetRKey(b.AtomicETH.RKey)
			AtomicETH(h).SetSwapAdd(b.AtomicETH.SwapAdd)
			AtomicETH(h).SetCompare(b.AtomicETH.Compare)
		case HdrAETH:
			AETH(h).SetSyndrome(b.AETH.Syndrome)
			AETH(h).SetMSN(b.AETH.MSN)
		case HdrAtomicAckETH:
			AtomicAckETH(h).SetOrig(b.AtomicAck)
		case HdrImmDt:
			ImmDt(h).SetImm(b.Imm)
		case HdrIETH:
			IETH(h).SetRKey(b.IETHRKey)
		case HdrXRCETH:
			XRCETH(h).SetSRQN(b.XRCSRQN)
		case HdrCNP:
			clear(h)
		}
		p += e.size
	}
	return p
}

// From fills a Builder from a decoded packet, so that Build reproduces the
// frame (the basis of rocelab's round-trip tests and of relaying with modifications).
func (b *Builder) From(p *Packet) {
	*b = Builder{
		DstMAC: p.Ethernet.Dst(), SrcMAC: p.Ethernet.Src(),
		VLAN: p.VLAN, VLANTCI: p.VLANTCI,
		SrcPort: p.UDP.SrcPort(), DstPort: p.UDP.DstPort(),
		BTH:     p.BTH.Fields(),
		Payload: p.Payload,
	}
	if p.IPv4 != nil {
		b.Src, b.Dst = p.IPv4.Src(), p.IPv4.Dst()
		b.DSCP, b.ECN, b.TTL, b.IPID = p.IPv4.DSCP(), p.IPv4.ECN(), p.IPv4.TTL(), p.IPv4.ID()
	} else {
		b.Src, b.Dst = p.IPv6.Src(), p.IPv6.Dst()
		b.DSCP, b.ECN, b.TTL, b.FlowLabel = p.IPv6.DSCP(), p.IPv6.ECN(), p.IPv6.HopLimit(), p.IPv6.FlowLabel()
	}
	if p.DETH != nil {
		b.DETH = DETHFields{QKey: p.DETH.QKey(), SrcQP: p.DETH.SrcQP()}
	}
	if p.RETH != nil {
		b.RETH = RETHFields{VA: p.RETH.VA(), RKey: p.RETH.RKey(), DMALen: p.RETH.DMALen()}
	}
	if p.AtomicETH != nil {
		b.AtomicETH = AtomicETHFields{VA: p.AtomicETH.VA(), RKey: p.AtomicETH.RKey(),
			SwapAdd: p.AtomicETH.SwapAdd(), Compare: p.AtomicETH.Compare()}
	}
	if p.AETH != nil {
		b.AETH = AETHFields{Syndrome: p.AETH.Syndrome(), MSN: p.AETH.MSN()}
	}
	if p.AtomicAck != nil {
		b.AtomicAck = p.AtomicAck.Orig()
	}
	if p.ImmDt != nil {
		b.Imm = p.ImmDt.Imm()
	}
	if p.IETH != nil {
		b.IETHRKey = p.IETH.RKey()
	}
	if p.XRCETH != nil {
		b.XRCSRQN = p.XRCETH.SRQN()
	}
}
