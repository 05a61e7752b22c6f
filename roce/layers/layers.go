package roce

import (
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// gopacket integration. Importing this package registers the RoCEv2 layer types and
// binds UDP port 4791 to LayerTypeBTH, so gopacket.NewPacket decodes RoCEv2 frames down
// to BTH, each extension header and the payload:
//
//	Ethernet / IPv4|IPv6 / UDP / BTH / [DETH] [RETH] [AtomicETH] [AETH] [AtomicAckETH]
//	  [ImmDt] [IETH] [CNP] / Payload
//
// The layers are for gopacket users (inspection, tooling). rocelab's own data path uses
// Packet.Decode, which does not allocate, and Packet.VerifyICRC: a gopacket layer
// decoder cannot see the IP header the ICRC covers, so BTHLayer reports the carried
// ICRC without checking it.

// Layer type numbers: gopacket reserves numbers below 1000; rocelab's start at 47910.
const layerTypeBase = 47910

// Layer types registered with gopacket.
var (
	LayerTypeBTH          = register(0, "RoCEv2 BTH", decodeBTHLayer)
	LayerTypeDETH         = register(1, "RoCEv2 DETH", nil)
	LayerTypeRETH         = register(2, "RoCEv2 RETH", nil)
	LayerTypeAtomicETH    = register(3, "RoCEv2 AtomicETH", nil)
	LayerTypeAETH         = register(4, "RoCEv2 AETH", nil)
	LayerTypeAtomicAckETH = register(5, "RoCEv2 AtomicAckETH", nil)
	LayerTypeImmDt        = register(6, "RoCEv2 ImmDt", nil)
	LayerTypeIETH         = register(7, "RoCEv2 IETH", nil)
	LayerTypeCNP          = register(8, "RoCEv2 CNP", nil)
)

func init() {
	layers.RegisterUDPPortLayerType(UDPPort, LayerTypeBTH)
}

func register(n int, name string, decode func([]byte, gopacket.PacketBuilder) error) gopacket.LayerType {
	meta := gopacket.LayerTypeMetadata{Name: name}
	if decode != nil {
		meta.Decoder = gopacket.DecodeFunc(decode)
	}
	return gopacket.RegisterLayerType(layerTypeBase+n, meta)
}

// BTHLayer is the gopacket layer of a Base Transport Header. Its Payload is everything
// after the BTH up to the pad: extension headers and message payload.
type BTHLayer struct {
	layers.BaseLayer
	BTHFields
	ICRC uint32 // as carried (little-endian on the wire), not verified here
}

func (l *BTHLayer) LayerType() gopacket.LayerType { return LayerTypeBTH }

// ExtensionLayer is the gopacket layer of one extension transport header. LayerType
// says which; the typed accessors return a view of its bytes.
type ExtensionLayer struct {
	layers.BaseLayer
	Type gopacket.LayerType
}

func (l *ExtensionLayer) LayerType() gopacket.LayerType { return l.Type }

// RETH returns the header as a RETH view (valid when LayerType is LayerTypeRETH).
func (l *ExtensionLayer) RETH() RETH { return RETH(l.Contents) }

// AETH returns the header as an AETH view.
func (l *ExtensionLayer) AETH() AETH { return AETH(l.Contents) }

// AtomicETH returns the header as an AtomicETH view.
func (l *ExtensionLayer) AtomicETH() AtomicETH { return AtomicETH(l.Contents) }

// AtomicAckETH returns the header as an AtomicAckETH view.
func (l *ExtensionLayer) AtomicAckETH() AtomicAckETH { return AtomicAckETH(l.Contents) }

// ImmDt returns the header as an ImmDt view.
func (l *ExtensionLayer) ImmDt() ImmDt { return ImmDt(l.Contents) }

// IETH returns the header as an IETH view.
func (l *ExtensionLayer) IETH() IETH { return IETH(l.Contents) }

// DETH returns the header as a DETH view.
func (l *ExtensionLayer) DETH() DETH { return DETH(l.Contents) }

var extensionLayerTypes = map[Headers]*gopacket.LayerType{
	HdrDETH: &LayerTypeDETH, HdrRETH: &LayerTypeRETH, HdrAtomicETH: &LayerTypeAtomicETH,
	HdrAETH: &LayerTypeAETH, HdrAtomicAckETH: &LayerTypeAtomicAckETH, HdrImmDt: &LayerTypeImmDt,
	HdrIETH: &LayerTypeIETH, HdrCNP: &LayerTypeCNP,
}

// decodeBTHLayer decodes the BTH, then every extension header the opcode carries, then
// hands the payload (without pad and ICRC) to gopacket's payload decoder. data is the
// UDP payload.
func decodeBTHLayer(data []byte, pb gopacket.PacketBuilder) error {
	if len(data) < BTHSize+ICRCSize {
		return decodeErr("bth", 0, ErrTruncated, "%d bytes of UDP payload, need %d", len(data), BTHSize+ICRCSize)
	}
	bth := BTH(data[:BTHSize])
	info := bth.Opcode().Info()
	if info == nil {
		return &DecodeError{Layer: "bth", Err: &UnknownOpcodeError{Opcode: bth.Opcode()}, Detail: "opcode " + bth.Opcode().String()}
	}
	icrc := len(data) - ICRCSize
	if BTHSize+info.Headers.Size() > icrc {
		return decodeErr("eth", BTHSize, ErrTruncated, "%s needs %d bytes of extension headers", info.Name, info.Headers.Size())
	}
	pad := int(bth.PadCnt())
	// Each layer's Payload runs to the end of the BTH payload, pad excluded, so that
	// NextDecoder hands exactly the message bytes to the payload layer.
	end := icrc - pad
	if end < BTHSize+info.Headers.Size() {
		return decodeErr("payload", BTHSize, ErrBadPadCount, "pad count %d exceeds the payload", pad)
	}
	l := &BTHLayer{BTHFields: bth.Fields(), ICRC: ReadICRC(data[icrc:])}
	l.Contents, l.Payload = data[:BTHSize], data[BTHSize:end]
	pb.AddLayer(l)
	off := BTHSize
	for _, e := range headerOrder {
		if info.Headers&e.hdr == 0 {
			continue
		}
		x := &ExtensionLayer{Type: *extensionLayerTypes[e.hdr]}
		x.Contents, x.Payload = data[off:off+e.size], data[off+e.size:end]
		pb.AddLayer(x)
		off += e.size
	}
	return pb.NextDecoder(gopacket.LayerTypePayload)
}
