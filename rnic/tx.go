package rnic

import (
	"time"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry/probe"
)

// The Tx pipeline, per frame the scheduler picks:
//
//  1. The QP's engine builds the whole RoCEv2 frame into a pooled buffer (package qp,
//     roce.Builder): headers, payload read from the MR, ICRC. A PayloadFree device
//     writes the headers only: the payload bytes stay what the pooled buffer held,
//     the ICRC is zero, the frame has its real length.
//  2. If this packet carries telemetry (every packet, or every Nth), the request
//     codec inserts an empty stack for the switches to fill. Telemetry is outside the
//     ICRC. (Requests of an HPCC flow ask for an ACK: package qp sets AckReq on every
//     packet of such a QP, qp.Config.AckReqEvery = 1, before it computes the ICRC.)
//  3. Responses: an ACK of a flow whose last data packet carried telemetry echoes those
//     hops in the echo encoding.
//  4. Probes and responses to probes, Rx-HPCC window updates and CNPs are built from
//     the QP's path (same addresses and UDP ports as the flow, so ECMP and the queues
//     treat them like the flow's data).

// pacingGap is how long a rate of bit/s takes to send n bytes.
func pacingGap(n int, rate float64) time.Duration {
	return time.Duration(float64(n) * 8e9 / rate)
}

// frameBuffer returns a pooled frame opened to its whole buffer: room for the largest
// frame a QP of the port's MTU builds, and for the telemetry added to it. It is
// marked intact: the device builds it and its ICRC (link.Frame.Intact).
func (d *Device) frameBuffer() (*link.Frame, []byte) {
	f := d.cfg.Pool.Get()
	buf, _ := f.SetLen(f.Tailroom())
	f.Intact = true
	return f, buf
}

// buildRequest runs steps 1–2 for x's next request packet.
func (d *Device) buildRequest(x *QP, start clock.Time) *link.Frame {
	f, buf := d.frameBuffer()
	if f == nil {
		return nil
	}
	n, ok := x.q.NextRequest(int64(start), buf)
	x.afterEvent()
	if !ok {
		f.Release()
		return nil
	}
	f.SetLen(n)
	payload, data := x.q.LastRequest()
	if !data {
		return f // READ requests and atomics: congestion control counts data only
	}
	d.stats.TxDataBytes += uint64(payload)
	cc := x.cc
	cc.sentBytes += uint64(payload)
	if cc.rp != nil {
		cc.rp.OnSent(int64(start), uint64(payload))
	}
	if cc.telemetryOnNext() && d.tel != nil {
		d.requestTelemetry(f)
	}
	cc.dataPkts++
	return f
}

// requestTelemetry adds an empty request stack to f; a frame that cannot carry it
// (IOAM over IPv4, no room) goes without and is counted.
func (d *Device) requestTelemetry(f *link.Frame) {
	if d.tel.addStack(&d.tel.request, f, nil) != nil {
		d.stats.TxTelemetryErrors++
	}
}

// buildResponse runs steps 1 and 3 for x's next response packet.
func (d *Device) buildResponse(x *QP) *link.Frame {
	f, buf := d.frameBuffer()
	if f == nil {
		return nil
	}
	n, ok := x.q.NextResponse(buf)
	x.afterEvent()
	if !ok {
		f.Release()
		return nil
	}
	f.SetLen(n)
	cc := x.cc
	if cc.hasEcho && d.tel != nil && roce.BTH(buf[d.bthOffset(buf):]).Opcode() == roce.OpRCAck {
		cc.hasEcho = false
		d.echoTelemetry(f, cc)
	}
	return f
}

// bthOffset returns where the BTH of a frame the device built starts.
func (d *Device) bthOffset(b []byte) int {
	if roce.Ethernet(b).EtherType() == roce.EtherTypeIPv4 {
		return roce.EthernetSize + roce.IPv4MinSize + roce.UDPSize
	}
	return roce.EthernetSize + roce.IPv6Size + roce.UDPSize
}

// echoTelemetry puts the hops of cc.echo into the ACK f in the echo encoding.
func (d *Device) echoTelemetry(f *link.Frame, cc *flowCC) {
	if d.tel.addStack(&d.tel.echo, f, cc.echo.HopList()) != nil {
		d.stats.TxTelemetryErrors++
	}
}

// buildControl builds a frame of opcode with body on x's path to its peer QP.
func (d *Device) buildControl(x *QP, opcode roce.Opcode, body []byte) *link.Frame {
	attr := x.q.Attr()
	av := &attr.AV
	b := &d.ctl
	*b = roce.Builder{
		DstMAC: av.DstMAC, SrcMAC: av.SrcMAC, Src: av.SGID.Addr(), Dst: av.DGID.Addr(),
		DSCP: av.TrafficClass >> 2, TTL: av.HopLimit, FlowLabel: av.FlowLabel,
		SrcPort: roce.ConnectedSourcePort(av.FlowLabel, x.QPN(), attr.DestQPN),
		BTH:     roce.BTHFields{Opcode: opcode, PKey: roce.DefaultPKey, DestQP: attr.DestQPN},
		Payload: body,
	}
	if opcode == roce.OpCNP {
		b.BTH.BECN = true
	}
	f, buf := d.frameBuffer()
	n, err := b.Build(buf)
	if err != nil {
		f.Release()
		return nil
	}
	f.SetLen(n)
	return f
}

// buildProbe builds a ModeHPCCProbe flow's telemetry request.
func (d *Device) buildProbe(x *QP, start clock.Time) *link.Frame {
	cc := x.cc
	cc.probeSeq++
	req := probe.Request{Seq: cc.probeSeq, SendTS: uint64(start)}
	req.Put(d.body[:probe.RequestSize])
	f := d.buildControl(x, roce.OpTelemetryRequest, d.body[:probe.RequestSize])
	cc.prober.ProbeSent(int64(start))
	if f == nil {
		return nil
	}
	d.requestTelemetry(f)
	d.stats.ProbesSent++
	return f
}
