// Package decode turns captured frames into the per-frame records `rocelab decode`
// prints: RoCEv2 headers, ICRC check and (with roce/telemetry) in-band telemetry, as
// JSON objects whose keys are a stable contract for scripts.
package decode

import (
	"errors"
	"fmt"

	"github.com/gopacket/gopacket/layers"

	"github.com/rocelab/rocelab/roce"
)

// Record is one frame's decoding. Pointer fields are nil, and omitted from JSON, when the
// frame lacks that header. Integers are JSON numbers and flags booleans.
type Record struct {
	Frame        int              `json:"frame"` // 1-based index in the capture
	RoCE         bool             `json:"roce"`  // UDP destination port 4791
	IP           *IPRecord        `json:"ip,omitempty"`
	UDP          *UDPRecord       `json:"udp,omitempty"`
	BTH          *BTHRecord       `json:"bth,omitempty"`
	RETH         *RETHRecord      `json:"reth,omitempty"`
	AETH         *AETHRecord      `json:"aeth,omitempty"`
	AtomicETH    *AtomicETHRecord `json:"atomic_eth,omitempty"`
	AtomicAckETH *AtomicAckRecord `json:"atomic_ack_eth,omitempty"`
	ImmDt        *uint32          `json:"immdt,omitempty"`
	IETH         *uint32          `json:"ieth,omitempty"`
	DETH         *DETHRecord      `json:"deth,omitempty"`
	XRCETH       *uint32          `json:"xrceth_srqn,omitempty"` // the target XRC SRQ number
	PayloadLen   *int             `json:"payload_len,omitempty"`
	ICRC         *uint32          `json:"icrc,omitempty"` // the CRC value (read little-endian, as transmitted)
	ICRCOK       *bool            `json:"icrc_ok,omitempty"`
	Telemetry    any              `json:"telemetry,omitempty"`
	Error        string           `json:"error,omitempty"`     // why a frame that claims RoCEv2 does not parse
	Note         string           `json:"note,omitempty"`      // a telemetry signal not honoured, a frame not decoded
	LinkType     string           `json:"link_type,omitempty"` // set only for frames that are not Ethernet (not decoded)
}

// IPRecord holds the IP header fields.
type IPRecord struct {
	Version int    `json:"version"`
	Src     string `json:"src"`
	Dst     string `json:"dst"`
	DSCP    uint8  `json:"dscp"`
	ECN     uint8  `json:"ecn"`
	TTL     uint8  `json:"ttl"` // IPv6: hop limit
}

// UDPRecord holds the UDP ports.
type UDPRecord struct {
	Src uint16 `json:"src"`
	Dst uint16 `json:"dst"`
}

// BTHRecord holds the Base Transport Header.
type BTHRecord struct {
	Opcode     uint8  `json:"opcode"`
	OpcodeName string `json:"opcode_name"`
	SE         bool   `json:"se"`
	MigReq     bool   `json:"migreq"`
	Pad        uint8  `json:"pad"`
	TVer       uint8  `json:"tver"`
	PKey       uint16 `json:"pkey"`
	FECN       bool   `json:"fecn"`
	BECN       bool   `json:"becn"`
	DestQP     uint32 `json:"dest_qp"`
	AckReq     bool   `json:"ack_req"`
	PSN        uint32 `json:"psn"`
}

// RETHRecord holds an RDMA Extended Transport Header.
type RETHRecord struct {
	VA     uint64 `json:"va"`
	RKey   uint32 `json:"rkey"`
	DMALen uint32 `json:"dma_len"`
}

// AETHRecord holds an ACK Extended Transport Header.
type AETHRecord struct {
	Syndrome uint8  `json:"syndrome"`
	MSN      uint32 `json:"msn"`
	Type     string `json:"type"` // "ACK", "RNR_NAK" or "NAK"
	Value    uint8  `json:"value"`
}

// AtomicETHRecord holds an Atomic Extended Transport Header.
type AtomicETHRecord struct {
	VA      uint64 `json:"va"`
	RKey    uint32 `json:"rkey"`
	SwapAdd uint64 `json:"swap_add"`
	Compare uint64 `json:"compare"`
}

// AtomicAckRecord holds an Atomic Acknowledge Extended Transport Header.
type AtomicAckRecord struct {
	Orig uint64 `json:"orig"`
}

// DETHRecord holds a Datagram Extended Transport Header.
type DETHRecord struct {
	QKey  uint32 `json:"qkey"`
	SrcQP uint32 `json:"src_qp"`
}

// Decoder decodes frames into Records. It keeps its parse state between calls, so use
// one Decoder per goroutine.
type Decoder struct {
	pkt     roce.Packet
	tel     telemetryState
	signals *Signals
}

// SetSignals sets the telemetry signalling values (DefaultSignals until set). Call it
// before the first Decode.
func (d *Decoder) SetSignals(s Signals) { d.signals = &s }

// Packet returns the RoCEv2 parse of the last frame Decode saw (valid when the record's
// BTH is set), for callers that want the views rather than the record.
func (d *Decoder) Packet() *roce.Packet { return &d.pkt }

// DecodeFrame decodes one packet of a capture: an Ethernet frame with Decode; a
// packet of another link type gets a record of its own (frame, link_type, note), so
// that no packet goes unreported and frame numbers stay Wireshark's.
func (d *Decoder) DecodeFrame(f *Frame) Record {
	if f.LinkType != layers.LinkTypeEthernet {
		return Record{Frame: f.Index, LinkType: f.LinkType.String(),
			Note: fmt.Sprintf("interface %d has link type %v, not Ethernet: not decoded", f.Info.InterfaceIndex, f.LinkType)}
	}
	return d.Decode(f.Index, f.Data)
}

// Decode decodes one Ethernet frame; index is its 1-based position in the capture.
func (d *Decoder) Decode(index int, frame []byte) Record {
	r := Record{Frame: index}
	if d.signals == nil {
		d.SetSignals(DefaultSignals())
	}
	d.tel.init(*d.signals)
	t, inner, note := d.tel.decodeTelemetry(frame)
	if t != nil {
		r.Telemetry, frame = t, inner
	}
	r.Note = note
	p := &d.pkt
	err := p.Decode(frame)
	r.IP = ipRecord(p)
	if p.UDP != nil {
		r.UDP = &UDPRecord{Src: p.UDP.SrcPort(), Dst: p.UDP.DstPort()}
		r.RoCE = p.UDP.DstPort() == roce.UDPPort
	}
	if errors.Is(err, roce.ErrNotRoCE) {
		return r
	}
	if err != nil {
		// Malformed: RoCE stays true only if the frame got as far as UDP port 4791.
		r.Error = err.Error()
		return r
	}
	r.RoCE = true
	fillTransport(&r, p)
	n := len(p.Payload)
	r.PayloadLen = &n
	crc, ok := roce.ReadICRC(p.ICRC), p.ICRCOK()
	r.ICRC, r.ICRCOK = &crc, &ok
	return r
}

func ipRecord(p *roce.Packet) *IPRecord {
	switch {
	case p.IPv4 != nil:
		h := p.IPv4
		return &IPRecord{Version: 4, Src: h.Src().String(), Dst: h.Dst().String(), DSCP: h.DSCP(), ECN: h.ECN(), TTL: h.TTL()}
	case p.IPv6 != nil:
		h := p.IPv6
		return &IPRecord{Version: 6, Src: h.Src().String(), Dst: h.Dst().String(), DSCP: h.DSCP(), ECN: h.ECN(), TTL: h.HopLimit()}
	}
	return nil
}

func fillTransport(r *Record, p *roce.Packet) {
	b := p.BTH
	r.BTH = &BTHRecord{
		Opcode: uint8(b.Opcode()), OpcodeName: b.Opcode().String(), SE: b.SE(), MigReq: b.MigReq(),
		Pad: b.PadCnt(), TVer: b.TVer(), PKey: uint16(b.PKey()), FECN: b.FECN(), BECN: b.BECN(),
		DestQP: uint32(b.DestQP()), AckReq: b.AckReq(), PSN: uint32(b.PSN()),
	}
	if h := p.RETH; h != nil {
		r.RETH = &RETHRecord{VA: h.VA(), RKey: h.RKey(), DMALen: h.DMALen()}
	}
	if h := p.AETH; h != nil {
		s := h.Syndrome()
		r.AETH = &AETHRecord{Syndrome: uint8(s), MSN: h.MSN(), Type: s.Type().String(), Value: s.Value()}
	}
	if h := p.AtomicETH; h != nil {
		r.AtomicETH = &AtomicETHRecord{VA: h.VA(), RKey: h.RKey(), SwapAdd: h.SwapAdd(), Compare: h.Compare()}
	}
	if h := p.AtomicAck; h != nil {
		r.AtomicAckETH = &AtomicAckRecord{Orig: h.Orig()}
	}
	if h := p.ImmDt; h != nil {
		v := h.Imm()
		r.ImmDt = &v
	}
	if h := p.IETH; h != nil {
		v := h.RKey()
		r.IETH = &v
	}
	if h := p.XRCETH; h != nil {
		v := h.SRQN()
		r.XRCETH = &v
	}
	if h := p.DETH; h != nil {
		r.DETH = &DETHRecord{QKey: h.QKey(), SrcQP: uint32(h.SrcQP())}
	}
}
