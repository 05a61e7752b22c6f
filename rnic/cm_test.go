package rnic

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/cm"
)

// recordingEnd is a link end that keeps a copy of every CM MAD sent through it.
type recordingEnd struct {
	*link.End
	mads *[]cm.MAD
}

func (e recordingEnd) Send(frames []*link.Frame) {
	var p roce.Packet
	for _, f := range frames {
		if p.Decode(f.Bytes()) == nil && p.BTH.DestQP() == roce.GSIQPN {
			*e.mads = append(*e.mads, append(cm.MAD(nil), p.Payload...))
		}
	}
	e.End.Send(frames)
}

// cmPair is two devices that do not know each other's MACs yet, on a virtual clock,
// with every CM MAD either sends recorded in order.
func cmPair(t *testing.T) (*clock.Virtual, *Device, *Device, *[]cm.MAD) {
	t.Helper()
	v := clock.NewVirtual(1)
	a, b, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	pool := link.NewPool(1518)
	mads := new([]cm.MAD)
	open := func(name string, ep *link.End, i byte) *Device {
		d, err := Open(Config{Name: name, MAC: [6]byte{2, 0, 0, 0, 0, i}, GIDs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, i})},
			Loop: v.NewLoop(name), Link: recordingEnd{ep, mads}, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return v, open("h1", a, 1), open("h2", b, 2), mads
}

// cmEnd is one side of a test connection: an RC QP with a 4 KiB buffer.
type cmEnd struct {
	d      *Device
	cq     *CQ
	qp     *QP
	mr     *MR
	events []CMEvent
}

func newCMEnd(t *testing.T, d *Device) *cmEnd {
	t.Helper()
	e := &cmEnd{d: d}
	pd, _ := d.AllocPD()
	var err error
	if e.mr, err = d.RegMR(pd, 4096, qp.AccessLocalWrite|qp.AccessRemoteWrite|qp.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	e.cq, _ = d.CreateCQ(16, nil)
	if e.qp, err = d.CreateQP(pd, QPInitAttr{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *cmEnd) types() []CMEventType {
	var ts []CMEventType
	for _, ev := range e.events {
		ts = append(ts, ev.Type)
	}
	return ts
}

// TestCMConnectSendDisconnect runs rping's sequence between two devices in virtual
// time: the client resolves the server's address by ARP, connects through REQ, REP
// and RTU, SENDs a message and RDMA WRITEs into the server's buffer with the QPs the
// agent brought up, then disconnects with DREQ and DREP. It checks the events of both
// sides, the negotiated QP attributes, and the CM MADs on the wire.
func TestCMConnectSendDisconnect(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	client, server := newCMEnd(t, h1), newCMEnd(t, h2)
	var accepted *CMID
	listener, _ := h2.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		server.events = append(server.events, e)
		switch e.Type {
		case CMEventConnectRequest:
			accepted = e.ID
			if !bytes.Equal(e.Param.PrivateData[:5], []byte("hello")) || e.Param.InitiatorDepth != 1 {
				t.Errorf("connect request: %+v", e.Param)
			}
			if err := h2.Accept(e.ID, server.qp, CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}); err != nil {
				t.Error(err)
			}
		case CMEventDisconnected:
			if err := h2.Disconnect(e.ID); err != nil {
				t.Error(err)
			}
		}
	})
	if err := h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	var id *CMID
	id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		client.events = append(client.events, e)
		var err error
		switch e.Type {
		case CMEventAddrResolved:
			err = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			err = h1.Connect(id, client.qp, CMConnParam{PrivateData: []byte("hello"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
		}
		if err != nil {
			t.Error(err)
		}
	})
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	v.RunFor(10 * time.Millisecond)
	want := []CMEventType{CMEventAddrResolved, CMEventRouteResolved, CMEventEstablished}
	if got := client.types(); !equalEvents(got, want) {
		t.Fatalf("client events %v, want %v", got, want)
	}
	if got := server.types(); !equalEvents(got, []CMEventType{CMEventConnectRequest, CMEventEstablished}) {
		t.Fatalf("server events %v", got)
	}
	ca, sa := h1.QueryQP(client.qp), h2.QueryQP(server.qp)
	if ca.State != qp.StateRTS || sa.State != qp.StateRTS || ca.DestQPN != server.qp.QPN() || sa.DestQPN != client.qp.QPN() ||
		ca.SQPSN != sa.RQPSN || sa.SQPSN != ca.RQPSN || ca.PathMTU != 1024 || ca.MaxRdAtomic != 1 || sa.MaxDestRdAtomic != 1 {
		t.Errorf("QPs after CM: client %+v\nserver %+v", ca, sa)
	}
	if accepted.Remote() != id.Local() || id.Remote() != netip.MustParseAddrPort("10.0.0.2:7174") {
		t.Errorf("addresses: server sees %v, client is %v", accepted.Remote(), id.Local())
	}

	// Data over the connection: a SEND into a posted receive, then a WRITE.
	copy(client.mr.Bytes(), "ping")
	sge := func(e *cmEnd) []qp.SGE { return []qp.SGE{{Addr: e.mr.Addr(), Length: 64, LKey: e.mr.LKey()}} }
	if err := server.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: sge(server)}); err != nil {
		t.Fatal(err)
	}
	if err := client.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: sge(client)}); err != nil {
		t.Fatal(err)
	}
	copy(client.mr.Bytes()[64:], "written")
	if err := client.qp.PostSend(&qp.SendWR{WRID: 3, Opcode: qp.WRWrite, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: client.mr.Addr() + 64, Length: 7, LKey: client.mr.LKey()}}, RemoteAddr: server.mr.Addr() + 128, RKey: server.mr.RKey()}); err != nil {
		t.Fatal(err)
	}
	v.RunFor(time.Millisecond)
	wcs := make([]qp.WC, 4)
	if n, _ := client.cq.PollCQ(wcs); n != 2 || wcs[0].Status != qp.WCSuccess || wcs[1].Status != qp.WCSuccess {
		t.Errorf("client completions %d: %+v", n, wcs[:n])
	}
	if n, _ := server.cq.PollCQ(wcs); n != 1 || wcs[0].Status != qp.WCSuccess {
		t.Errorf("server completions %d: %+v", n, wcs[:n])
	}
	if got := string(server.mr.Bytes()[:4]) + string(server.mr.Bytes()[128:135]); got != "pingwritten" {
		t.Errorf("server buffer %q", got)
	}

	if err := h1.Disconnect(id); err != nil {
		t.Fatal(err)
	}
	v.RunFor(10 * time.Millisecond)
	if got := client.types(); got[len(got)-1] != CMEventDisconnected {
		t.Errorf("client events %v", got)
	}
	if got := server.types(); got[len(got)-1] != CMEventDisconnected {
		t.Errorf("server events %v", got)
	}
	if s := h1.QueryQP(client.qp).State; s != qp.StateErr {
		t.Errorf("client QP %v after disconnect", s)
	}

	var attrs []cm.AttributeID
	for _, m := range *mads {
		if _, err := cm.Parse(m); err != nil {
			t.Fatal(err)
		}
		attrs = append(attrs, m.AttributeID())
	}
	wantAttrs := []cm.AttributeID{cm.AttrREQ, cm.AttrREP, cm.AttrRTU, cm.AttrDREQ, cm.AttrDREP}
	if len(attrs) != len(wantAttrs) {
		t.Fatalf("CM MADs %v, want %v", attrs, wantAttrs)
	}
	for i := range attrs {
		if attrs[i] != wantAttrs[i] {
			t.Fatalf("CM MADs %v, want %v", attrs, wantAttrs)
		}
	}
	req := cm.REQ((*mads)[0])
	hdr, err := cm.ParseCMAHeader(req.PrivateData())
	if err != nil || hdr.SrcAddr() != id.Local().Addr() || hdr.SrcPort() != id.Local().Port() || hdr.DstAddr() != id.Remote().Addr() {
		t.Errorf("REQ's CMA header: %v", err)
	}
	if req.ServiceID() != cm.IPServiceID(cm.PortSpaceTCP, 7174) || req.Primary().LocalACKTimeout() != 19 ||
		req.Primary().FlowLabel() != (uint32(id.Local().Port())*31+7174)&0xFFFFF {
		t.Errorf("REQ %+v", req.Fields())
	}
}

// TestCMRejectsUnknownService: a REQ to a port nobody listens on is answered with a
// REJ "invalid service ID", which the client sees as REJECTED with status 8, as rping
// against a host without a server does.
func TestCMRejectsUnknownService(t *testing.T) {
	v, h1, h2, _ := cmPair(t)
	client := newCMEnd(t, h1)
	var id *CMID
	id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		client.events = append(client.events, e)
		switch e.Type {
		case CMEventAddrResolved:
			_ = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			_ = h1.Connect(id, client.qp, CMConnParam{})
		}
	})
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:9999"), time.Second); err != nil {
		t.Fatal(err)
	}
	v.RunFor(10 * time.Millisecond)
	last := client.events[len(client.events)-1]
	if last.Type != CMEventRejected || last.Status != int(cm.RejInvalidServiceID) {
		t.Errorf("events %v, last status %d", client.types(), last.Status)
	}
	if h2.Stats().CMRcvd != 1 {
		t.Errorf("server received %d CM MADs", h2.Stats().CMRcvd)
	}
}

// TestCMRetriesThenUnreachable: a server that never answers its connection request
// gets the REQ MaxCMRetries more times, one CM timeout apart (6.144 s: twice RoCE's
// packet lifetime plus the CM response timeout, as the kernel computes them), and the
// client then sees UNREACHABLE with -ETIMEDOUT.
func TestCMRetriesThenUnreachable(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	client := newCMEnd(t, h1)
	requests := 0
	listener, _ := h2.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) { requests++ })
	if err := h2.Listen(listener, netip.MustParseAddrPort("10.0.0.2:7174")); err != nil {
		t.Fatal(err)
	}
	var id *CMID
	id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		client.events = append(client.events, e)
		switch e.Type {
		case CMEventAddrResolved:
			_ = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			_ = h1.Connect(id, client.qp, CMConnParam{})
		}
	})
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), time.Second); err != nil {
		t.Fatal(err)
	}
	if cmTimeout() != 6144*time.Millisecond {
		t.Fatalf("CM timeout %v", cmTimeout())
	}
	v.RunFor(time.Duration(MaxCMRetries)*cmTimeout() + time.Second)
	if len(client.events) != 2 {
		t.Fatalf("events before the last timeout: %v", client.types())
	}
	v.RunFor(cmTimeout())
	last := client.events[len(client.events)-1]
	if last.Type != CMEventUnreachable || last.Status != errTimedOut || requests != 1 {
		t.Errorf("events %v status %d, %d requests reported", client.types(), last.Status, requests)
	}
	if n := len(*mads); n != 1+MaxCMRetries+1 || (*mads)[n-1].AttributeID() != cm.AttrREJ || h1.Stats().CMRetries != MaxCMRetries {
		t.Errorf("%d MADs, %d retries", n, h1.Stats().CMRetries)
	}
}

// TestCMAddrErrorWithoutNeighbour: nobody answers ARP, so address resolution fails
// at its timeout.
func TestCMAddrErrorWithoutNeighbour(t *testing.T) {
	v, h1, _, _ := cmPair(t)
	var events []CMEvent
	id, _ := h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) { events = append(events, e) })
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.9:1"), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	v.RunFor(100 * time.Millisecond)
	if len(events) != 1 || events[0].Type != CMEventAddrError || events[0].Status != errTimedOut {
		t.Errorf("events %+v", events)
	}
}

func equalEvents(a, b []CMEventType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCMMatchesKernel compares the REQ and REP the agent sends with those of the
// kernel's rping (roce/testdata/rxe/rping.pcap, same connection parameters as rping's:
// one READ each way, retry and RNR retry 7): every field is the kernel's but the ones
// that identify the connection (communication IDs, node GUIDs, PSNs, addresses, and
// the flow label, which is a hash of the ports).
func TestCMMatchesKernel(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "roce", "testdata", "rxe", "rping.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var kernel []cm.MAD
	for {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		var p roce.Packet
		if p.Decode(frame) == nil && p.BTH.DestQP() == roce.GSIQPN {
			kernel = append(kernel, append(cm.MAD(nil), p.Payload...))
		}
	}
	v, h1, h2, mads := cmPair(t)
	client, server := newCMEnd(t, h1), newCMEnd(t, h2)
	param := CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	listener, _ := h2.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		if e.Type == CMEventConnectRequest {
			_ = h2.Accept(e.ID, server.qp, param)
		}
	})
	_ = h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174"))
	var id *CMID
	id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		switch e.Type {
		case CMEventAddrResolved:
			_ = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			_ = h1.Connect(id, client.qp, param)
		}
	})
	_ = h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), time.Second)
	v.RunFor(10 * time.Millisecond)
	if len(*mads) < 3 {
		t.Fatalf("%d CM MADs sent", len(*mads))
	}
	for i, m := range (*mads)[:3] {
		k := kernel[i]
		if m.AttributeID() != k.AttributeID() || m.Method() != k.Method() {
			t.Fatalf("message %d: %v, kernel %v", i, m.AttributeID(), k.AttributeID())
		}
	}
	ours, theirs := cm.REQ((*mads)[0]).Fields(), cm.REQ(kernel[0]).Fields()
	theirs.LocalCommID, theirs.LocalCAGUID, theirs.StartingPSN = ours.LocalCommID, ours.LocalCAGUID, ours.StartingPSN
	theirs.Primary.LocalGID, theirs.Primary.RemoteGID, theirs.Primary.FlowLabel = ours.Primary.LocalGID, ours.Primary.RemoteGID, ours.Primary.FlowLabel
	if ours != theirs {
		t.Errorf("REQ\n ours   %+v\n kernel %+v", ours, theirs)
	}
	rep, krep := cm.REP((*mads)[1]).Fields(), cm.REP(kernel[1]).Fields()
	krep.LocalCommID, krep.RemoteCommID, krep.StartingPSN, krep.LocalCAGUID = rep.LocalCommID, rep.RemoteCommID, rep.StartingPSN, rep.LocalCAGUID
	if rep != krep {
		t.Errorf("REP\n ours   %+v\n kernel %+v", rep, krep)
	}
	if !bytes.Equal(cm.Pair((*mads)[2]).PrivateData(), cm.Pair(kernel[2]).PrivateData()) {
		t.Errorf("RTU private data differs from the kernel's")
	}
}

// frameSink keeps copies of the frames a link end receives.
type frameSink struct{ frames [][]byte }

func (s *frameSink) Receive(frames []*link.Frame) {
	for _, f := range frames {
		s.frames = append(s.frames, append([]byte(nil), f.Bytes()...))
		f.Release()
	}
}

// TestCMAnswersKernelClient plays the kernel's rping client from rping.pcap against a
// device that stands in for the capture's server (its MAC and address): the kernel's
// REQ bytes are accepted with a REP to its communication ID and transaction; the
// kernel's RTU (its communication IDs set to the device's, ICRC recomputed)
// establishes the connection with the QP sending from the kernel's Starting PSN to
// its QPN; its DREQ disconnects and is answered with a DREP.
// kernelGSIFrames returns the GSI frames of one of the kernel's captures: the client's
// (10.77.0.2) and the server's.
func kernelGSIFrames(t *testing.T, name string) (client, server [][]byte) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "roce", "testdata", "rxe", name+".pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, _ := pcapgo.NewReader(f)
	for {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			return client, server
		}
		var p roce.Packet
		switch {
		case p.Decode(frame) != nil || p.BTH.DestQP() != roce.GSIQPN:
		case p.IPv4.Src() == netip.MustParseAddr("10.77.0.2"):
			client = append(client, frame)
		default:
			server = append(server, frame)
		}
	}
}

// kernelPeer is a device standing in for a kernel capture's server (10.77.0.1),
// linked to an end that injects the capture's client frames and records the device's.
type kernelPeer struct {
	d      *Device
	sink   *frameSink
	inject func(frame []byte) // sends frame to the device and runs 1 ms
}

func newKernelPeer(t *testing.T) *kernelPeer {
	t.Helper()
	v := clock.NewVirtual(1)
	ours, theirs, err := link.New(link.Config{Rate: 10e9, Delay: time.Microsecond, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	pool := link.NewPool(1518)
	d, err := Open(Config{Name: "server", MAC: [6]byte{0x52, 0x54, 0x0a, 0x4d, 0, 1}, GIDs: []netip.Addr{netip.MustParseAddr("10.77.0.1")},
		Loop: v.NewLoop("server"), Link: ours, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	k := &kernelPeer{d: d, sink: &frameSink{}}
	theirs.Attach(v.NewLoop("kernel"), k.sink)
	k.inject = func(frame []byte) {
		fr := pool.Get()
		if err := fr.SetBytes(frame); err != nil {
			t.Fatal(err)
		}
		theirs.Send([]*link.Frame{fr})
		v.RunFor(time.Millisecond)
	}
	return k
}

func TestCMAnswersKernelClient(t *testing.T) {
	kernel, _ := kernelGSIFrames(t, "rping") // REQ, RTU, DREQ
	if len(kernel) != 3 {
		t.Fatalf("%d client MADs in rping.pcap", len(kernel))
	}
	k := newKernelPeer(t)
	d, sink, inject := k.d, k.sink, k.inject
	server := newCMEnd(t, d)
	listener, _ := d.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		server.events = append(server.events, e)
		switch e.Type {
		case CMEventConnectRequest:
			_ = d.Accept(e.ID, server.qp, CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
		case CMEventDisconnected:
			_ = d.Disconnect(e.ID)
		}
	})
	if err := d.Listen(listener, netip.MustParseAddrPort("10.77.0.1:7174")); err != nil {
		t.Fatal(err)
	}
	lastMAD := func() cm.MAD {
		t.Helper()
		var p roce.Packet
		if len(sink.frames) == 0 || p.Decode(sink.frames[len(sink.frames)-1]) != nil || p.VerifyICRC() != nil || p.BTH.DestQP() != roce.GSIQPN {
			t.Fatalf("no CM MAD from the device (%d frames)", len(sink.frames))
		}
		m, err := cm.Parse(p.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// patch rebuilds a kernel frame with our communication ID as its remote one.
	patch := func(frame []byte, remote uint32) []byte {
		var p roce.Packet
		if err := p.Decode(frame); err != nil {
			t.Fatal(err)
		}
		var b roce.Builder
		b.From(&p)
		mad := append(cm.MAD(nil), p.Payload...)
		cm.Pair(mad).Encode(cm.Pair(mad).LocalCommID(), remote)
		b.Payload = mad
		out := make([]byte, 1500)
		n, err := b.Build(out)
		if err != nil {
			t.Fatal(err)
		}
		return out[:n]
	}

	inject(kernel[0])
	rep := cm.REP(lastMAD())
	if rep.MAD().AttributeID() != cm.AttrREP || rep.RemoteCommID() != 0x73d5bac6 || rep.MAD().TransactionID() != 0x2c6bad573 ||
		rep.LocalQPN() != server.qp.QPN() {
		t.Fatalf("answer to the kernel's REQ: %v %+v", rep.MAD().AttributeID(), rep.Fields())
	}
	inject(patch(kernel[1], rep.LocalCommID()))
	if got := server.types(); !equalEvents(got, []CMEventType{CMEventConnectRequest, CMEventEstablished}) {
		t.Fatalf("events %v", got)
	}
	a := d.QueryQP(server.qp)
	if a.State != qp.StateRTS || a.DestQPN != 0x11 || a.SQPSN != 0x153c83 || a.RQPSN != rep.StartingPSN() ||
		a.AV.DstMAC != [6]byte{0x52, 0x54, 0x0a, 0x4d, 0, 2} || a.AV.FlowLabel != 0x43efc || a.PathMTU != 1024 {
		t.Errorf("QP after the kernel's RTU: %+v", a)
	}
	if sport := roce.ConnectedSourcePort(a.AV.FlowLabel, server.qp.QPN(), a.DestQPN); sport != 65260 {
		t.Errorf("data source port %d, the kernel's server used 65260", sport)
	}
	inject(patch(kernel[2], rep.LocalCommID()))
	drep := cm.Pair(lastMAD())
	if drep.MAD().AttributeID() != cm.AttrDREP || drep.RemoteCommID() != 0x73d5bac6 || drep.LocalCommID() != rep.LocalCommID() {
		t.Errorf("answer to the kernel's DREQ: %v", drep.MAD().AttributeID())
	}
	if got := server.types(); got[len(got)-1] != CMEventDisconnected {
		t.Errorf("events %v", got)
	}
}

// TestCMDeterministic: the same seed gives the same CM MADs, byte for byte
// (communication IDs, PSNs and ports come from the loop's random source).
func TestCMDeterministic(t *testing.T) {
	run := func() []cm.MAD {
		v, h1, h2, mads := cmPair(t)
		client, server := newCMEnd(t, h1), newCMEnd(t, h2)
		listener, _ := h2.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
			if e.Type == CMEventConnectRequest {
				_ = h2.Accept(e.ID, server.qp, CMConnParam{})
			}
		})
		_ = h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174"))
		var id *CMID
		id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
			switch e.Type {
			case CMEventAddrResolved:
				_ = h1.ResolveRoute(id)
			case CMEventRouteResolved:
				_ = h1.Connect(id, client.qp, CMConnParam{})
			case CMEventEstablished:
				_ = h1.Disconnect(id)
			}
		})
		_ = h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), time.Second)
		v.RunFor(10 * time.Millisecond)
		return *mads
	}
	a, b := run(), run()
	if len(a) != 4 || len(a) != len(b) {
		t.Fatalf("%d and %d MADs (want REQ, REP, RTU, DREQ)", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Errorf("MAD %d differs between runs:\n%x\n%x", i, []byte(a[i]), []byte(b[i]))
		}
	}
}

// udQP is a UD QP for the SIDR tests.
func udQP(t *testing.T, d *Device) *QP {
	t.Helper()
	pd, _ := d.AllocPD()
	cq, _ := d.CreateCQ(16, nil)
	x, err := d.CreateQP(pd, QPInitAttr{Type: qp.UD, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// sidrClient resolves 10.0.0.2:port from h1 and connects x through SIDR, recording
// its events.
func sidrClient(t *testing.T, h1 *Device, x *QP, port uint16, events *[]CMEvent) *CMID {
	t.Helper()
	var id *CMID
	id, err := h1.CreateCMID(cm.PortSpaceUDP, func(e CMEvent) {
		*events = append(*events, e)
		switch e.Type {
		case CMEventAddrResolved:
			_ = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			if err := h1.Connect(id, x, CMConnParam{PrivateData: []byte("udaddy")}); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), port), time.Second); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCMSIDR runs udaddy's exchange in virtual time: the client's SIDR_REQ (rdma_cm's
// header, then its private data) reaches the UDP listener as a ConnectRequest; the
// server accepts with its UD QP and the SIDR_REP gives the client Established with
// that QPN, rdma_cm's UDP Q_Key and the server's private data. A second server
// rejects: the client sees UNREACHABLE with the SIDR status "rejected" (2); a port
// without listener answers "unsupported" (5).
func TestCMSIDR(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	srvQP := udQP(t, h2)
	var server []CMEvent
	listener, _ := h2.CreateCMID(cm.PortSpaceUDP, func(e CMEvent) {
		server = append(server, e)
		if e.Type != CMEventConnectRequest {
			return
		}
		if !bytes.HasPrefix(e.Param.PrivateData, []byte("udaddy")) || len(e.Param.PrivateData) != cm.SIDRREQPrivateDataSize-cm.CMAHeaderSize {
			t.Errorf("request's private data %q", e.Param.PrivateData)
		}
		var err error
		switch e.Listener.Local().Port() {
		case 7174:
			err = h2.Accept(e.ID, srvQP, CMConnParam{PrivateData: []byte("welcome")})
		case 7177: // a UD QP the consumer keeps itself: named by number
			err = h2.Accept(e.ID, nil, CMConnParam{QPN: 0x99})
		default:
			err = h2.Reject(e.ID, []byte("go away"))
		}
		if err != nil {
			t.Error(err)
		}
	})
	if err := h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	rejecter, _ := h2.CreateCMID(cm.PortSpaceUDP, listener.handler)
	if err := h2.Listen(rejecter, netip.MustParseAddrPort("0.0.0.0:7175")); err != nil {
		t.Fatal(err)
	}
	byNumber, _ := h2.CreateCMID(cm.PortSpaceUDP, listener.handler)
	if err := h2.Listen(byNumber, netip.MustParseAddrPort("0.0.0.0:7177")); err != nil {
		t.Fatal(err)
	}

	var accepted, rejected, unknown, numbered []CMEvent
	cliQP := udQP(t, h1)
	id := sidrClient(t, h1, cliQP, 7174, &accepted)
	v.RunFor(10 * time.Millisecond)
	sidrClient(t, h1, udQP(t, h1), 7175, &rejected)
	v.RunFor(10 * time.Millisecond)
	sidrClient(t, h1, udQP(t, h1), 7176, &unknown)
	v.RunFor(10 * time.Millisecond)
	sidrClient(t, h1, udQP(t, h1), 7177, &numbered)
	v.RunFor(10 * time.Millisecond)

	if len(accepted) != 3 || accepted[2].Type != CMEventEstablished {
		t.Fatalf("client events %v", accepted)
	}
	e := accepted[2]
	if e.RemoteQPN != srvQP.QPN() || e.QKey != cm.UDPQKey || !bytes.HasPrefix(e.Param.PrivateData, []byte("welcome")) ||
		len(e.Param.PrivateData) != cm.SIDRREPPrivateDataSize {
		t.Errorf("established: QPN %v Q_Key %#x private data %q", e.RemoteQPN, e.QKey, e.Param.PrivateData)
	}
	if server[0].ID.Remote() != id.Local() || id.FlowLabel() != server[0].ID.FlowLabel() || id.FlowLabel() == 0 {
		t.Errorf("server sees %v (flow label %#x), client is %v (%#x)", server[0].ID.Remote(), server[0].ID.FlowLabel(), id.Local(), id.FlowLabel())
	}
	if last := rejected[len(rejected)-1]; last.Type != CMEventUnreachable || last.Status != int(cm.SIDRRejected) ||
		!bytes.HasPrefix(last.Param.PrivateData, []byte("go away")) {
		t.Errorf("rejected client: %v status %d %q", last.Type, last.Status, last.Param.PrivateData)
	}
	if last := unknown[len(unknown)-1]; last.Type != CMEventUnreachable || last.Status != int(cm.SIDRUnsupported) {
		t.Errorf("client of an unknown service: %v status %d", last.Type, last.Status)
	}
	if last := numbered[len(numbered)-1]; last.Type != CMEventEstablished || last.RemoteQPN != 0x99 {
		t.Errorf("client of a QP named by number: %v QPN %v", last.Type, last.RemoteQPN)
	}
	if len(server) != 3 {
		t.Errorf("server events %v", server)
	}

	want := []cm.AttributeID{cm.AttrSIDRREQ, cm.AttrSIDRREP, cm.AttrSIDRREQ, cm.AttrSIDRREP, cm.AttrSIDRREQ, cm.AttrSIDRREP,
		cm.AttrSIDRREQ, cm.AttrSIDRREP}
	if len(*mads) != len(want) {
		t.Fatalf("%d MADs, want %v", len(*mads), want)
	}
	for i, m := range *mads {
		if _, err := cm.Parse(m); err != nil || m.AttributeID() != want[i] {
			t.Fatalf("MAD %d: %v %v, want %v", i, m.AttributeID(), err, want[i])
		}
	}
	req, rep := cm.SIDRREQ((*mads)[0]), cm.SIDRREP((*mads)[1])
	if req.ServiceID() != cm.IPServiceID(cm.PortSpaceUDP, 7174) || req.PKey() != roce.DefaultPKey ||
		rep.RequestID() != req.RequestID() || rep.MAD().TransactionID() != req.MAD().TransactionID() ||
		rep.ServiceID() != req.ServiceID() || rep.Status() != cm.SIDRValid {
		t.Errorf("SIDR_REQ %x\nSIDR_REP %x", []byte(req), []byte(rep))
	}
}

// TestCMSIDRRetriesThenUnreachable: an unanswered SIDR_REQ is resent every CM
// response timeout (4.096 s), MaxCMRetries times, and then ends in UNREACHABLE with
// -ETIMEDOUT and no REJ (SIDR has none).
func TestCMSIDRRetriesThenUnreachable(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	listener, _ := h2.CreateCMID(cm.PortSpaceUDP, func(CMEvent) {}) // never answers
	if err := h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	var events []CMEvent
	sidrClient(t, h1, udQP(t, h1), 7174, &events)
	v.RunFor(time.Duration(MaxCMRetries)*sidrTimeout() + time.Second)
	if len(events) != 2 {
		t.Fatalf("events before the last timeout: %v", events)
	}
	v.RunFor(sidrTimeout())
	if last := events[len(events)-1]; last.Type != CMEventUnreachable || last.Status != errTimedOut {
		t.Errorf("events %v", events)
	}
	if n := len(*mads); n != 1+MaxCMRetries || (*mads)[n-1].AttributeID() != cm.AttrSIDRREQ || h1.Stats().CMRetries != MaxCMRetries {
		t.Errorf("%d MADs, %d retries", n, h1.Stats().CMRetries)
	}
}

// TestCMConsumerMovesQPs: both sides move their QPs themselves with InitQPAttr, as
// librdmacm's applications with QPs of their own do: the server from the connection
// request (with the client's ToS and QPN), the client from the REP, which it gets as
// ConnectResponse; Establish sends the RTU. A SEND then crosses, and the client's
// ACK timeout is SetACKTimeout's.
func TestCMConsumerMovesQPs(t *testing.T) {
	v, h1, h2, mads := cmPair(t)
	client, server := newCMEnd(t, h1), newCMEnd(t, h2)
	move := func(d *Device, id *CMID, x *QP, s qp.State) qp.Attr {
		t.Helper()
		a, mask, err := d.InitQPAttr(id, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.ModifyQP(x, &a, mask); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		return a
	}
	listener, _ := h2.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		server.events = append(server.events, e)
		if e.Type != CMEventConnectRequest {
			return
		}
		if e.RemoteQPN != client.qp.QPN() {
			t.Errorf("request from QP %v, want %v", e.RemoteQPN, client.qp.QPN())
		}
		move(h2, e.ID, server.qp, qp.StateInit)
		if a := move(h2, e.ID, server.qp, qp.StateRTR); a.DestQPN != client.qp.QPN() || a.AV.TrafficClass != 0x28 {
			t.Errorf("server RTR %+v", a)
		}
		move(h2, e.ID, server.qp, qp.StateRTS)
		if err := h2.Accept(e.ID, nil, CMConnParam{QPN: server.qp.QPN(), PrivateData: []byte("welcome"), ResponderResources: 1, InitiatorDepth: 1}); err != nil {
			t.Error(err)
		}
	})
	if err := h2.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	var id *CMID
	id, _ = h1.CreateCMID(cm.PortSpaceTCP, func(e CMEvent) {
		client.events = append(client.events, e)
		switch e.Type {
		case CMEventAddrResolved:
			_ = h1.ResolveRoute(id)
		case CMEventRouteResolved:
			if _, _, err := h1.InitQPAttr(id, qp.StateRTR); err == nil {
				t.Error("RTR attributes before the REP")
			}
			move(h1, id, client.qp, qp.StateInit)
			if err := h1.Connect(id, nil, CMConnParam{QPN: client.qp.QPN(), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7}); err != nil {
				t.Error(err)
			}
		case CMEventConnectResponse:
			if e.RemoteQPN != server.qp.QPN() || !bytes.HasPrefix(e.Param.PrivateData, []byte("welcome")) {
				t.Errorf("connect response %+v", e)
			}
			move(h1, id, client.qp, qp.StateRTR)
			if a := move(h1, id, client.qp, qp.StateRTS); a.Timeout != 14 {
				t.Errorf("client RTS timeout %d", a.Timeout)
			}
			if err := h1.Establish(id); err != nil {
				t.Error(err)
			}
		}
	})
	if err := h1.SetTOS(id, 0x28); err != nil {
		t.Fatal(err)
	}
	if err := h1.SetACKTimeout(id, 14); err != nil {
		t.Fatal(err)
	}
	if err := h1.ResolveAddr(id, netip.Addr{}, netip.MustParseAddrPort("10.0.0.2:7174"), time.Second); err != nil {
		t.Fatal(err)
	}
	v.RunFor(10 * time.Millisecond)
	if got := client.types(); !equalEvents(got, []CMEventType{CMEventAddrResolved, CMEventRouteResolved, CMEventConnectResponse}) {
		t.Fatalf("client events %v", got)
	}
	if got := server.types(); !equalEvents(got, []CMEventType{CMEventConnectRequest, CMEventEstablished}) {
		t.Fatalf("server events %v", got)
	}
	if err := h1.Establish(id); err == nil {
		t.Error("a second Establish succeeded")
	}
	if tc := cm.REQ((*mads)[0]).Primary().TrafficClass(); tc != 0x28 {
		t.Errorf("REQ's traffic class %#x", tc)
	}
	sge := func(e *cmEnd) []qp.SGE { return []qp.SGE{{Addr: e.mr.Addr(), Length: 64, LKey: e.mr.LKey()}} }
	if err := server.qp.PostRecv(&qp.RecvWR{WRID: 1, SGL: sge(server)}); err != nil {
		t.Fatal(err)
	}
	if err := client.qp.PostSend(&qp.SendWR{WRID: 2, Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: sge(client)}); err != nil {
		t.Fatal(err)
	}
	v.RunFor(time.Millisecond)
	wcs := make([]qp.WC, 2)
	if n, _ := server.cq.PollCQ(wcs); n != 1 || wcs[0].Status != qp.WCSuccess {
		t.Errorf("server completions %d: %+v", n, wcs[:n])
	}
}

// TestCMAnswersKernelSIDR: the kernel's own SIDR_REQ (udaddy.pcap) against a device
// standing in for the capture's server reaches a UDP listener, and the device's
// SIDR_REP to it equals the kernel's byte for byte but for the QPN it names (ours).
func TestCMAnswersKernelSIDR(t *testing.T) {
	client, server := kernelGSIFrames(t, "udaddy")
	if len(client) != 1 || len(server) != 1 {
		t.Fatalf("%d client and %d server MADs in udaddy.pcap, want a SIDR_REQ and a SIDR_REP", len(client), len(server))
	}
	var kp roce.Packet
	if err := kp.Decode(server[0]); err != nil {
		t.Fatal(err)
	}
	kernelRep := append(cm.MAD(nil), kp.Payload...)
	k := newKernelPeer(t)
	d, sink := k.d, k.sink
	x := udQP(t, d)
	var events []CMEvent
	listener, _ := d.CreateCMID(cm.PortSpaceUDP, func(e CMEvent) {
		events = append(events, e)
		if err := d.Accept(e.ID, x, CMConnParam{}); err != nil {
			t.Error(err)
		}
	})
	if err := d.Listen(listener, netip.MustParseAddrPort("0.0.0.0:7174")); err != nil {
		t.Fatal(err)
	}
	k.inject(client[0])
	if len(events) != 1 || events[0].ID.Remote() != netip.MustParseAddrPort("10.77.0.2:56894") {
		t.Fatalf("events %+v", events)
	}
	var p roce.Packet
	if len(sink.frames) != 1 || p.Decode(sink.frames[0]) != nil || p.VerifyICRC() != nil || p.BTH.DestQP() != roce.GSIQPN {
		t.Fatalf("%d frames from the device", len(sink.frames))
	}
	rep := cm.SIDRREP(p.Payload)
	if rep.QPN() != x.QPN() {
		t.Errorf("SIDR_REP names QP %v, ours is %v", rep.QPN(), x.QPN())
	}
	want := append(cm.MAD(nil), kernelRep...)
	kr := cm.SIDRREP(kernelRep)
	cm.SIDRREP(want).Encode(kr.RequestID(), kr.Status(), x.QPN(), kr.ServiceID(), kr.QKey())
	if !bytes.Equal(p.Payload, want) {
		t.Errorf("SIDR_REP\n got %x\nwant %x (the kernel's, with our QPN)", p.Payload, []byte(want))
	}
}

// TestCMPorts: ports as the kernel's rdma_cm allocates them (cma_get_port,
// cma_check_port, cma_alloc_any_port): port 0 is a free port of the local range, each
// port space has ports of its own, a taken address and port is EADDRINUSE and a
// wildcard one EADDRNOTAVAIL, REUSEADDR shares until a listen, and a full range is
// EADDRNOTAVAIL.
func TestCMPorts(t *testing.T) {
	_, h1, _, _ := cmPair(t)
	h1.SetLocalPortRange(func() (uint16, uint16) { return 40000, 40003 })
	newID := func(ps cm.PortSpace) *CMID {
		id, err := h1.CreateCMID(ps, func(CMEvent) {})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	addr := netip.MustParseAddr("10.0.0.1")
	any4 := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	seen := map[uint16]bool{}
	for range 4 {
		got, err := h1.Bind(newID(cm.PortSpaceTCP), any4)
		if err != nil || got.Port() < 40000 || got.Port() > 40003 || seen[got.Port()] {
			t.Fatalf("ephemeral bind: %v, %v (had %v)", got, err, seen)
		}
		seen[got.Port()] = true
	}
	if _, err := h1.Bind(newID(cm.PortSpaceTCP), any4); !errors.Is(err, ErrAddrNotAvailable) {
		t.Errorf("bind with the range full: %v, want EADDRNOTAVAIL", err)
	}
	if got, err := h1.Bind(newID(cm.PortSpaceUDP), any4); err != nil || got.Port() < 40000 || got.Port() > 40003 {
		t.Errorf("UDP port space bind with TCP's range full: %v, %v", got, err)
	}
	l := newID(cm.PortSpaceTCP)
	if err := h1.Listen(l, any4); !errors.Is(err, ErrAddrNotAvailable) {
		t.Errorf("listen without a free port: %v", err)
	}

	h1.SetLocalPortRange(nil)
	fixed := netip.AddrPortFrom(addr, 7471)
	a := newID(cm.PortSpaceTCP)
	if got, err := h1.Bind(a, fixed); err != nil || got != fixed {
		t.Fatalf("bind %v: %v, %v", fixed, got, err)
	}
	if _, err := h1.Bind(a, fixed); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("second bind of one identifier: %v, want EINVAL", err)
	}
	if _, err := h1.Bind(newID(cm.PortSpaceTCP), fixed); !errors.Is(err, ErrAddrInUse) {
		t.Errorf("bind of a bound address and port: %v, want EADDRINUSE", err)
	}
	if _, err := h1.Bind(newID(cm.PortSpaceTCP), netip.AddrPortFrom(netip.IPv4Unspecified(), 7471)); !errors.Is(err, ErrAddrNotAvailable) {
		t.Errorf("wildcard bind of a bound port: %v, want EADDRNOTAVAIL", err)
	}
	if _, err := h1.Bind(newID(cm.PortSpaceUDP), fixed); err != nil {
		t.Errorf("the same port in the UDP port space: %v", err)
	}
	if _, err := h1.Bind(newID(cm.PortSpaceTCP), netip.MustParseAddrPort("10.9.9.9:7472")); !errors.Is(err, ErrAddrNotAvailable) {
		t.Errorf("bind to an address of no device: %v, want EADDRNOTAVAIL", err)
	}
	if err := h1.Listen(a, netip.AddrPort{}); err != nil {
		t.Fatalf("listen on the bound identifier: %v", err)
	}
	if l := h1.cm.listener(cm.PortSpaceTCP, 7471, addr); l != a {
		t.Errorf("listener of 10.0.0.1:7471 is %p, want %p", l, a)
	}
	if err := h1.DestroyCMID(a); err != nil {
		t.Fatal(err)
	}
	if _, err := h1.Bind(newID(cm.PortSpaceTCP), fixed); err != nil {
		t.Errorf("bind after the owner's destroy: %v", err)
	}

	r1, r2 := newID(cm.PortSpaceTCP), newID(cm.PortSpaceTCP)
	shared := netip.AddrPortFrom(addr, 7500)
	for _, id := range []*CMID{r1, r2} {
		if err := h1.SetReuseAddr(id, true); err != nil {
			t.Fatal(err)
		}
		if _, err := h1.Bind(id, shared); err != nil {
			t.Fatalf("REUSEADDR bind: %v", err)
		}
	}
	if err := h1.SetReuseAddr(r1, false); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("REUSEADDR cleared on a bound identifier: %v, want EINVAL", err)
	}
	if err := h1.Listen(r1, netip.AddrPort{}); !errors.Is(err, ErrAddrInUse) {
		t.Errorf("listen on a shared port: %v, want EADDRINUSE", err)
	}
	if err := h1.DestroyCMID(r2); err != nil {
		t.Fatal(err)
	}
	if err := h1.Listen(r1, netip.AddrPort{}); err != nil {
		t.Errorf("listen on the port once alone: %v", err)
	}
	if err := h1.SetReuseAddr(r1, true); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("REUSEADDR set on a listener: %v, want EINVAL", err)
	}
}
