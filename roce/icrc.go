package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// ICRCSize is the size of the invariant CRC that ends every RoCEv2 packet.
const ICRCSize = 4

// lrhSize is the length of the LRH of a native IB packet, which the ICRC covers as
// eight bytes of 0xFF (maskedLRH).
const lrhSize = 8

var maskedLRH = [lrhSize]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// crcAfterLRH is the CRC state after the masked LRH: an ICRC over l3 alone starts from
// it, so the prefix is never fed again.
var crcAfterLRH = crc32.ChecksumIEEE(maskedLRH[:])

// ICRC computes the invariant CRC of a RoCEv2 packet (IBTA Annex A17.3.3; Linux
// rxe_icrc.c). l3 holds the packet from the first byte of the IP header through the
// last pad byte, without the ICRC; udp is the offset of the UDP header in l3 (the IP
// header's length).
//
// The CRC is the zlib/IEEE CRC-32 over 8 bytes of 0xFF (the masked LRH of the native
// IB packet), then the IP header, UDP header, BTH, extension headers, payload and pad,
// with the fields that routers may change taken as all ones: IPv4 TOS, TTL and header
// checksum; IPv6 traffic class, flow label and hop limit; the UDP checksum; and BTH
// byte 4 (FECN, BECN, Resv6). It is transmitted little-endian (PutICRC).
//
// Contract: to run the CRC in one pass over contiguous bytes without allocating, ICRC
// writes the masked values into l3 and restores the original bytes before it returns.
// l3 must therefore be writable and not read by another goroutine during the call.
func ICRC(l3 []byte, udp int) uint32 { return frameICRC(l3, 0, len(l3), udp) }

// frameICRC is ICRC over frame[l3:end], the IP header at l3 and the UDP header at
// l3+udp, with ICRC's contract for the whole of frame. The CRC instructions
// (hash/crc32's CLMUL path) fold 16 bytes at a time and leave the last len%16 to a
// loop of one byte per step, which costs a 4 KiB packet as much as 10% of its CRC.
// When at least 8 bytes precede l3 (the Ethernet header of a frame), frameICRC masks
// the 8 bytes before l3 to the LRH's 0xFF for the call and runs the CRC from there
// instead of from crcAfterLRH, whichever of the two leaves the shorter tail (for full
// 4096-byte payloads over IPv4, none).
func frameICRC(frame []byte, l3, end, udp int) uint32 {
	l3b := frame[l3:end]
	bth := udp + UDPSize
	_ = l3b[bth+bthMaskedByte] // one bounds check for the writes below
	const (
		sum0, sum1         = udpChecksum, udpChecksum + 1
		tos, ttl, ck0, ck1 = ipv4TOS, ipv4TTL, ipv4Checksum, ipv4Checksum + 1
		vtf, hopLimit      = ipv6VersTCFlow, ipv6HopLimit
	)
	udpSum := [2]byte{l3b[udp+sum0], l3b[udp+sum1]}
	bthByte := l3b[bth+bthMaskedByte]
	l3b[udp+sum0], l3b[udp+sum1], l3b[bth+bthMaskedByte] = 0xFF, 0xFF, 0xFF
	var word [4]byte
	var hop byte
	ipv4 := IPv4(l3b).Version() == 4
	if ipv4 {
		word, hop = [4]byte{l3b[tos], l3b[ck0], l3b[ck1], 0}, l3b[ttl]
		l3b[tos], l3b[ttl], l3b[ck0], l3b[ck1] = 0xFF, 0xFF, 0xFF, 0xFF
	} else {
		word, hop = [4]byte(l3b[vtf:vtf+4]), l3b[hopLimit]
		l3b[vtf] |= 0x0F // version stays; traffic class and flow label become ones
		l3b[vtf+1], l3b[vtf+2], l3b[vtf+3], l3b[hopLimit] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	var crc uint32
	if n := end - l3; l3 >= lrhSize && n%16 >= lrhSize {
		lrh := [lrhSize]byte(frame[l3-lrhSize : l3])
		copy(frame[l3-lrhSize:l3], maskedLRH[:])
		crc = crc32.Update(0, crc32.IEEETable, frame[l3-lrhSize:end])
		copy(frame[l3-lrhSize:l3], lrh[:])
	} else {
		crc = crc32.Update(crcAfterLRH, crc32.IEEETable, l3b)
	}
	if ipv4 {
		l3b[tos], l3b[ttl], l3b[ck0], l3b[ck1] = word[0], hop, word[1], word[2]
	} else {
		copy(l3b[vtf:vtf+4], word[:])
		l3b[hopLimit] = hop
	}
	l3b[udp+sum0], l3b[udp+sum1], l3b[bth+bthMaskedByte] = udpSum[0], udpSum[1], bthByte
	return crc
}

// PutICRC writes an ICRC value in wire order (little-endian, as rxe and NICs do).
func PutICRC(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// ReadICRC reads an ICRC value in wire order.
func ReadICRC(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// SourcePort rules. RoCEv2 uses the UDP source port as flow entropy (IBTA A17.4.3);
// rocelab derives it exactly as the Linux kernel does for rxe, so its packets match
// the kernel's byte for byte:
//
//   - connected QPs (RC, UC): rdma_get_udp_sport(flow_label, lqpn, rqpn) from
//     include/rdma/ib_verbs.h — the flow label, or one computed from the two QPNs when
//     it is 0, folded to 14 bits and placed in 0xC000..0xFFFF;
//   - datagram QPs (UD, GSI): 0xC000 + hash_32(qpn, 14), as rxe_qp_init_req sets it.
const sourcePortBase = 0xC000

// ConnectedSourcePort returns the UDP source port of a connected (RC or UC) QP with
// local QPN lqpn and remote QPN rqpn, given the path's flow label (0 = derive).
func ConnectedSourcePort(flowLabel uint32, lqpn, rqpn QPN) uint16 {
	fl := flowLabel & 0xFFFFF
	if fl == 0 {
		fl = FlowLabel(lqpn, rqpn)
	}
	low, high := fl&0x3FFF, fl&0xFC000
	low ^= high >> 14
	return uint16(low | sourcePortBase)
}

// FlowLabel computes the IPv6 flow label of a connected QP pair as the kernel's
// rdma_calc_flow_label does when the application gives none.
func FlowLabel(lqpn, rqpn QPN) uint32 {
	fl := uint64(lqpn) * uint64(rqpn)
	fl ^= fl >> 20
	fl ^= fl >> 40
	return uint32(fl & 0xFFFFF)
}

// DatagramSourcePort returns the UDP source port of a UD or GSI QP.
func DatagramSourcePort(qpn QPN) uint16 {
	const goldenRatio32 = 0x61C88647 // include/linux/hash.h
	return sourcePortBase + uint16((uint32(qpn)*goldenRatio32)>>(32-14))
}
