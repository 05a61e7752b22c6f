package qp

import "github.com/rocelab/rocelab/roce"

// Receive handles one received packet, which the caller has decoded and whose ICRC it
// has verified (the rnic does both once, to find the QP by BTH DestQP). Requests go to
// the responder, responses to the completer. Packets for another QP, of another
// transport, with a foreign P_Key or that the QP's state does not accept are counted
// and dropped; no input makes Receive panic or disturbs the QP's state.
func (q *QP) Receive(now int64, p *roce.Packet) {
	info := p.Info()
	// A UD QP also takes packets to the multicast QPN: the device hands it those of the
	// groups it is attached to.
	dest := p.BTH.DestQP()
	if info == nil || (dest != q.cfg.QPN && (dest != roce.QPNMask || q.cfg.Type != UD)) || info.Transport != transportOf(q.cfg.Type) {
		q.ctr.DropWrongQP++
		return
	}
	if !p.BTH.PKey().Matches(roce.DefaultPKey) {
		q.ctr.DropPKey++
		return
	}
	if info.Request() {
		q.respond(p)
	} else {
		q.complete(now, p)
	}
}

// ReceiveFrame decodes an Ethernet frame, verifies its ICRC and hands it to Receive. A
// frame that does not decode or whose ICRC is wrong is counted in DropMalformed.
func (q *QP) ReceiveFrame(now int64, frame []byte) {
	if q.rx.Decode(frame) != nil || !q.rx.ICRCOK() {
		q.ctr.DropMalformed++
		return
	}
	q.Receive(now, &q.rx)
	q.rx = roce.Packet{} // keep no reference to the caller's frame
}

// rcOpcode maps an XRC opcode to the RC opcode it carries in the XRC group, so that
// the RC code paths compare one set of constants; other opcodes are returned as they are.
func (q *QP) rcOpcode(op roce.Opcode) roce.Opcode {
	if q.cfg.Type.isXRC() {
		return op - roce.XRCBase
	}
	return op
}

// opcodeBase is what the QP adds to an RC opcode to send it: roce.XRCBase for XRC.
func (q *QP) opcodeBase() roce.Opcode {
	if q.cfg.Type.isXRC() {
		return roce.XRCBase
	}
	return 0
}

func transportOf(t Type) roce.Transport {
	switch t {
	case UC:
		return roce.TransportUC
	case UD:
		return roce.TransportUD
	case XRCSend, XRCRecv:
		return roce.TransportXRC
	}
	return roce.TransportRC
}
