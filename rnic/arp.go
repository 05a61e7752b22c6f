package rnic

import (
	"encoding/binary"
	"net/netip"

	"github.com/rocelab/rocelab/roce"
)

// The host answers ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861) for its GIDs,
// learns its neighbours' MACs from every ARP packet and neighbour advertisement it
// sees, and asks for a MAC it needs when a QP or an address handle names a peer it has
// not learned (the verbs call fails with ErrUnresolved meanwhile, as rxe fails RTR).

const (
	arpSize        = 28
	icmpv6         = 58
	ndpSolicit     = 135
	ndpAdvert      = 136
	ndpSize        = 32 // ICMPv6 header, reserved/flags, target, one link-layer option
	optSourceLLA   = 1
	optTargetLLA   = 2
	advertSolicit  = 0x40 // Solicited flag
	advertOverride = 0x20 // Override flag
)

var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// neighbours is the device's ARP/NDP cache.
type neighbours struct {
	macs map[netip.Addr][6]byte
}

// maxNeighbours bounds the entries the device learns from ARP and NDP: any host can
// send those from any address, and the table must not grow without bound for it. A
// full table still updates the addresses it holds (Stats.NeighboursFull counts the
// others). Far above a lab's hosts × their addresses.
const maxNeighbours = 16384

// learnNeighbour records mac as ip's, unless ip is new and the table is full.
func (d *Device) learnNeighbour(ip netip.Addr, mac [6]byte) {
	if _, ok := d.neigh.macs[ip]; !ok && len(d.neigh.macs) >= maxNeighbours {
		d.stats.NeighboursFull++
		return
	}
	d.neigh.macs[ip] = mac
}

func (n *neighbours) init() { n.macs = make(map[netip.Addr][6]byte) }

// AddNeighbour installs a static neighbour entry, as `ip neigh replace` does.
func (d *Device) AddNeighbour(ip netip.Addr, mac [6]byte) { d.neigh.macs[ip.Unmap()] = mac }

// Neighbour returns the MAC of ip: the device's own for its own addresses (the port
// loops frames to it back), else the one learned, else the one Config.Neighbours gives.
func (d *Device) Neighbour(ip netip.Addr) ([6]byte, bool) {
	ip = ip.Unmap()
	if d.ownsAddr(ip) {
		return d.cfg.MAC, true
	}
	if m, ok := d.neigh.macs[ip]; ok {
		return m, true
	}
	m, ok := d.cfg.Neighbours[ip]
	return m, ok
}

// resolve returns the MAC of dst or sends a request for it and fails with ErrUnresolved.
func (d *Device) resolve(src, dst netip.Addr) ([6]byte, error) {
	if mac, ok := d.Neighbour(dst); ok {
		return mac, nil
	}
	if src.Unmap().Is4() {
		d.sendARP(1, broadcastMAC, src.Unmap(), [6]byte{}, dst.Unmap())
	} else {
		d.sendNDP(ndpSolicit, solicitedNodeMAC(dst), src, solicitedNode(dst), dst)
	}
	d.stats.ARPReqs++
	return [6]byte{}, errorf(ErrUnresolved, "no MAC for %v yet: asked the network, retry", dst)
}

func (d *Device) ownsAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, g := range d.cfg.GIDs {
		if g.Unmap() == a {
			return true
		}
	}
	return false
}

// receiveARP handles an ARP frame; it reports false for a malformed one.
func (d *Device) receiveARP(b []byte) bool {
	if len(b) < roce.EthernetSize+arpSize {
		return false
	}
	a := b[roce.EthernetSize:]
	if binary.BigEndian.Uint16(a[0:]) != 1 || binary.BigEndian.Uint16(a[2:]) != roce.EtherTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return false
	}
	op := binary.BigEndian.Uint16(a[6:])
	sha, spa, tpa := [6]byte(a[8:14]), netip.AddrFrom4([4]byte(a[14:18])), netip.AddrFrom4([4]byte(a[24:28]))
	if spa.IsValid() && !spa.IsUnspecified() {
		d.learnNeighbour(spa, sha)
	}
	if op == 1 && d.cfg.Host == nil && d.ownsAddr(tpa) {
		d.sendARP(2, sha, tpa, sha, spa)
		d.stats.ARPReplies++
	}
	return true
}

func (d *Device) sendARP(op uint16, dstMAC [6]byte, spa netip.Addr, tha [6]byte, tpa netip.Addr) {
	f := d.cfg.Pool.Get()
	b, _ := f.SetLen(60) // the minimum Ethernet frame, zero padded
	clear(b)
	eth := roce.Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(d.cfg.MAC)
	eth.SetEtherType(roce.EtherTypeARP)
	a := b[roce.EthernetSize:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], roce.EtherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:], d.cfg.MAC[:])
	s, t := spa.As4(), tpa.As4()
	copy(a[14:], s[:])
	copy(a[18:], tha[:])
	copy(a[24:], t[:])
	d.sched.control(f)
}

// receiveNDP handles an ICMPv6 packet at l3 (IPv6 header); it reports false for a
// malformed neighbour solicitation or advertisement. Other ICMPv6 is not ours.
func (d *Device) receiveNDP(b []byte, l3 int) bool {
	ip := roce.IPv6(b[l3:])
	icmp := b[l3+roce.IPv6Size:]
	if len(icmp) < 4 {
		return false // not even an ICMPv6 header
	}
	// Other ICMPv6 messages (the kernel's router solicitations, MLD reports) are the
	// host's business and may be shorter than a neighbour message: only the types the
	// device reads must hold a target address.
	typ := icmp[0]
	if typ != ndpSolicit && typ != ndpAdvert {
		return true
	}
	if len(icmp) < ndpSize-8 {
		return false
	}
	target := netip.AddrFrom16([16]byte(icmp[8:24]))
	var lla [6]byte
	hasLLA := len(icmp) >= ndpSize && icmp[25] == 1 && (icmp[24] == optSourceLLA || icmp[24] == optTargetLLA)
	if hasLLA {
		lla = [6]byte(icmp[26:32])
	}
	src := ip.Src()
	switch {
	case typ == ndpAdvert && hasLLA:
		d.learnNeighbour(target, lla)
	case typ == ndpSolicit && hasLLA && !src.IsUnspecified():
		d.learnNeighbour(src, lla)
		if d.cfg.Host == nil && d.ownsAddr(target) {
			d.sendNDP(ndpAdvert, lla, target, src, target)
			d.stats.ARPReplies++
		}
	}
	return true
}

// sendNDP sends a solicitation for target or an advertisement of target.
func (d *Device) sendNDP(typ uint8, dstMAC [6]byte, src, dst, target netip.Addr) {
	f := d.cfg.Pool.Get()
	n := roce.EthernetSize + roce.IPv6Size + ndpSize
	b, _ := f.SetLen(n)
	clear(b)
	eth := roce.Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(d.cfg.MAC)
	eth.SetEtherType(roce.EtherTypeIPv6)
	ip := roce.IPv6(b[roce.EthernetSize:])
	ip[0] = 6 << 4
	ip.SetPayloadLen(ndpSize)
	ip.SetNextHeader(icmpv6)
	ip.SetHopLimit(255)
	s, t := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], t[:])
	icmp := b[roce.EthernetSize+roce.IPv6Size:]
	icmp[0] = typ
	tg := target.As16()
	copy(icmp[8:], tg[:])
	icmp[24], icmp[25] = optSourceLLA, 1
	if typ == ndpAdvert {
		icmp[4] = advertSolicit | advertOverride
		icmp[24] = optTargetLLA
	}
	copy(icmp[26:], d.cfg.MAC[:])
	binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(s, t, icmp))
	d.sched.control(f)
}

func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	sum += uint32(len(msg)) + icmpv6
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}

// solicitedNode returns the solicited-node multicast address of a (RFC 4291 2.7.1).
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// solicitedNodeMAC is the Ethernet multicast MAC of a's solicited-node address.
func solicitedNodeMAC(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x33, 0x33, 0xff, b[13], b[14], b[15]}
}
