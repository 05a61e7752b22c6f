package roce

import (
	"fmt"
	"net/netip"
)

// UDPPort is the IANA-assigned RoCEv2 UDP destination port.
const UDPPort = 4791

// PSN is a 24-bit packet sequence number. Arithmetic and comparison wrap modulo 2^24;
// comparison follows IBTA 9.7.2: a PSN is "before" another if it lies within the
// half of the sequence space behind it. The zero value is PSN 0.
type PSN uint32

// PSNMask keeps the 24 significant bits of a PSN.
const PSNMask = 0x00FFFFFF

// Add returns p advanced by n, modulo 2^24 (n may be negative).
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & PSNMask) }

// Diff returns the signed distance p − q in the range [−2^23, 2^23).
func (p PSN) Diff(q PSN) int32 {
	return int32(uint32(p-q)<<8) >> 8
}

// Before reports whether p precedes q in sequence-space order.
func (p PSN) Before(q PSN) bool { return p.Diff(q) < 0 }

// After reports whether p follows q in sequence-space order.
func (p PSN) After(q PSN) bool { return p.Diff(q) > 0 }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p&^PSNMask == 0 }

// String returns the PSN in hexadecimal.
func (p PSN) String() string { return fmt.Sprintf("%#06x", uint32(p)) }

// QPN is a 24-bit queue pair number. QPN 0 is the SMI QP, QPN 1 the GSI QP (used by the
// connection manager); the zero value is the SMI QP.
type QPN uint32

// QPNMask keeps the 24 significant bits of a QPN.
const QPNMask = 0x00FFFFFF

// GSIQPN is the general services QP that carries CM MADs.
const GSIQPN QPN = 1

// Valid reports whether q fits in 24 bits.
func (q QPN) Valid() bool { return q&^QPNMask == 0 }

// String returns the QPN in hexadecimal.
func (q QPN) String() string { return fmt.Sprintf("%#06x", uint32(q)) }

// PKey is a partition key. Bit 15 is the membership bit (1 = full member); the default
// partition, which rxe and RoCEv2 NICs use, is 0xFFFF.
type PKey uint16

// DefaultPKey is the default partition with full membership.
const DefaultPKey PKey = 0xFFFF

// FullMember reports whether the membership bit is set.
func (k PKey) FullMember() bool { return k&0x8000 != 0 }

// Matches reports whether two P_Keys are in the same partition and at least one of them
// is a full member (IBTA 10.9.3).
func (k PKey) Matches(o PKey) bool {
	return k&0x7FFF == o&0x7FFF && k&0x7FFF != 0 && (k.FullMember() || o.FullMember())
}

// GID is a 128-bit global identifier. For RoCEv2 it is an IPv6 address or an
// IPv4-mapped IPv6 address (::ffff:a.b.c.d); the zero value is the all-zero GID.
type GID [16]byte

// GIDFromAddr returns the GID of an IP address: IPv4 addresses become IPv4-mapped GIDs.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr returns the IP address a GID stands for: IPv4 for an IPv4-mapped GID, IPv6
// otherwise.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsIPv4 reports whether g is an IPv4-mapped GID (RoCEv2 over IPv4).
func (g GID) IsIPv4() bool { return netip.AddrFrom16(g).Is4In6() }

// String returns the GID as an IPv6 address (::ffff:a.b.c.d for an IPv4 one).
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// MTU is an IBTA path MTU: 256, 512, 1024, 2048 or 4096 bytes of BTH payload. The zero
// value is invalid.
type MTU uint16

// Path MTUs, and their ibv_mtu enum values 1..5 via Enum.
const (
	MTU256  MTU = 256
	MTU512  MTU = 512
	MTU1024 MTU = 1024
	MTU2048 MTU = 2048
	MTU4096 MTU = 4096
)

// Valid reports whether m is one of the five IBTA path MTUs.
func (m MTU) Valid() bool {
	switch m {
	case MTU256, MTU512, MTU1024, MTU2048, MTU4096:
		return true
	}
	return false
}

// Enum returns the ibv_mtu value (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5), or 0 if m is
// not valid.
func (m MTU) Enum() int {
	for e, v := range [...]MTU{MTU256, MTU512, MTU1024, MTU2048, MTU4096} {
		if m == v {
			return e + 1
		}
	}
	return 0
}

// MTUFromEnum returns the MTU for an ibv_mtu value, or an error naming the bad value.
func MTUFromEnum(e int) (MTU, error) {
	if e < 1 || e > 5 {
		return 0, fmt.Errorf("roce: ibv_mtu %d out of range 1..5", e)
	}
	return MTU(256 << (e - 1)), nil
}

// MTUForLinkMTU returns the largest path MTU whose packets fit in a netdev MTU of
// linkMTU bytes, by the Linux kernel's rule (iboe_get_mtu in include/rdma/ib_addr.h):
// reserve GRH 40 + UDP 8 + BTH 12 + XRC ETH 4 + AtomicETH 28 + ICRC 4 = 96 bytes. A
// 1500-byte netdev gives 1024, as rxe reports. It returns 0 below 352 bytes.
func MTUForLinkMTU(linkMTU int) MTU {
	const reserved = 40 + 8 + 12 + 4 + 28 + 4
	for m := MTU4096; m >= MTU256; m /= 2 {
		if int(m)+reserved <= linkMTU {
			return m
		}
	}
	return 0
}

// String returns the MTU in bytes.
func (m MTU) String() string { return fmt.Sprintf("%d", uint16(m)) }
