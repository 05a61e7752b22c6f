package cm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// ServiceID names the service a REQ or SIDR_REQ asks for. rdma_cm derives it from
// the port space and the destination port (IBTA annex A11, "RDMA IP CM Service"):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    0x00000000                                 |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     0x00      |   PortSpace (0x01nn)  ...     |     Port      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// that is ServiceID = PortSpace<<16 | Port.
type ServiceID uint64

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space).
type PortSpace uint16

// Port spaces of rdma_cm.
const (
	PortSpaceIPoIB PortSpace = 0x0002 // RDMA_PS_IPOIB
	PortSpaceTCP   PortSpace = 0x0106 // RC connections: rping, ib_write_bw -R
	PortSpaceUDP   PortSpace = 0x0111 // UD through SIDR: udaddy
	PortSpaceIB    PortSpace = 0x013F // RDMA_PS_IB: any QP type
)

// UDPQKey is the Q_Key of rdma_cm's UDP port space (RDMA_UDP_QKEY): the UD QPs of
// both sides use it and the SIDR_REP announces it.
const UDPQKey uint32 = 0x01234567

// IPServiceID returns the service ID rdma_cm uses for port in port space ps.
func IPServiceID(ps PortSpace, port uint16) ServiceID {
	return ServiceID(uint64(ps)<<16 | uint64(port))
}

// PortSpace returns the port space of an IP service ID.
func (s ServiceID) PortSpace() PortSpace { return PortSpace(s >> 16) }

// Port returns the port of an IP service ID.
func (s ServiceID) Port() uint16 { return uint16(s) }

// IsIP reports whether s is an rdma_cm IP service ID (one of the port spaces above).
func (s ServiceID) IsIP() bool {
	switch s >> 16 {
	case ServiceID(PortSpaceIPoIB), ServiceID(PortSpaceTCP), ServiceID(PortSpaceUDP), ServiceID(PortSpaceIB):
		return true
	}
	return false
}

// String returns the service ID in hexadecimal, 16 digits.
func (s ServiceID) String() string { return fmt.Sprintf("%#016x", uint64(s)) }

// CMAHeader is a view of the header the kernel's rdma_cm puts first in the private
// data of a REQ or SIDR_REQ (struct cma_hdr): the connection's IP addresses and the
// source port, which the IB CM itself has no place for. The consumer's private data
// follows it.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Maj.  | Min.  |IPVer  | Resv. |         Source Port           | 0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Source Address (128 bits)                      | 4
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Destination Address (128 bits)                 | 20
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// An IPv4 address sits in the last 4 bytes of its 16, after 12 zero bytes (not as an
// IPv4-mapped IPv6 address). The version is 0.0.
type CMAHeader []byte

// CMAHeaderSize is the size of the CMA header.
const CMAHeaderSize = 36

// CMAVersion is the only CMA header version.
const CMAVersion = 0x00

// Offsets of the CMA header's fields.
const (
	cmaVersion   = 0 // major and minor version (4 bits each)
	cmaIPVersion = 1 // IP version (top 4 bits)
	cmaSrcPort   = 2 // 16 bits
	cmaSrcAddr   = 4
	cmaDstAddr   = 20
	cmaAddrSize  = 16
	cmaIPv4At    = cmaAddrSize - 4 // where an IPv4 address sits in its 16 bytes
)

// Version returns the header's version (CMAVersion).
func (h CMAHeader) Version() uint8 { return h[cmaVersion] }

// IPVersion returns the IP version of the addresses: 4 or 6.
func (h CMAHeader) IPVersion() uint8 { return h[cmaIPVersion] >> 4 }

// SrcPort returns the connecting side's port.
func (h CMAHeader) SrcPort() uint16 { return binary.BigEndian.Uint16(h[cmaSrcPort:]) }

// SrcAddr returns the connecting side's address.
func (h CMAHeader) SrcAddr() netip.Addr {
	return cmaAddr(h.IPVersion(), h[cmaSrcAddr:cmaSrcAddr+cmaAddrSize])
}

// DstAddr returns the address connected to.
func (h CMAHeader) DstAddr() netip.Addr {
	return cmaAddr(h.IPVersion(), h[cmaDstAddr:cmaDstAddr+cmaAddrSize])
}

// cmaAddr returns the address in a CMA header's 16-byte field b.
func cmaAddr(version uint8, b []byte) netip.Addr {
	if version == 4 {
		return netip.AddrFrom4([4]byte(b[cmaIPv4At:cmaAddrSize]))
	}
	return netip.AddrFrom16([cmaAddrSize]byte(b))
}

// ParseCMAHeader returns the view of the CMA header at the start of private data,
// checking its version and IP version.
func ParseCMAHeader(pd []byte) (CMAHeader, error) {
	if len(pd) < CMAHeaderSize {
		return nil, parseErr(ErrTruncated, "%d bytes of private data, a CMA header has %d", len(pd), CMAHeaderSize)
	}
	h := CMAHeader(pd[:CMAHeaderSize])
	if h.Version() != CMAVersion {
		return nil, parseErr(ErrBadField, "CMA header version %#02x", h.Version())
	}
	if v := h.IPVersion(); v != 4 && v != 6 {
		return nil, parseErr(ErrBadField, "CMA header IP version %d", v)
	}
	return h, nil
}

// Encode writes a CMA header for a connection from src:srcPort to dst; both addresses
// must be of the same family (IPv4-mapped IPv6 addresses count as IPv4).
func (h CMAHeader) Encode(src netip.Addr, srcPort uint16, dst netip.Addr) error {
	src, dst = src.Unmap(), dst.Unmap()
	if src.Is4() != dst.Is4() || !src.IsValid() || !dst.IsValid() {
		return fmt.Errorf("cm: CMA header for %v -> %v: addresses of different families", src, dst)
	}
	clear(h[:CMAHeaderSize])
	h[cmaVersion] = CMAVersion
	binary.BigEndian.PutUint16(h[cmaSrcPort:], srcPort)
	if src.Is4() {
		h[cmaIPVersion] = 4 << 4
		s, d := src.As4(), dst.As4()
		copy(h[cmaSrcAddr+cmaIPv4At:cmaSrcAddr+cmaAddrSize], s[:])
		copy(h[cmaDstAddr+cmaIPv4At:cmaDstAddr+cmaAddrSize], d[:])
		return nil
	}
	h[cmaIPVersion] = 6 << 4
	s, d := src.As16(), dst.As16()
	copy(h[cmaSrcAddr:cmaSrcAddr+cmaAddrSize], s[:])
	copy(h[cmaDstAddr:cmaDstAddr+cmaAddrSize], d[:])
	return nil
}
