package rnic

import (
	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/roce"
)

// QP is a queue pair (ibv_qp): a transport engine of package qp plus what the device
// keeps for it — its congestion-control state, its pacing deadline and its transport
// timer.
type QP struct {
	dev    *Device
	pd     *PD
	q      *qp.QP
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	// XRC_RECV: the domain's opening it was created through, the SRQ of the message
	// under way (xrcSRQ), its memory views by the SRQs' PDs, and the handles (creation
	// and OpenQP) that hold it.
	xrcd     *XRCD
	xsrq     *SRQ
	xviews   map[*PD]*memView
	opens    int
	cc       *flowCC
	nextSend clock.Time // the pacer lets the QP send its next request from here on
	// pacedLen and pacedRate are the length of the last request frame and the rate its
	// gap to nextSend was timed at; retime moves nextSend when the rate changes.
	pacedLen  int
	pacedRate float64
	quantum   int // DWRR: bytes added to deficit per turn
	deficit   int // DWRR: bytes the QP may still send in its turn
	timer     *clock.Timer
	state     qp.State // as last seen, to raise EventQPFatal once on a spontaneous ERR
	// commEst: EventCommEst raised for this stay in RTR; rtrRequests: the requests the
	// QP had accepted when it entered RTR.
	commEst     bool
	rtrRequests uint64
	// Context is the application's qp_context.
	Context any
	// OnState, if set, runs on the loop whenever the QP's state changes: by ModifyQP
	// (the application's or the CM agent's) or by the transport moving it to ERR.
	OnState func(qp.State)
	// RecvRefill, if set, runs when a packet finds the QP's receive queue (or SRQ)
	// empty, before it is refused (qp.Config.RecvRefill); it may PostRecv or
	// PostSRQRecv. The verbs service moves receives the client has posted to its
	// shared ring but the service has not scanned yet.
	RecvRefill func()
}

// QPCap sizes a QP's queues (ibv_qp_cap): ibv.QPCap.
type QPCap = ibv.QPCap

// QPInitAttr describes a QP at creation (ibv_qp_init_attr).
type QPInitAttr struct {
	Type           qp.Type
	SendCQ, RecvCQ *CQ // XRC_SEND: no RecvCQ; XRC_RECV: neither
	SRQ            *SRQ
	// XRCD is an XRC_RECV QP's domain (ibv_qp_init_attr_ex.xrcd); such a QP has no PD.
	XRCD   *XRCD
	Cap    QPCap
	SigAll bool
	// CC overrides the device's congestion control for this QP (nil: the device's).
	// Both ends of a flow must use the same mode.
	CC *CC
	// Weight is the QP's share of the port under ArbitrationDWRR, relative to the
	// other QPs with data: its quantum is Weight × the largest frame at the port's
	// MTU. 0 means 1; at most MaxWeight. Round robin ignores it.
	Weight int
	// Segment is qp.Config.Segment: the payload of each packet but a message's last,
	// when below the path MTU (0: the path MTU). Both ends must agree.
	Segment int
}

// CreateQP creates a queue pair in the RESET state (ibv_create_qp).
func (d *Device) CreateQP(pd *PD, attr QPInitAttr) (*QP, error) {
	switch {
	case d.closed:
		return nil, errorf(ErrClosed, "create QP")
	}
	if err := d.checkQPBindings(pd, &attr); err != nil {
		return nil, err
	}
	switch {
	case len(d.qps) >= MaxQP:
		return nil, errorf(ErrNoMemory, "the device holds %d QPs", MaxQP)
	case attr.Cap.MaxSendWR > MaxWR || attr.Cap.MaxRecvWR > MaxWR:
		return nil, errorf(ErrInvalidArgument, "queue depths %d/%d exceed %d", attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR, MaxWR)
	case attr.Cap.MaxSendSGE > MaxSGE || attr.Cap.MaxRecvSGE > MaxSGE:
		return nil, errorf(ErrInvalidArgument, "%d/%d SGEs exceed %d", attr.Cap.MaxSendSGE, attr.Cap.MaxRecvSGE, MaxSGE)
	case attr.Weight < 0 || attr.Weight > MaxWeight:
		return nil, errorf(ErrInvalidArgument, "QP weight %d: must be in [0, %d]", attr.Weight, MaxWeight)
	case d.cfg.Arbitration > ArbitrationDWRR:
		return nil, errorf(ErrInvalidArgument, "device %s: unknown %v", d.cfg.Name, d.cfg.Arbitration)
	}
	ccfg := d.cfg.CC
	if attr.CC != nil {
		ccfg = *attr.CC
		ccfg.Telemetry = d.cfg.CC.Telemetry
		if err := ccfg.check(); err != nil {
			return nil, err
		}
	}
	cc, err := newFlowCC(ccfg, float64(d.cfg.Link.Rate()))
	if err != nil {
		return nil, err
	}
	qpn := d.allocQPN()
	cfg := qp.Config{Type: attr.Type, QPN: qpn,
		MaxSendWR: attr.Cap.MaxSendWR, MaxRecvWR: attr.Cap.MaxRecvWR, MaxSGE: max(attr.Cap.MaxSendSGE, attr.Cap.MaxRecvSGE),
		SigAll: attr.SigAll, PortMTU: roce.MTUForLinkMTU(d.cfg.Link.MTU()), AckReqEvery: ackReqEvery(&ccfg),
		MaxUnackedPSNs: d.cfg.MaxUnackedPSNs, RXERetryCnt: d.cfg.RXERetryCnt, Segment: attr.Segment,
		SkipICRC: d.cfg.PayloadFree}
	var x *QP // the refill hook is set once x exists
	cfg.RecvRefill = func() { x.refill() }
	if attr.SRQ != nil {
		cfg.SRQ = attr.SRQ
	}
	// qp.Config takes no typed nil: the CQs an XRC half lacks stay nil interfaces.
	if pd != nil {
		cfg.Memory = pd.view(uint32(qpn))
	}
	if attr.SendCQ != nil {
		cfg.SendCQ = attr.SendCQ
	}
	if attr.RecvCQ != nil {
		cfg.RecvCQ = attr.RecvCQ
	}
	if attr.Type == qp.XRCRecv {
		cfg.XRCSRQ = func(n uint32) (qp.RecvQueue, qp.CompletionQueue, qp.Memory, bool) { return x.xrcSRQ(n) }
	}
	q, err := qp.New(cfg)
	if err != nil {
		return nil, errorf(ErrInvalidArgument, "%v", err)
	}
	x = &QP{dev: d, pd: pd, q: q, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ, cc: cc,
		quantum: max(attr.Weight, 1) * d.sched.unit, xrcd: attr.XRCD, opens: 1}
	x.timer = d.loop.NewTimer(x.onTimer)
	x.hold(1)
	if attr.XRCD != nil {
		attr.XRCD.refs++
	}
	d.qps[qpn] = x
	d.active = append(d.active, x)
	return x, nil
}

// checkQPBindings checks the PD, CQs, SRQ and XRCD of a QP to create: each type takes
// those its queues need (XRC_SEND has no receive side, XRC_RECV only its domain), all of
// this device.
func (d *Device) checkQPBindings(pd *PD, attr *QPInitAttr) error {
	if attr.Type == qp.XRCRecv {
		if pd != nil || attr.SendCQ != nil || attr.RecvCQ != nil || attr.SRQ != nil {
			return errorf(ErrInvalidArgument, "an XRC_RECV QP takes an XRCD and no PD, CQs or SRQ")
		}
		if attr.XRCD == nil || attr.XRCD.closed || attr.XRCD.dev != d {
			return errorf(ErrInvalidArgument, "an XRC_RECV QP needs an open XRCD of this device")
		}
		return nil
	}
	switch {
	case attr.XRCD != nil:
		return errorf(ErrInvalidArgument, "only an XRC_RECV QP takes an XRCD")
	case pd == nil || pd.dev != d:
		return errorf(ErrInvalidArgument, "QP needs a PD of this device")
	case attr.SendCQ == nil || attr.SendCQ.dev != d:
		return errorf(ErrInvalidArgument, "QP needs a send CQ of this device")
	case attr.Type == qp.XRCSend && (attr.RecvCQ != nil || attr.SRQ != nil):
		return errorf(ErrInvalidArgument, "an XRC_SEND QP has no receive CQ or SRQ")
	case attr.Type != qp.XRCSend && (attr.RecvCQ == nil || attr.RecvCQ.dev != d):
		return errorf(ErrInvalidArgument, "QP needs a receive CQ of this device")
	case attr.SRQ != nil && (attr.SRQ.pd != pd || attr.SRQ.xrcd != nil):
		return errorf(ErrInvalidArgument, "QP's SRQ belongs to another PD or is an XRC SRQ")
	}
	return nil
}

// hold adds n (1 or -1) to the references the QP holds on its PD, CQs and SRQ, which
// an XRC half has only some of.
func (x *QP) hold(n int) {
	if x.pd != nil {
		x.pd.refs += n
	}
	if x.sendCQ != nil {
		x.sendCQ.refs += n
	}
	if x.recvCQ != nil {
		x.recvCQ.refs += n
	}
	if x.srq != nil {
		x.srq.refs += n
	}
}

func (d *Device) allocQPN() roce.QPN {
	for {
		n := d.nextQPN
		d.nextQPN++
		if d.nextQPN >= roce.QPNMask { // 0xFFFFFF is the multicast QPN
			d.nextQPN = firstQP
		}
		if _, used := d.qps[n]; !used {
			return n
		}
	}
}

// QPN returns the QP's number.
func (x *QP) QPN() roce.QPN { return x.q.QPN() }

// State returns the QP's state.
func (x *QP) State() qp.State { return x.q.State() }

// Counters returns the transport's counters.
func (x *QP) Counters() qp.Counters { return x.q.Counters() }

// Rate returns the QP's current pacing rate (bit/s; +Inf when unpaced) and window
// (bytes; +Inf when unlimited), as congestion control set them.
func (x *QP) Rate() (rate, window float64) {
	return x.cc.currentRate(int64(x.dev.loop.Now())), x.cc.window
}

// HPCC returns the HPCC++ state of the QP's congestion control (U, W, Wc, rate): the
// sender's, the prober's or, under Rx-HPCC, the receiver's; false when the QP runs no
// HPCC mode (DCQCN, none).
func (x *QP) HPCC() (hpcc.State, bool) {
	switch {
	case x.cc.sender != nil:
		return x.cc.sender.State(), true
	case x.cc.prober != nil:
		return x.cc.prober.State(), true
	case x.cc.rxHPCC != nil:
		return x.cc.rxHPCC.State(), true
	}
	return hpcc.State{}, false
}

// InFlightBytes returns the request payload bytes sent and not yet acknowledged.
func (x *QP) InFlightBytes() uint64 { return x.q.InFlightBytes() }

// ModifyQP changes the QP's state and attributes (ibv_modify_qp). With IBV_QP_AV it
// resolves the path: a zero SGID becomes the device's GID of the destination's IP
// version, the source MAC is the port's, and a zero destination MAC is looked up in the
// neighbour cache; an unknown neighbour fails with ErrUnresolved after asking the
// network, as rxe fails the move to RTR.
func (d *Device) ModifyQP(x *QP, attr *qp.Attr, mask qp.AttrMask) error {
	if mask&qp.AttrAV != 0 || (mask&qp.AttrPathMTU != 0 && attr.PathMTU > d.activeMTU()) {
		a := *attr
		if mask&qp.AttrAV != 0 {
			if err := d.resolveAV(&a.AV); err != nil {
				return err
			}
			if x.cc.mode == ModeDCQCN {
				a.AV.TrafficClass |= ecnECT0
			}
		}
		// The port's max_mtu is 4096 as rxe's, whatever the link: a larger path MTU than
		// the link carries becomes the active one rather than frames the link drops.
		if mask&qp.AttrPathMTU != 0 && a.PathMTU.Valid() && a.PathMTU > d.activeMTU() {
			a.PathMTU = d.activeMTU()
		}
		attr = &a
	}
	if err := x.q.Modify(attr, mask); err != nil {
		return errorf(ErrInvalidArgument, "modify QP %v: %v", x.QPN(), err)
	}
	if prev := x.state; x.q.State() != prev {
		x.state = x.q.State()
		if x.OnState != nil {
			x.OnState(x.state)
		}
		switch x.state {
		case qp.StateErr:
			x.enteredErr(false)
		case qp.StateRTR:
			x.commEst, x.rtrRequests = false, x.q.Counters().RxRequests
		}
	}
	d.sched.kick()
	d.sched.settle()
	return nil
}

// flowLabelMask keeps a flow label's 20 bits.
const flowLabelMask = 0xFFFFF

// ecnECT0 is the ECN-capable transport codepoint DCQCN's data carries.
const ecnECT0 = 0b10

// resolveAV completes an address vector as the kernel's ib_resolve_eth_dmac does for a
// RoCE port: a routed destination (not fe80::/10) gets the route's hop limit, whatever
// the caller asked for, which is why rdma-core's pingpong examples (hop_limit 1) and
// perftest reach the wire with rxe's TTL 64; a link-local one keeps the caller's.
func (d *Device) resolveAV(av *qp.AddressVector) error {
	// The GRH's flow label has 20 bits; rxe keeps whatever the caller passes and the
	// IPv6 header takes the low 20 (UCX passes 0xffffffff).
	av.FlowLabel &= flowLabelMask
	if !av.DGID.Addr().IsLinkLocalUnicast() {
		av.HopLimit = roce.DefaultTTL
	}
	if av.SGID == (roce.GID{}) {
		g, err := d.gidFor(av.DGID)
		if err != nil {
			return err
		}
		av.SGID = g
	}
	av.SrcMAC = d.cfg.MAC
	if av.DstMAC == ([6]byte{}) {
		mac, err := d.resolve(av.SGID.Addr(), av.DGID.Addr())
		if err != nil {
			return err
		}
		av.DstMAC = mac
	}
	return nil
}

// QueryQP returns the QP's attributes (ibv_query_qp).
func (d *Device) QueryQP(x *QP) qp.Attr { return x.q.Attr() }

// DestroyQP destroys a queue pair (ibv_destroy_qp). Its outstanding work is dropped
// without completions, as destroying a QP in any state does. An XRC_RECV QP that other
// handles have open (OpenQP) stays until the last is closed (CloseQP).
func (d *Device) DestroyQP(x *QP) error {
	return d.release(x, x.xrcd)
}

// CloseQP closes a handle OpenQP returned through xrcd.
func (d *Device) CloseQP(x *QP, xrcd *XRCD) error { return d.release(x, xrcd) }

// release drops one handle of x, opened through xrcd (nil: not an XRC_RECV QP), and
// destroys x with its last.
func (d *Device) release(x *QP, xrcd *XRCD) error {
	if _, ok := d.qps[x.QPN()]; !ok || x.opens == 0 {
		return errorf(ErrNotFound, "QP %v is not on %s", x.QPN(), d.cfg.Name)
	}
	if xrcd != nil {
		xrcd.refs--
	}
	if x.opens--; x.opens > 0 {
		return nil
	}
	delete(d.qps, x.QPN())
	d.detachAll(x)
	for i, a := range d.active {
		if a == x {
			d.active = append(d.active[:i], d.active[i+1:]...)
			break
		}
	}
	x.timer.Stop()
	// The CM agent may still move a destroyed QP to ERR: its owner's hook, whose memory
	// is gone with the QP (the verbs service's rings), must not hear of it.
	x.OnState = nil
	x.hold(-1)
	return nil
}

// PostSend posts a send work request (ibv_post_send). The QP keeps wr.SGL until the
// request completes.
func (x *QP) PostSend(wr *qp.SendWR) error {
	if err := x.q.PostSend(wr); err != nil {
		return errorf(ErrInvalidArgument, "post send on QP %v: %v", x.QPN(), err)
	}
	x.afterEvent()
	x.dev.sched.kick()
	x.dev.sched.settle()
	return nil
}

// PostRecv posts a receive work request (ibv_post_recv).
func (x *QP) PostRecv(wr *qp.RecvWR) error {
	if err := x.q.PostRecv(wr); err != nil {
		return errorf(ErrInvalidArgument, "post receive on QP %v: %v", x.QPN(), err)
	}
	x.afterEvent()
	if !x.dev.refilling { // the packet that asked for it settles when it is done
		x.dev.sched.settle()
	}
	return nil
}

// refill runs RecvRefill for a packet that found no receive WR. The packet is still
// inside the QP: completion handlers, which may post to it, run only once it is done.
func (x *QP) refill() {
	hook := x.RecvRefill
	if x.xsrq != nil { // an XRC_RECV QP's receives are the message's XRC SRQ's
		hook = x.xsrq.RecvRefill
	}
	if hook == nil {
		return
	}
	x.dev.refilling = true
	hook()
	x.dev.refilling = false
}

// onTimer runs the transport timer (retransmission, RNR back-off).
func (x *QP) onTimer() {
	x.q.OnTimer(int64(x.dev.loop.Now()))
	x.afterEvent()
	x.dev.sched.kick()
	x.dev.sched.settle()
}

// afterEvent re-arms the transport timer and reports a spontaneous move to ERR.
func (x *QP) afterEvent() {
	if dl := x.q.NextDeadline(); dl == qp.Never {
		x.timer.Stop()
	} else if t := clock.Time(dl); !x.timer.Pending() || x.timer.When() != t {
		x.timer.Reset(t)
	}
	if s := x.q.State(); s != x.state {
		x.state = s
		if x.OnState != nil {
			x.OnState(s)
		}
		if s == qp.StateErr {
			x.enteredErr(true)
		}
	}
	if x.state == qp.StateRTR && !x.commEst {
		x.checkCommEst()
	}
}
