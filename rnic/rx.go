package rnic

import (
	"errors"
	"net/netip"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/probe"
)

// The Rx pipeline, per frame the link delivers:
//
//  1. ARP and NDP: learn the sender, answer for our GIDs (arp.go).
//  2. Telemetry: a request stack (data packets and probes) or an echo stack (ACKs) is
//     decoded into a Stack and stripped, restoring the packet the sender built.
//  3. Decode the RoCEv2 headers and verify the ICRC over the restored packet (not on a
//     PayloadFree device, whose frames carry none, nor for an intact frame, built by a
//     soft-RNIC of this process and changed by nothing but telemetry since:
//     link.Frame.Intact). Anything malformed is counted and dropped here, before any
//     QP sees it.
//  4. Demultiplex by BTH DestQP. Probes, probe responses, Rx-HPCC window updates and
//     CNPs are the device's (step 6); everything else goes to the QP's engine.
//  5. Congestion control, receiver side: keep the hops to echo in the next ACK
//     (per-ACK modes), run Rx-HPCC and feed W back, or turn CE marks into CNPs (DCQCN).
//     Sender side: an ACK's echoed hops drive HPCC's NewAck.
//  6. Answer a probe with the most loaded hop; feed a response to the Prober; apply a
//     fed-back window; cut the rate on a CNP.
//
// The frame is released at the end: nothing keeps a view of it.
//
// Telemetry without a hop (the port's loopback: no switch on the path) updates no HPCC
// state: HPCC's U starts at 1 and only hops move it, so each update would shrink the
// window by eta (to W_min on a long flow) for a path no queue is on. The flow keeps
// its window and rate instead, W_init and line rate.

// flagWindow is rocelab's Rx-HPCC window update: a telemetry response (probe package
// body) with this bit of the flags nibble set carries no records; its send-timestamp
// field holds the window W in bytes the receiver computed.
const flagWindow = 0x2

// receive runs the Rx pipeline on one frame and releases it.
func (d *Device) receive(f *link.Frame) {
	defer f.Release()
	b := f.Bytes()
	d.stats.RxFrames++
	d.stats.RxBytes += uint64(f.Len())
	if len(b) < roce.EthernetSize {
		d.stats.RxMalformed++
		return
	}
	l, err := roce.Locate(b)
	switch {
	case roce.Ethernet(b).EtherType() == roce.EtherTypeARP:
		if !d.receiveARP(b) {
			d.stats.RxMalformed++
		}
		d.toHost(f)
		return
	case err != nil || l.IPVersion == 0:
		d.toHost(f)
		return
	case l.IPv6() && l.Proto == icmpv6:
		if !d.receiveNDP(b, l.L3) {
			d.stats.RxMalformed++
		}
		d.toHost(f)
		return
	}
	dst := l.Dst(b)
	if !d.ownsAddr(dst) && !dst.IsMulticast() {
		d.toHost(f)
		return
	}
	d.receiveRoCE(f, b, &l, dst)
}

// toHost relays a frame the device does not terminate to the host's netdev.
func (d *Device) toHost(f *link.Frame) {
	if d.cfg.Host == nil {
		d.stats.RxNotForUs++
		return
	}
	d.hostBatch[0] = f.Clone()
	d.cfg.Host.Receive(d.hostBatch[:])
	d.hostBatch[0] = nil
}

// telemetryKind says what telemetry a received frame carried.
type telemetryKind uint8

const (
	noTelemetry telemetryKind = iota
	requestTelemetry
	echoTelemetry
)

// receiveRoCE runs steps 2–6 on a frame for one of the device's addresses or a
// multicast group (dst, unmapped); l is its layout (roce.Locate). A multicast frame
// that is not RoCEv2 goes to the host; one that is goes to the group's QPs only.
func (d *Device) receiveRoCE(f *link.Frame, b []byte, l *roce.Layout, dst netip.Addr) {
	kind := noTelemetry
	st := &d.rxStack
	st.N = 0
	if d.tel != nil {
		for _, c := range [...]struct {
			c    *codec
			kind telemetryKind
		}{{&d.tel.request, requestTelemetry}, {&d.tel.echo, echoTelemetry}} {
			if !c.c.signal.Shown(b, l) {
				continue
			}
			nb, err := d.tel.decodeStrip(c.c, f, b, l, st)
			present, bad := found(err)
			if bad {
				d.stats.RxMalformed++
				return
			}
			if present {
				b, kind = nb, c.kind
				break
			}
		}
	}
	p := &d.rxPkt
	if err := p.Decode(b); err != nil {
		if errors.Is(err, roce.ErrNotRoCE) {
			d.toHost(f)
		} else {
			d.stats.RxMalformed++
		}
		return
	}
	if !d.cfg.PayloadFree && !f.Intact && p.VerifyICRC() != nil {
		d.stats.RxBadICRC++
		return
	}
	if dst.IsMulticast() {
		d.receiveMcast(p, dst, int64(d.rxNow))
		return
	}
	if p.BTH.DestQP() == roce.GSIQPN {
		d.receiveGSI(p)
		return
	}
	x, ok := d.qps[p.BTH.DestQP()]
	if !ok {
		d.stats.RxUnknownQP++
		return
	}
	now := int64(d.rxNow)
	cc := x.cc
	switch p.BTH.Opcode() {
	case roce.OpCNP:
		d.stats.CNPsRcvd++
		if cc.rp != nil {
			cc.rp.OnCNP(now)
		}
		return
	case roce.OpTelemetryRequest:
		d.answerProbe(x, p.Payload, st)
		return
	case roce.OpTelemetryResponse:
		d.onProbeResponse(x, p.Payload)
		return
	}
	accepted := x.q.RxDataBytes()
	x.q.Receive(now, p)
	d.stats.RxDataBytes += x.q.RxDataBytes() - accepted
	x.afterEvent()
	if p.Info().Request() {
		d.receiverCC(x, p, kind, st, now)
	} else if kind == echoTelemetry && cc.sender != nil && st.N > 0 {
		cc.hops = hopsOf(st, cc.hops)
		acked := cc.sentBytes - min(cc.sentBytes, x.q.InFlightBytes())
		cc.apply(cc.sender.NewAck(acked, cc.sentBytes, cc.hops))
		d.rateChanged(x)
	}
}

// rateChanged re-times x's next departure after an HPCC update and wakes the
// scheduler if it moved earlier than the scheduler was going to look.
func (d *Device) rateChanged(x *QP) {
	if x.retime(d.rxNow) {
		d.sched.kick()
	}
}

// receiverCC runs step 5's receiver side for a request packet x accepted.
func (d *Device) receiverCC(x *QP, p *roce.Packet, kind telemetryKind, st *telemetry.Stack, now int64) {
	cc := x.cc
	switch {
	case kind == requestTelemetry && (cc.mode == ModeHPCC || cc.mode == ModeHPCCEveryN):
		if cc.echo == nil {
			cc.echo = new(telemetry.Stack)
		}
		copyStack(cc.echo, st)
		cc.hasEcho = true
	case kind == requestTelemetry && cc.rxHPCC != nil && st.N > 0:
		cc.hops = hopsOf(st, cc.hops)
		if up := cc.rxHPCC.NewINT(now, cc.hops); up.SendAck {
			cc.rxSeq++
			r := &d.probeResp
			*r = probe.Response{Seq: cc.rxSeq, SendTS: uint64(up.W), PathHops: uint8(st.N)}
			n := r.Put(d.body[:])
			d.body[0] |= flagWindow
			d.sendControl(x, roce.OpTelemetryResponse, d.body[:n])
		}
	case cc.mode == ModeDCQCN && ecnOf(p) == 0b11:
		if cc.np.OnCE(now) {
			d.sendControl(x, roce.OpCNP, nil)
			d.stats.CNPsSent++
		}
	}
}

// answerProbe responds to a telemetry request with the most loaded hop it collected.
func (d *Device) answerProbe(x *QP, body []byte, st *telemetry.Stack) {
	req := &d.probeReq
	if req.Parse(body) != nil {
		d.stats.RxMalformed++
		return
	}
	cc := x.cc
	var prev *telemetry.Stack
	if cc.hasPrev {
		prev = cc.prevReq
	} else {
		cc.prevReq = new(telemetry.Stack)
	}
	r := &d.probeResp
	r.Answer(req, st, prev, uint64(cc.baseRTT))
	copyStack(cc.prevReq, st)
	cc.hasPrev = true
	n := r.Put(d.body[:])
	d.sendControl(x, roce.OpTelemetryResponse, d.body[:n])
}

// onProbeResponse feeds a telemetry response or a window update to x's sender.
func (d *Device) onProbeResponse(x *QP, body []byte) {
	r := &d.probeResp
	if r.Parse(body) != nil {
		d.stats.RxMalformed++
		return
	}
	cc := x.cc
	switch {
	case body[0]&flagWindow != 0:
		if cc.rxHPCC != nil && r.SendTS > 0 {
			cc.applyWindow(float64(r.SendTS))
			d.rateChanged(x)
		}
	case cc.prober != nil && r.N > 0:
		cc.hops = cc.hops[:0]
		for i := range r.N {
			cc.hops = append(cc.hops, r.Records[i].Hop.Hop)
		}
		cc.apply(cc.prober.OnResponse(cc.hops))
		d.rateChanged(x)
	}
}

func (d *Device) sendControl(x *QP, opcode roce.Opcode, body []byte) {
	if f := d.buildControl(x, opcode, body); f != nil {
		if opcode == roce.OpTelemetryResponse {
			d.stats.ProbeResponses++
		}
		d.sched.control(f)
	}
}

func copyStack(dst, src *telemetry.Stack) {
	dst.Format, dst.N, dst.Truncated = src.Format, src.N, src.Truncated
	copy(dst.Hops[:src.N], src.Hops[:src.N])
	for i := range src.N {
		dst.Hops[i].Opaque = nil // a view into the frame, which is about to be released
	}
}

func ecnOf(p *roce.Packet) uint8 {
	if p.IPv4 != nil {
		return p.IPv4.ECN()
	}
	return p.IPv6.ECN()
}
