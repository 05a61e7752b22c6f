package cm

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/roce"
)

// capturedMAD is a CM MAD of a kernel capture with the packet that carried it.
type capturedMAD struct {
	frame int
	src   netip.Addr
	mad   MAD
}

// captured returns the RoCE packets and the CM MADs of one of the kernel's captures
// (roce/testdata/rxe, rxe on kernel 6.1 talking to itself).
func captured(t testing.TB, name string) (data []roce.Packet, mads []capturedMAD) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "rxe", name+".pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		var p roce.Packet
		if p.Decode(frame) != nil {
			continue
		}
		if p.BTH.DestQP() != roce.GSIQPN {
			data = append(data, p)
			continue
		}
		if p.DETH == nil || p.DETH.QKey() != GSIQKey || p.DETH.SrcQP() != roce.GSIQPN {
			t.Fatalf("%s frame %d: GSI packet without the GSI DETH", name, i)
		}
		if len(p.Payload) != MADSize {
			t.Fatalf("%s frame %d: GSI payload of %d bytes", name, i, len(p.Payload))
		}
		m, err := Parse(p.Payload)
		if err != nil {
			t.Fatalf("%s frame %d: %v", name, i, err)
		}
		mads = append(mads, capturedMAD{frame: i, src: p.IPv4.Src(), mad: m})
	}
	return data, mads
}

// reencode rebuilds a MAD from the values its view decodes, private data copied.
func reencode(t *testing.T, m MAD) []byte {
	t.Helper()
	out := make(MAD, MADSize)
	h := m.Fields()
	out.Encode(&h)
	switch m.AttributeID() {
	case AttrREQ:
		f := REQ(m).Fields()
		REQ(out).Encode(&f)
		copy(REQ(out).PrivateData(), REQ(m).PrivateData())
	case AttrREP:
		f := REP(m).Fields()
		REP(out).Encode(&f)
		copy(REP(out).PrivateData(), REP(m).PrivateData())
	case AttrRTU, AttrDREP:
		Pair(out).Encode(Pair(m).LocalCommID(), Pair(m).RemoteCommID())
		copy(Pair(out).PrivateData(), Pair(m).PrivateData())
	case AttrDREQ:
		DREQ(out).Encode(DREQ(m).LocalCommID(), DREQ(m).RemoteCommID(), DREQ(m).RemoteQPN())
		copy(DREQ(out).PrivateData(), DREQ(m).PrivateData())
	case AttrREJ:
		r := REJ(m)
		REJ(out).Encode(r.LocalCommID(), r.RemoteCommID(), r.MessageRejected(), r.Reason(), r.ARI())
		copy(REJ(out).PrivateData(), r.PrivateData())
	case AttrMRA:
		r := MRA(m)
		MRA(out).Encode(r.LocalCommID(), r.RemoteCommID(), r.MessageMRAed(), r.ServiceTimeout())
		copy(MRA(out).PrivateData(), r.PrivateData())
	case AttrSIDRREQ:
		s := SIDRREQ(m)
		SIDRREQ(out).Encode(s.RequestID(), s.PKey(), s.ServiceID())
		copy(SIDRREQ(out).PrivateData(), s.PrivateData())
	case AttrSIDRREP:
		s := SIDRREP(m)
		SIDRREP(out).Encode(s.RequestID(), s.Status(), s.QPN(), s.ServiceID(), s.QKey())
		copy(SIDRREP(out).PrivateData(), s.PrivateData())
	default:
		copy(out, m)
	}
	return out
}

// TestKernelRping checks every field of the connection the kernel's rping made in
// rping.pcap (client 10.77.0.2 -> server 10.77.0.1:7174, the values read by hand from
// the capture's bytes), that the data packets use what REQ and REP negotiated, and
// that every MAD rebuilds byte for byte from its decoded values.
func TestKernelRping(t *testing.T) {
	data, mads := captured(t, "rping")
	var attrs []AttributeID
	for _, c := range mads {
		attrs = append(attrs, c.mad.AttributeID())
		if got := reencode(t, c.mad); !bytes.Equal(got, c.mad) {
			t.Errorf("frame %d %v: rebuilt\n%x\nwant\n%x", c.frame, c.mad.AttributeID(), got, []byte(c.mad))
		}
		if h := c.mad.Fields(); h != CMHeader(c.mad.AttributeID(), 0x2c6bad573) {
			t.Errorf("frame %d: header %+v", c.frame, h)
		}
	}
	want := []AttributeID{AttrREQ, AttrREP, AttrRTU, AttrDREQ, AttrDREP}
	if !equalAttrs(attrs, want) {
		t.Fatalf("messages %v, want %v", attrs, want)
	}
	client, server := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")
	req := REQ(mads[0].mad)
	wantREQ := REQFields{
		LocalCommID: 0x73d5bac6, ServiceID: IPServiceID(PortSpaceTCP, 7174), LocalCAGUID: 0x50540afffe4d0002,
		LocalQPN: 0x11, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 20,
		TransportType: TransportRC, StartingPSN: 0x153c83, LocalCMResponseTimeout: 20, RetryCount: 7,
		PKey: roce.DefaultPKey, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: PathFields{
			LocalLID: 0xFFFF, RemoteLID: 0xFFFF, LocalGID: roce.GIDFromAddr(client), RemoteGID: roce.GIDFromAddr(server),
			FlowLabel: 0x43efc, HopLimit: 64, LocalACKTimeout: 19,
		},
	}
	if got := req.Fields(); got != wantREQ {
		t.Errorf("REQ\n got %+v\nwant %+v", got, wantREQ)
	}
	cma, err := ParseCMAHeader(req.PrivateData())
	if err != nil {
		t.Fatal(err)
	}
	if cma.SrcAddr() != client || cma.DstAddr() != server || cma.SrcPort() != 0xa64a {
		t.Errorf("CMA header %v:%d -> %v", cma.SrcAddr(), cma.SrcPort(), cma.DstAddr())
	}
	if !allZero(req.PrivateData()[CMAHeaderSize:]) {
		t.Errorf("rping sends no private data of its own, REQ has %x", req.PrivateData()[CMAHeaderSize:])
	}
	rep := REP(mads[1].mad)
	wantREP := REPFields{
		LocalCommID: 0x05aee428, RemoteCommID: 0x73d5bac6, LocalQPN: 0x11, StartingPSN: 0x4503df,
		ResponderResources: 1, InitiatorDepth: 1, TargetACKDelay: 15, RNRRetryCount: 7,
		LocalCAGUID: 0x50540afffe4d0001,
	}
	if got := rep.Fields(); got != wantREP {
		t.Errorf("REP\n got %+v\nwant %+v", got, wantREP)
	}
	rtu, dreq, drep := Pair(mads[2].mad), DREQ(mads[3].mad), Pair(mads[4].mad)
	if rtu.LocalCommID() != req.LocalCommID() || rtu.RemoteCommID() != rep.LocalCommID() {
		t.Errorf("RTU comm IDs %#x %#x", rtu.LocalCommID(), rtu.RemoteCommID())
	}
	// The client disconnects: DREQ from the active side names the passive side's QP.
	if mads[3].src != client || dreq.LocalCommID() != req.LocalCommID() || dreq.RemoteCommID() != rep.LocalCommID() || dreq.RemoteQPN() != rep.LocalQPN() {
		t.Errorf("DREQ from %v: comm IDs %#x %#x, QPN %v", mads[3].src, dreq.LocalCommID(), dreq.RemoteCommID(), dreq.RemoteQPN())
	}
	if drep.LocalCommID() != rep.LocalCommID() || drep.RemoteCommID() != req.LocalCommID() {
		t.Errorf("DREP comm IDs %#x %#x", drep.LocalCommID(), drep.RemoteCommID())
	}
	// The RC data that follows uses what the CM negotiated: each side sends from the
	// starting PSN its peer announced (a Starting PSN is the sender's receive PSN), and
	// the UDP source port is derived from the REQ's flow label.
	first := map[netip.Addr]roce.PSN{}
	for _, p := range data {
		if _, seen := first[p.IPv4.Src()]; !seen && p.Info().Transport == roce.TransportRC && p.AETH == nil {
			first[p.IPv4.Src()] = p.BTH.PSN()
		}
		if want := roce.ConnectedSourcePort(req.Primary().FlowLabel(), 0x11, 0x11); p.UDP.SrcPort() != want {
			t.Fatalf("data packet source port %#x, want %#x from the REQ's flow label", p.UDP.SrcPort(), want)
		}
	}
	if first[client] != rep.StartingPSN() || first[server] != req.StartingPSN() {
		t.Errorf("first request PSNs client %v server %v, want %v %v", first[client], first[server], rep.StartingPSN(), req.StartingPSN())
	}
}

// TestKernelWriteBwRdmacm checks ib_write_bw -R's two connections (perftest connects
// once for its parameter exchange and once per QP): every MAD parses and rebuilds,
// every REP, RTU answers its REQ.
func TestKernelWriteBwRdmacm(t *testing.T) {
	_, mads := captured(t, "write_bw_rdmacm")
	reqs := map[uint32]REQ{}
	counts := map[AttributeID]int{}
	for _, c := range mads {
		counts[c.mad.AttributeID()]++
		if got := reencode(t, c.mad); !bytes.Equal(got, c.mad) {
			t.Errorf("frame %d %v: rebuilt\n%x\nwant\n%x", c.frame, c.mad.AttributeID(), got, []byte(c.mad))
		}
		switch m := c.mad; m.AttributeID() {
		case AttrREQ:
			r := REQ(m)
			reqs[r.LocalCommID()] = r
			if r.ServiceID() != IPServiceID(PortSpaceTCP, 18515) {
				t.Errorf("REQ service ID %v, want perftest's port 18515", r.ServiceID())
			}
			if _, err := ParseCMAHeader(r.PrivateData()); err != nil {
				t.Error(err)
			}
		case AttrREP:
			r := REP(m)
			if req, ok := reqs[r.RemoteCommID()]; !ok || req.MAD().TransactionID() != m.TransactionID() {
				t.Errorf("REP for comm ID %#x: no REQ with its transaction ID", r.RemoteCommID())
			}
		case AttrRTU:
			if _, ok := reqs[Pair(m).LocalCommID()]; !ok {
				t.Errorf("RTU of unknown comm ID %#x", Pair(m).LocalCommID())
			}
		}
	}
	if counts[AttrREQ] < 2 || counts[AttrREP] != counts[AttrREQ] || counts[AttrRTU] != counts[AttrREQ] {
		t.Errorf("messages %v", counts)
	}
}

// TestKernelUdaddy: the kernel's udaddy exchange (udaddy.pcap, udaddy -C 3 -S 64 between
// two rxe VMs): every field of its SIDR_REQ and SIDR_REP as read by hand from the
// bytes, both rebuilt byte for byte, and the UD SENDs that follow addressed with what
// the SIDR_REP announced.
func TestKernelUdaddy(t *testing.T) {
	data, mads := captured(t, "udaddy")
	if len(mads) != 2 || len(data) != 6 {
		t.Fatalf("%d MADs and %d data packets, want 2 and 6", len(mads), len(data))
	}
	for _, c := range mads {
		if got := reencode(t, c.mad); !bytes.Equal(got, c.mad) {
			t.Errorf("frame %d: %v does not rebuild:\n got %x\nwant %x", c.frame, c.mad.AttributeID(), got, []byte(c.mad))
		}
	}
	client, server := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")
	req, rep := SIDRREQ(mads[0].mad), SIDRREP(mads[1].mad)
	sid := IPServiceID(PortSpaceUDP, 7174)
	if mads[0].src != client || req.MAD().AttributeID() != AttrSIDRREQ || req.MAD().TransactionID() != 0x238526c1f ||
		req.RequestID() != 0x1f6c5238 || req.PKey() != 0xFFFF || req.ServiceID() != sid {
		t.Errorf("SIDR_REQ: TID %#x request %#x P_Key %#x service %v", req.MAD().TransactionID(), req.RequestID(), req.PKey(), req.ServiceID())
	}
	hdr, err := ParseCMAHeader(req.PrivateData())
	if err != nil || hdr.SrcAddr() != client || hdr.SrcPort() != 0xde3e || hdr.DstAddr() != server ||
		!bytes.Equal(req.PrivateData()[CMAHeaderSize:], make([]byte, SIDRREQPrivateDataSize-CMAHeaderSize)) {
		t.Errorf("SIDR_REQ's rdma_cm header: %v %x", err, req.PrivateData()[:CMAHeaderSize])
	}
	if mads[1].src != server || rep.MAD().AttributeID() != AttrSIDRREP || rep.MAD().TransactionID() != req.MAD().TransactionID() ||
		rep.RequestID() != req.RequestID() || rep.Status() != SIDRValid || rep.QPN() != 0x11 || rep.ServiceID() != sid ||
		rep.QKey() != UDPQKey || !bytes.Equal(rep.PrivateData(), make([]byte, SIDRREPPrivateDataSize)) {
		t.Errorf("SIDR_REP: %x", []byte(rep))
	}
	for i, p := range data {
		if p.DETH == nil || p.DETH.QKey() != UDPQKey || (p.IPv4.Dst() == server && p.BTH.DestQP() != rep.QPN()) {
			t.Errorf("UD SEND %d: DETH %v, to QP %v", i, p.DETH, p.BTH.DestQP())
		}
	}
}

func TestParseErrors(t *testing.T) {
	_, mads := captured(t, "rping")
	good := mads[0].mad
	mutate := func(f func(m MAD)) []byte {
		m := append(MAD(nil), good...)
		f(m)
		return m
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:MADSize-1], ErrTruncated},
		{"base version", mutate(func(m MAD) { m[0] = 2 }), ErrNotCM},
		{"SA class", mutate(func(m MAD) { m[1] = 0x03 }), ErrNotCM},
		{"class version 1", mutate(func(m MAD) { m[2] = 1 }), ErrNotCM},
		{"REQ as GetResp", mutate(func(m MAD) { m[3] = byte(MethodGetResp) }), ErrNotCM},
		{"unknown attribute", mutate(func(m MAD) { m.SetAttributeID(0x0042) }), ErrUnknownAttribute},
		{"REJ ARI too long", mutate(func(m MAD) { m.SetAttributeID(AttrREJ); m[33] = 73 << 1 }), ErrBadField},
	}
	for _, c := range cases {
		if _, err := Parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := ParseCMAHeader(make([]byte, CMAHeaderSize-1)); !errors.Is(err, ErrTruncated) {
		t.Errorf("short CMA header: %v", err)
	}
	if _, err := ParseCMAHeader(make([]byte, CMAHeaderSize)); !errors.Is(err, ErrBadField) {
		t.Errorf("CMA header of IP version 0: %v", err)
	}
}

func TestCMAHeaderEncode(t *testing.T) {
	for _, c := range []struct{ src, dst string }{{"10.0.0.1", "10.0.0.2"}, {"fd77::1", "fd77::2"}, {"::ffff:10.0.0.1", "10.0.0.2"}} {
		h := make(CMAHeader, CMAHeaderSize)
		src, dst := netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst)
		if err := h.Encode(src, 4242, dst); err != nil {
			t.Fatal(err)
		}
		p, err := ParseCMAHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if p.SrcAddr() != src.Unmap() || p.DstAddr() != dst.Unmap() || p.SrcPort() != 4242 {
			t.Errorf("%v -> %v: decoded %v:%d -> %v", src, dst, p.SrcAddr(), p.SrcPort(), p.DstAddr())
		}
	}
	h := make(CMAHeader, CMAHeaderSize)
	if err := h.Encode(netip.MustParseAddr("10.0.0.1"), 1, netip.MustParseAddr("fd77::1")); err == nil {
		t.Error("CMA header across address families: no error")
	}
}

func TestServiceID(t *testing.T) {
	s := IPServiceID(PortSpaceTCP, 7174)
	if uint64(s) != 0x0000000001061c06 || s.PortSpace() != PortSpaceTCP || s.Port() != 7174 || !s.IsIP() {
		t.Errorf("%v: port space %#x port %d ip %v", s, s.PortSpace(), s.Port(), s.IsIP())
	}
	if ServiceID(0x1234).IsIP() {
		t.Error("0x1234 is not an IP service ID")
	}
}

// FuzzParse feeds arbitrary MADs to Parse. Whatever the input: no panic; a MAD Parse
// accepts rebuilds from its decoded values to one that parses to the same message.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"rping", "write_bw_rdmacm", "udaddy"} {
		_, mads := captured(f, name)
		for _, c := range mads {
			f.Add([]byte(c.mad))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		out := reencode(t, m)
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("rebuilt MAD does not parse: %v", err)
		}
		if again := reencode(t, m2); !bytes.Equal(again, out) {
			t.Fatalf("rebuild is not stable:\n%x\n%x", again, out)
		}
		if m.AttributeID() == AttrREQ {
			if h, err := ParseCMAHeader(REQ(m).PrivateData()); err == nil {
				_, _ = h.SrcAddr(), h.DstAddr()
			}
		}
	})
}

func equalAttrs(a, b []AttributeID) bool {
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

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
