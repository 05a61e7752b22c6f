package roce

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestGopacketLayers decodes every RoCE frame of the captures through gopacket and
// compares each layer with Packet.Decode's views.
func TestGopacketLayers(t *testing.T) {
	for name := range rxeCaptures {
		var p Packet
		for i, f := range readPcap(t, filepath.Join("testdata", "rxe", name+".pcap")) {
			if p.Decode(f) != nil {
				continue
			}
			pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			if el := pkt.ErrorLayer(); el != nil {
				t.Fatalf("%s frame %d: %v", name, i+1, el.Error())
			}
			bl, ok := pkt.Layer(LayerTypeBTH).(*BTHLayer)
			if !ok {
				t.Fatalf("%s frame %d: no BTH layer in %v", name, i+1, pkt)
			}
			if bl.BTHFields != p.BTH.Fields() || bl.ICRC != p.ICRC {
				t.Errorf("%s frame %d: BTH %+v, want %+v", name, i+1, bl.BTHFields, p.BTH.Fields())
			}
			want := map[gopacket.LayerType][]byte{
				LayerTypeDETH: p.DETH, LayerTypeRETH: p.RETH, LayerTypeAtomicETH: p.AtomicETH,
				LayerTypeAETH: p.AETH, LayerTypeAtomicAckETH: p.AtomicAck, LayerTypeImmDt: p.ImmDt,
				LayerTypeIETH: p.IETH, LayerTypeCNP: p.CNP,
			}
			for lt, hdr := range want {
				l := pkt.Layer(lt)
				if (l == nil) != (hdr == nil) || l != nil && !bytes.Equal(l.LayerContents(), hdr) {
					t.Errorf("%s frame %d: layer %v = %v, want %x", name, i+1, lt, l, hdr)
				}
			}
			var payload []byte
			if app := pkt.ApplicationLayer(); app != nil {
				payload = app.Payload()
			}
			if !bytes.Equal(payload, p.Payload) {
				t.Errorf("%s frame %d: payload %d bytes, want %d", name, i+1, len(payload), len(p.Payload))
			}
		}
	}
}
