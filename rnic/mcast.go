package rnic

import (
	"net/netip"
	"slices"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// Multicast, as rxe does it (rxe_mcast.c, rxe_recv.c rxe_rcv_mcast_pkt): the device
// keeps a list of groups, each with the UD QPs attached to it. A RoCEv2 frame to a
// multicast IP address with DestQP 0xFFFFFF is delivered, one copy each, to every QP
// attached to its destination GID; none of it goes to the host's kernel. Senders need
// nothing special: a UD work request to a multicast GID goes to the group's MAC
// (mcastMAC), and the switches flood it.

// The limits rxe advertises (rxe_param.h), kept by AttachMcast.
const (
	MaxMcastGroups      = 8192
	MaxMcastQPAttach    = 56
	MaxTotalMcastAttach = MaxMcastGroups * MaxMcastQPAttach
)

// mcastGroups maps a group's address (unmapped, as netip keeps it) to its QPs, in
// attach order.
type mcastGroups map[netip.Addr][]*QP

// McastGroup is one multicast group of a device, for status.
type McastGroup struct {
	GID roce.GID
	QPs []roce.QPN
}

// isMulticastGID is rdma_is_multicast_addr: ff00::/8, or an IPv4-mapped 224.0.0.0/4.
func isMulticastGID(g roce.GID) bool { return g.Addr().IsMulticast() }

// mcastMAC is the Ethernet address of an IP multicast group (RFC 1112 and RFC 2464):
// 01:00:5e and the low 23 bits of an IPv4 address, 33:33 and the low 32 bits of an
// IPv6 one.
func mcastMAC(a netip.Addr) [6]byte {
	b := a.As16()
	if a.Is4() {
		return [6]byte{0x01, 0x00, 0x5e, b[13] & 0x7f, b[14], b[15]}
	}
	return [6]byte{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// AttachMcast attaches UD QP x to multicast group gid (ibv_attach_mcast). Attaching a
// member again is no error. It fails with ErrInvalidArgument for a GID that is not
// multicast or a QP that is not UD (ib_attach_mcast), and with ErrNoMemory past
// rxe's limits.
func (d *Device) AttachMcast(x *QP, gid roce.GID) error {
	if !isMulticastGID(gid) {
		return errorf(ErrInvalidArgument, "attach mcast: %v is not a multicast GID", gid)
	}
	if x.q.Type() != qp.UD {
		return errorf(ErrInvalidArgument, "attach mcast: QP %v is %v, not UD", x.QPN(), x.q.Type())
	}
	a := gid.Addr()
	members, ok := d.mcast[a]
	if slices.Contains(members, x) {
		return nil
	}
	switch {
	case !ok && len(d.mcast) >= MaxMcastGroups:
		return errorf(ErrNoMemory, "attach mcast: the device has %d groups already", len(d.mcast))
	case len(members) >= MaxMcastQPAttach:
		return errorf(ErrNoMemory, "attach mcast: group %v has %d QPs already", gid, len(members))
	}
	d.mcast[a] = append(members, x)
	return nil
}

// DetachMcast detaches x from group gid (ibv_detach_mcast); ErrInvalidArgument if x is
// not a member, as rxe answers.
func (d *Device) DetachMcast(x *QP, gid roce.GID) error {
	if !isMulticastGID(gid) {
		return errorf(ErrInvalidArgument, "detach mcast: %v is not a multicast GID", gid)
	}
	a := gid.Addr()
	i := slices.Index(d.mcast[a], x)
	if i < 0 {
		return errorf(ErrInvalidArgument, "detach mcast: QP %v is not attached to %v", x.QPN(), gid)
	}
	d.dropMember(a, i)
	return nil
}

// detachAll detaches a QP being destroyed from every group, as uverbs does for a
// user QP before destroying it.
func (d *Device) detachAll(x *QP) {
	for a, members := range d.mcast {
		if i := slices.Index(members, x); i >= 0 {
			d.dropMember(a, i)
		}
	}
}

func (d *Device) dropMember(a netip.Addr, i int) {
	members := slices.Delete(d.mcast[a], i, i+1)
	if len(members) == 0 {
		delete(d.mcast, a)
		return
	}
	d.mcast[a] = members
}

// McastGroups returns the device's groups and their QPs, sorted by GID.
func (d *Device) McastGroups() []McastGroup {
	out := make([]McastGroup, 0, len(d.mcast))
	for a, members := range d.mcast {
		g := McastGroup{GID: roce.GIDFromAddr(a)}
		for _, x := range members {
			g.QPs = append(g.QPs, x.QPN())
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b McastGroup) int { return slices.Compare(a.GID[:], b.GID[:]) })
	return out
}

// localGroup reports whether frame b goes to a multicast group one of the device's
// own QPs is attached to.
func (d *Device) localGroup(b []byte) bool {
	if len(d.mcast) == 0 || len(b) == 0 || b[0]&1 == 0 { // no group, or not a group MAC
		return false
	}
	l, err := roce.Locate(b)
	if err != nil || l.IPVersion == 0 {
		return false
	}
	_, ok := d.mcast[l.Dst(b)]
	return ok
}

// receiveMcast delivers a decoded multicast packet to every QP attached to its
// destination group. Each QP checks its own Q_Key, like a UD QP does.
func (d *Device) receiveMcast(p *roce.Packet, dst netip.Addr, now int64) {
	members := d.mcast[dst]
	if p.BTH.DestQP() != roce.QPNMask || len(members) == 0 {
		d.stats.RxMcastDropped++
		return
	}
	for _, x := range members {
		accepted := x.q.RxDataBytes()
		x.q.Receive(now, p)
		d.stats.RxDataBytes += x.q.RxDataBytes() - accepted
		x.afterEvent()
	}
}
