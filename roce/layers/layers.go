// Package layers plugs RoCEv2 into gopacket: importing it registers LayerTypeBTH and
// binds UDP port 4791 to it, so gopacket.NewPacket decodes RoCEv2 frames, and a
// DecodingLayerParser given a *BTH decodes them without allocating:
//
//	Ethernet / [Dot1Q...] / IPv4|IPv6 / UDP / BTH (and extension headers) / Payload
//
// The BTH layer is roce.TransportPacket (the views Packet.Decode also fills) as a
// gopacket layer: its contents are the BTH and the extension headers the opcode
// carries, its payload the message without pad. It lives apart from package roce so
// that the data path and the sample apps do not link gopacket.
//
// A layer decoder sees only the UDP payload, not the IP header the ICRC covers, so
// the layer reports the ICRC as carried; roce.Packet.VerifyICRC checks it.
package layers

import (
	"github.com/gopacket/gopacket"
	gplayers "github.com/gopacket/gopacket/layers"

	"github.com/rocelab/rocelab/roce"
)

// LayerTypeBTH is the layer type of a RoCEv2 transport packet. gopacket serves layer
// types below its maxLayerType (2000) from an array and everything else from a map;
// it reserves 0–999 for itself, uses 1001 upwards for LCM layers it numbers on
// registration and 1010 for one of its own, and leaves 1000–1999 to "common
// application-specific types". 1791 (the RoCEv2 port is 4791) is in that array-served
// range and clear of gopacket's own numbers.
var LayerTypeBTH = gopacket.RegisterLayerType(1791, gopacket.LayerTypeMetadata{
	Name: "RoCEv2", Decoder: gopacket.DecodeFunc(decodeBTH)})

func init() {
	gplayers.RegisterUDPPortLayerType(roce.UDPPort, LayerTypeBTH)
}

// BTH is the gopacket layer of a RoCEv2 transport packet: the BTH, the extension
// headers, the payload (Payload, without pad), the pad and the ICRC, as views into the
// decoded bytes. It implements gopacket.DecodingLayer and gopacket.SerializableLayer.
type BTH struct {
	roce.TransportPacket
	contents []byte // BTH and extension headers
}

// LayerType returns LayerTypeBTH.
func (l *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// LayerContents returns the BTH and the extension headers.
func (l *BTH) LayerContents() []byte { return l.contents }

// LayerPayload returns the message payload, pad excluded.
func (l *BTH) LayerPayload() []byte { return l.Payload }

// CanDecode returns LayerTypeBTH.
func (l *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns gopacket.LayerTypePayload: the message follows.
func (l *BTH) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data, a UDP payload, keeping views into it. It allocates
// nothing unless data is malformed (the error is a *roce.DecodeError).
func (l *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := l.TransportPacket.Decode(data); err != nil {
		l.contents = nil
		return err
	}
	l.contents = data[:l.HeaderLen()]
	return nil
}

// SerializeTo writes the BTH and extension headers in front of the payload already in
// b, and the pad and the ICRC after it, as the views hold them. The ICRC cannot be
// computed here: it covers the IP header, which is serialized after this layer
// (roce.Builder computes it). With opts.FixLengths the BTH pad count is set from the
// payload in b and the pad is zeros.
func (l *BTH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	pad := len(l.Pad)
	if opts.FixLengths {
		pad = -len(b.Bytes()) & 3
		l.BTH.SetPadCnt(uint8(pad))
	}
	tail, err := b.AppendBytes(pad + roce.ICRCSize)
	if err != nil {
		return err
	}
	if opts.FixLengths {
		clear(tail[:pad])
	} else {
		copy(tail, l.Pad)
	}
	if len(l.ICRC) == roce.ICRCSize {
		copy(tail[pad:], l.ICRC)
	} else {
		clear(tail[pad:]) // none given: zeros, for a builder to fill
	}
	head, err := b.PrependBytes(len(l.contents))
	if err != nil {
		return err
	}
	copy(head, l.contents)
	return nil
}

// decodeBTH is the gopacket.Decoder of LayerTypeBTH, for gopacket.NewPacket.
func decodeBTH(data []byte, pb gopacket.PacketBuilder) error {
	l := &BTH{}
	if err := l.DecodeFromBytes(data, pb); err != nil {
		return err
	}
	pb.AddLayer(l)
	return pb.NextDecoder(l.NextLayerType())
}
