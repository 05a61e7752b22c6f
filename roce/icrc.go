package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// ICRCSize is the size of the invariant CRC that ends every RoCEv2 packet.
const ICRCSize = 4

// ones supplies the all-ones bytes that stand in for masked fields. It is a package
// variable rather than a local so that handing it to crc32 never allocates.
var ones = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// ipv6FirstByte[v] is the first IPv6 header byte with version v and the traffic class's
// high nibble masked to ones.
var ipv6FirstByte = func() (t [16][1]byte) {
	for v := range t {
		t[v][0] = byte(v)<<4 | 0x0F
	}
	return t
}()

// ICRC computes the invariant CRC of a RoCEv2 packet (IBTA Annex A17.3.3; Linux
// rxe_icrc.c). l3 holds the packet from the first byte of the IP header through the
// last pad byte, without the ICRC; udp is the offset of the UDP header in l3.
//
// The CRC is the zlib/IEEE CRC-32 over 8 bytes of 0xFF (the masked LRH of the native
// IB packet), then the IP header, UDP header, BTH, extension headers, payload and pad,
// with the fields that routers may change set to all ones first: IPv4 TOS, TTL and
// header checksum; IPv6 traffic class, flow label and hop limit; the UDP checksum; and
// BTH byte 4 (FECN, BECN, Resv6). The masking is done by feeding ones in place of
// those bytes, so l3 is neither copied nor modified and nothing is allocated.
//
// The result is transmitted little-endian (PutICRC).
func ICRC(l3 []byte, udp int) uint32 {
	crc := crc32.Update(0, crc32.IEEETable, ones[:8])
	if l3[0]>>4 == 4 {
		ihl := udp
		crc = crc32.Update(crc, crc32.IEEETable, l3[0:1])
		crc = crc32.Update(crc, crc32.IEEETable, ones[:1]) // TOS
		crc = crc32.Update(crc, crc32.IEEETable, l3[2:8])
		crc = crc32.Update(crc, crc32.IEEETable, ones[:1]) // TTL
		crc = crc32.Update(crc, crc32.IEEETable, l3[9:10])
		crc = crc32.Update(crc, crc32.IEEETable, ones[:2]) // header checksum
		crc = crc32.Update(crc, crc32.IEEETable, l3[12:ihl])
	} else {
		crc = crc32.Update(crc, crc32.IEEETable, ipv6FirstByte[l3[0]>>4][:])
		crc = crc32.Update(crc, crc32.IEEETable, ones[:3]) // traffic class, flow label
		crc = crc32.Update(crc, crc32.IEEETable, l3[4:7])
		crc = crc32.Update(crc, crc32.IEEETable, ones[:1]) // hop limit
		crc = crc32.Update(crc, crc32.IEEETable, l3[8:udp])
	}
	crc = crc32.Update(crc, crc32.IEEETable, l3[udp:udp+6])
	crc = crc32.Update(crc, crc32.IEEETable, ones[:2]) // UDP checksum
	bth := udp + UDPSize
	crc = crc32.Update(crc, crc32.IEEETable, l3[bth:bth+bthMaskedByte])
	crc = crc32.Update(crc, crc32.IEEETable, ones[:1]) // FECN, BECN, Resv6
	return crc32.Update(crc, crc32.IEEETable, l3[bth+bthMaskedByte+1:])
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
