package layers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	gplayers "github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rocelab/rocelab/roce"
)

// rxeFrame is one RoCEv2 frame of the kernel rxe captures with roce.Packet's decoding.
type rxeFrame struct {
	name      string // capture#n
	frame     []byte
	pkt       roce.Packet
	transport []byte // the UDP payload
	ipEnd     int    // where the IP packet ends (Ethernet padding follows)
}

// rxeFrames returns every RoCEv2 frame of the kernel rxe captures (roce/testdata/rxe).
func rxeFrames(t *testing.T) []rxeFrame {
	t.Helper()
	var out []rxeFrame
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "rxe", "*.pcap"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no rxe captures: %v", err)
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; ; i++ {
			data, _, err := r.ReadPacketData()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			x := rxeFrame{name: fmt.Sprintf("%s#%d", filepath.Base(path), i), frame: data}
			if x.pkt.Decode(data) != nil {
				continue
			}
			l, err := roce.Locate(data)
			if err != nil {
				t.Fatal(err)
			}
			x.transport, x.ipEnd = data[l.L4+roce.UDPSize:l.End], l.End
			out = append(out, x)
		}
		f.Close()
	}
	return out
}

// sameTransport compares the layer's views with roce.Packet's.
func sameTransport(l *BTH, p *roce.Packet) bool {
	a, b := &l.TransportPacket, &p.TransportPacket
	eq := bytes.Equal
	return eq(a.BTH, b.BTH) && eq(a.DETH, b.DETH) && eq(a.XRCETH, b.XRCETH) && eq(a.RETH, b.RETH) && eq(a.AtomicETH, b.AtomicETH) &&
		eq(a.AETH, b.AETH) && eq(a.AtomicAck, b.AtomicAck) && eq(a.ImmDt, b.ImmDt) && eq(a.IETH, b.IETH) &&
		eq(a.CNP, b.CNP) && eq(a.Payload, b.Payload) && eq(a.Pad, b.Pad) && eq(a.ICRC, b.ICRC)
}

// Golden vectors: every RoCEv2 frame the kernel's rxe sent decodes through a
// DecodingLayerParser to Ethernet / IP / UDP / BTH [/ Payload] with the views
// roce.Packet finds, allocating nothing, and serializes back byte for byte.
func TestDecodingLayerParserRxe(t *testing.T) {
	frames := rxeFrames(t)
	if len(frames) != 428 {
		t.Fatalf("%d RoCEv2 frames in the captures, want the 428 of SUMMARY.txt", len(frames))
	}
	var (
		eth     gplayers.Ethernet
		ip4     gplayers.IPv4
		ip6     gplayers.IPv6
		udp     gplayers.UDP
		bth     BTH
		payload gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(gplayers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &bth, &payload)
	decoded := make([]gopacket.LayerType, 0, 8)
	for _, x := range frames {
		if err := parser.DecodeLayers(x.frame, &decoded); err != nil {
			t.Fatalf("%s: %v (decoded %v)", x.name, err, decoded)
		}
		if len(decoded) < 4 || decoded[3] != LayerTypeBTH {
			t.Fatalf("%s: layers %v", x.name, decoded)
		}
		if !sameTransport(&bth, &x.pkt) || !bytes.Equal(bth.LayerContents(), x.transport[:len(bth.LayerContents())]) {
			t.Fatalf("%s: layer %+v, want %+v", x.name, bth.TransportPacket, x.pkt.TransportPacket)
		}
		if len(bth.LayerContents())+len(bth.Payload)+len(bth.Pad)+roce.ICRCSize != len(x.transport) {
			t.Fatalf("%s: contents %d + payload %d + pad %d + ICRC do not make the %d-byte UDP payload",
				x.name, len(bth.LayerContents()), len(bth.Payload), len(bth.Pad), len(x.transport))
		}
		ip := gopacket.SerializableLayer(&ip4)
		if decoded[1] == gplayers.LayerTypeIPv6 {
			ip = &ip6
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &eth, ip, &udp, &bth, gopacket.Payload(bth.Payload)); err != nil {
			t.Fatalf("%s: serialize: %v", x.name, err)
		}
		if got := buf.Bytes(); len(got) < x.ipEnd || !bytes.Equal(got[:x.ipEnd], x.frame[:x.ipEnd]) {
			t.Fatalf("%s: serialized\n%x\nwant\n%x", x.name, got, x.frame)
		}
	}
	f := frames[0].frame
	if n := testing.AllocsPerRun(100, func() { _ = parser.DecodeLayers(f, &decoded) }); n != 0 {
		t.Errorf("DecodingLayerParser: %v allocations per RoCEv2 frame", n)
	}
}

// gopacket.NewPacket finds the BTH layer on port 4791 and hands the message to the
// payload layer.
func TestNewPacketRxe(t *testing.T) {
	for _, x := range rxeFrames(t) {
		pkt := gopacket.NewPacket(x.frame, gplayers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("%s: %v", x.name, el.Error())
		}
		l, ok := pkt.Layer(LayerTypeBTH).(*BTH)
		if !ok || !sameTransport(l, &x.pkt) {
			t.Fatalf("%s: BTH layer %v", x.name, pkt)
		}
		var payload []byte
		if app := pkt.ApplicationLayer(); app != nil {
			payload = app.Payload()
		}
		if !bytes.Equal(payload, x.pkt.Payload) {
			t.Errorf("%s: payload %d bytes, want %d", x.name, len(payload), len(x.pkt.Payload))
		}
	}
}

// With FixLengths the pad count follows the payload: a frame whose pad count was
// cleared serializes as rxe sent it.
func TestSerializeFixLengths(t *testing.T) {
	fixed := 0
	for _, x := range rxeFrames(t) {
		if len(x.pkt.Pad) == 0 {
			continue
		}
		var l BTH
		if err := l.DecodeFromBytes(bytes.Clone(x.transport), gopacket.NilDecodeFeedback); err != nil {
			t.Fatal(err)
		}
		l.BTH.SetPadCnt(0)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &l, gopacket.Payload(l.Payload)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), x.transport) {
			t.Fatalf("%s: serialized %x, want %x", x.name, buf.Bytes(), x.transport)
		}
		fixed++
	}
	if fixed == 0 {
		t.Fatal("no padded frame in the captures")
	}
}

// FuzzDecodeFromBytes: the layer decodes what roce.TransportPacket decodes, and never
// panics.
func FuzzDecodeFromBytes(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var l BTH
		var want roce.TransportPacket
		errL, errW := l.DecodeFromBytes(b, gopacket.NilDecodeFeedback), want.Decode(b)
		if (errL == nil) != (errW == nil) {
			t.Fatalf("layer %v, transport %v", errL, errW)
		}
		if errL == nil && len(l.LayerContents())+len(l.Payload)+len(l.Pad)+roce.ICRCSize != len(b) {
			t.Fatalf("layer parts do not add up to %d bytes", len(b))
		}
	})
}
