package roce

import "encoding/binary"

// Packet is a decoded RoCEv2 frame: views into the frame for every header present and
// the offsets between them. Decode fills it without allocating; reuse one Packet per
// goroutine across frames, as with gopacket's DecodingLayerParser. Views of headers a
// frame does not carry are nil. A Packet refers to the frame's bytes: it is valid
// until the frame is modified or reused.
type Packet struct {
	Frame           []byte
	Ethernet        Ethernet
	VLAN            bool   // VLAN tags were present (802.1Q, or 802.1ad QinQ stacks)
	VLANTCI         uint16 // the outermost tag's control information (PCP 3, DEI 1, VID 12)
	EtherType       uint16 // the EtherType after the VLAN tags
	IPv4            IPv4
	IPv6            IPv6
	UDP             UDP
	TransportPacket // the UDP payload: BTH, extension headers, payload, pad, ICRC

	l3Off, udpOff, icrcOff int // offsets in Frame
}

// TransportPacket is a decoded UDP payload of RoCEv2: views of the BTH and of every
// extension header its opcode carries (nil for the others), the payload, the pad and
// the ICRC (the IBTA's transport packet, less its LRH/GRH). Decode fills it without allocating; it is what Packet and the
// gopacket layer (roce/layers) share.
type TransportPacket struct {
	BTH       BTH
	DETH      DETH
	XRCETH    XRCETH
	RETH      RETH
	AtomicETH AtomicETH
	AETH      AETH
	AtomicAck AtomicAckETH
	ImmDt     ImmDt
	IETH      IETH
	CNP       CNPReserved
	Payload   []byte // the BTH payload without pad
	Pad       []byte // the pad bytes (BTH PadCnt of them)
	ICRC      []byte // the ICRC carried by the frame, in wire order (ReadICRC reads it)
}

// Info returns the opcode table entry of the decoded packet.
func (p *Packet) Info() *OpcodeInfo { return p.BTH.Opcode().Info() }

// L3 returns the bytes the ICRC covers: the IP header through the pad.
func (p *Packet) L3() []byte { return p.Frame[p.l3Off:p.icrcOff] }

// ComputeICRC returns the ICRC of the decoded packet as it should be.
// Like ICRC, it masks the invariant fields in place for the call (and may mask the 8
// bytes before the IP header, inside the frame) and restores them.
func (p *Packet) ComputeICRC() uint32 {
	return frameICRC(p.Frame, p.l3Off, p.icrcOff, p.udpOff-p.l3Off)
}

// ICRCOK reports whether the carried ICRC matches the packet.
func (p *Packet) ICRCOK() bool { return p.ComputeICRC() == ReadICRC(p.ICRC) }

// Decode parses an Ethernet frame carrying RoCEv2 over IPv4 or IPv6. It returns a
// *DecodeError wrapping ErrNotRoCE for other well-formed traffic (with the IP and UDP
// views set as far as they were parsed), and one wrapping
// ErrTruncated, ErrBadLength, ErrBadHeader, ErrUnknownOpcode or ErrBadPadCount for
// malformed RoCEv2. It does not check the ICRC: call ICRCOK or VerifyICRC, since some
// callers (a switch, a capture) must see packets whose ICRC is wrong.
func (p *Packet) Decode(frame []byte) error {
	*p = Packet{Frame: frame}
	l, err := Locate(frame)
	if err != nil {
		return locateErr(frame, &l, err.(LayoutError))
	}
	p.Ethernet = Ethernet(frame[:EthernetSize])
	p.EtherType, p.VLAN, p.VLANTCI = l.EtherType, l.Tags > 0, l.TCI
	p.l3Off = l.L3
	ipEnd, off := l.End, l.L4
	switch l.IPVersion {
	case 4:
		h := IPv4(frame[l.L3:l.L4])
		p.IPv4 = h
		if h.Protocol() != IPProtoUDP {
			return decodeErr("ipv4", l.L3+ipv4Protocol, ErrNotRoCE, "IP protocol %d", h.Protocol())
		}
		if binary.BigEndian.Uint16(h[ipv4FlagsFrag:])&ipv4FragMask != 0 {
			return decodeErr("ipv4", l.L3+ipv4FlagsFrag, ErrBadHeader, "fragmented packet")
		}
	case 6:
		h := IPv6(frame[l.L3:l.L4])
		p.IPv6 = h
		if h.NextHeader() != IPProtoUDP {
			return decodeErr("ipv6", l.L3+ipv6NextHeader, ErrNotRoCE, "next header %d", h.NextHeader())
		}
		// An IPv4-mapped GID means RoCEv2 over IPv4 (IBTA A17.4.5.1, rxe's GID
		// types); in an IPv6 header such an address is malformed RoCEv2.
		if h.Src().Is4In6() || h.Dst().Is4In6() {
			return decodeErr("ipv6", l.L3+ipv6Src, ErrBadHeader, "IPv4-mapped address %v -> %v in an IPv6 header", h.Src(), h.Dst())
		}
	default:
		// The offset of the EtherType, after any tags.
		return decodeErr("ethernet", l.L3-2, ErrNotRoCE, "EtherType %#04x", p.EtherType)
	}

	if ipEnd < off+UDPSize {
		return decodeErr("udp", off, ErrTruncated, "%d bytes left, need %d", ipEnd-off, UDPSize)
	}
	p.udpOff = off
	p.UDP = UDP(frame[off : off+UDPSize])
	if p.UDP.DstPort() != UDPPort {
		return decodeErr("udp", off+udpDstPort, ErrNotRoCE, "destination port %d", p.UDP.DstPort())
	}
	if p.UDP.Length() != ipEnd-off {
		return decodeErr("udp", off+udpLength, ErrBadLength, "UDP length %d, IP says %d", p.UDP.Length(), ipEnd-off)
	}
	off += UDPSize

	if err := p.TransportPacket.Decode(frame[off:ipEnd]); err != nil {
		if de, ok := err.(*DecodeError); ok {
			de.Offset += off
		}
		return err
	}
	p.icrcOff = ipEnd - ICRCSize
	return nil
}

// Decode parses b, a UDP payload addressed to port 4791, as BTH, extension headers,
// payload, pad and ICRC. Errors are *DecodeError with offsets into b, wrapping
// ErrTruncated, ErrBadLength, ErrUnknownOpcode or ErrBadPadCount. It does not allocate
// unless b is malformed.
func (t *TransportPacket) Decode(b []byte) error {
	*t = TransportPacket{}
	if len(b) < BTHSize+ICRCSize {
		return decodeErr("bth", 0, ErrTruncated, "%d bytes left, need BTH and ICRC", len(b))
	}
	t.BTH = BTH(b[:BTHSize])
	info := t.BTH.Opcode().Info()
	if info == nil {
		return &DecodeError{Layer: "bth", Offset: 0, Err: &UnknownOpcodeError{Opcode: t.BTH.Opcode()},
			Detail: "opcode " + t.BTH.Opcode().String()}
	}
	off := BTHSize
	icrc := len(b) - ICRCSize
	if off+info.Headers.Size() > icrc {
		return decodeErr("eth", off, ErrTruncated, "%s needs %d bytes of extension headers, %d left",
			info.Name, info.Headers.Size(), icrc-off)
	}
	for _, e := range headerOrder {
		if info.Headers&e.hdr == 0 {
			continue
		}
		h := b[off : off+e.size]
		switch e.hdr {
		case HdrDETH:
			t.DETH = h
		case HdrXRCETH:
			t.XRCETH = h
		case HdrRETH:
			t.RETH = h
		case HdrAtomicETH:
			t.AtomicETH = h
		case HdrAETH:
			t.AETH = h
		case HdrAtomicAckETH:
			t.AtomicAck = h
		case HdrImmDt:
			t.ImmDt = h
		case HdrIETH:
			t.IETH = h
		case HdrCNP:
			t.CNP = h
		}
		off += e.size
	}

	pad := int(t.BTH.PadCnt())
	body := icrc - off
	if !info.Payload && body != 0 {
		return decodeErr("payload", off, ErrBadLength, "%s carries no payload but %d bytes follow its headers", info.Name, body)
	}
	if pad > body {
		return decodeErr("payload", off, ErrBadPadCount, "pad count %d with %d bytes of payload", pad, body)
	}
	t.Payload = b[off : icrc-pad]
	t.Pad = b[icrc-pad : icrc]
	// A view, not the value: a receiver that does not check the ICRC (a simulated
	// device's frames carry none) never loads the frame's last cache line.
	t.ICRC = b[icrc:]
	return nil
}

// HeaderLen returns the bytes of the BTH and the extension headers of a decoded
// TransportPacket (0 for one that did not decode).
func (t *TransportPacket) HeaderLen() int {
	if t.BTH == nil || t.BTH.Opcode().Info() == nil {
		return 0
	}
	return BTHSize + t.BTH.Opcode().Info().Headers.Size()
}

// locateErr reports a Locate failure as a DecodeError naming the layer and offset.
func locateErr(frame []byte, l *Layout, e LayoutError) error {
	layer := "ipv4"
	if l.EtherType == EtherTypeIPv6 {
		layer = "ipv6"
	}
	switch e {
	case ErrEthernetCutOff:
		return decodeErr("ethernet", min(len(frame), l.L3), e.Unwrap(), "%s in %d bytes", e, len(frame))
	case ErrIPLength:
		return decodeErr(layer, l.L3+ipv4TotalLen, e.Unwrap(), "%s: %d bytes from the IP header on", e, len(frame)-l.L3)
	}
	return decodeErr(layer, l.L3, e.Unwrap(), "%s", e)
}

// VerifyICRC checks the ICRC of a packet Decode accepted and returns a *DecodeError wrapping ErrBadICRC on mismatch.
func (p *Packet) VerifyICRC() error {
	if want, carried := p.ComputeICRC(), ReadICRC(p.ICRC); want != carried {
		return decodeErr("icrc", p.icrcOff, ErrBadICRC, "carried %#08x, computed %#08x", carried, want)
	}
	return nil
}
