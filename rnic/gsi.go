package rnic

import (
	"net/netip"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/cm"
)

// The GSI QP (QPN 1) carries connection management: every CM message is one 256-byte
// MAD in a UD SEND to QPN 1, with a DETH naming the GSI Q_Key and source QPN 1, from
// the UDP source port the kernel's rxe gives QP 1. The device terminates it itself
// (as the kernel's MAD layer does): receiveGSI hands valid CM MADs to the CM agent
// (cm.go), sendMAD sends the agent's.

// gsi is the GSI QP's send state.
type gsi struct {
	psn roce.PSN // next PSN of the GSI QP's sends
	tx  roce.Builder
}

// receiveGSI takes a decoded, ICRC-verified packet for QPN 1.
func (d *Device) receiveGSI(p *roce.Packet) {
	if p.BTH.Opcode() != roce.OpUDSendOnly || p.DETH == nil || p.DETH.QKey() != cm.GSIQKey {
		d.stats.RxMalformed++
		return
	}
	m, err := cm.Parse(p.Payload)
	if err != nil {
		d.stats.CMMalformed++
		return
	}
	var src, dst netip.Addr
	if p.IPv4 != nil {
		src, dst = p.IPv4.Src(), p.IPv4.Dst()
	} else {
		src, dst = p.IPv6.Src(), p.IPv6.Dst()
	}
	d.stats.CMRcvd++
	d.cm.receive(m, src, dst, p.Ethernet.Src(), p.DETH.SrcQP())
}

// sendMAD sends mad from src to dst's GSI QP, through dstMAC.
func (d *Device) sendMAD(mad cm.MAD, src, dst netip.Addr, dstMAC [6]byte) {
	g := &d.gsi
	g.tx = roce.Builder{
		DstMAC: dstMAC, SrcMAC: d.cfg.MAC, Src: src, Dst: dst, TTL: roce.DefaultTTL,
		SrcPort: roce.DatagramSourcePort(roce.GSIQPN),
		BTH: roce.BTHFields{Opcode: roce.OpUDSendOnly, PKey: roce.DefaultPKey, DestQP: roce.GSIQPN,
			AckReq: true, PSN: g.psn},
		DETH:    roce.DETHFields{QKey: cm.GSIQKey, SrcQP: roce.GSIQPN},
		Payload: mad,
	}
	g.psn = g.psn.Add(1)
	f, buf := d.frameBuffer()
	if f == nil {
		d.stats.CMSendErrors++
		return
	}
	n, err := g.tx.Build(buf)
	if err != nil {
		f.Release()
		d.stats.CMSendErrors++
		return
	}
	f.SetLen(n)
	d.stats.CMSent++
	d.sched.control(f)
}
