package decode

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
)

// Telemetry detection for `rocelab decode`. Each format is recognised by its own
// signal — INT over UDP and the HPCC block by a DSCP value, IFA by an IP protocol
// number (Signals sets all three; the codecs' defaults are 0x17, 0x19 and 253), IOAM
// by an IPv6 Hop-by-Hop option 0x31. The record's other keys describe the packet with
// the telemetry stripped, as the receiving NIC sees it, so the RoCEv2 fields and the
// ICRC check apply to the original packet.
//
// A DSCP is no proof: any plain RoCEv2 packet may carry the value (the INT
// specification says as much of DSCP-signalled INT). Telemetry signalled by DSCP is
// therefore accepted only when its headers validate and what is left once it is
// stripped is a RoCEv2 packet (BTH, ICRC) whose ICRC verifies; otherwise the frame is
// decoded as it stands, with a note saying which signal was not honoured and why.

// Signals are the values that mark telemetry which its structure alone cannot
// identify. Labs configure them per topology; decode and conformance take them from
// --int-dscp, --hpcc-dscp and --ifa-protocol. rocelab's own signals, which a lab's
// soft-RNICs send (telemetry.RequestDSCPINT, EchoDSCP, EchoProtocol), are honoured
// besides them.
type Signals struct {
	INTDSCP     uint8 // DSCP of INT over UDP (intmd)
	HPCCDSCP    uint8 // DSCP of the HPCC hop block (hpcchop)
	IFAProtocol uint8 // IP protocol number of IFA
}

// DefaultSignals returns the codecs' defaults.
func DefaultSignals() Signals {
	return Signals{INTDSCP: intmd.DefaultDSCP, HPCCDSCP: hpcchop.DefaultDSCP, IFAProtocol: ifa.DefaultProtocol}
}

// Validate checks that the DSCPs fit their 6 bits.
func (s Signals) Validate() error {
	for _, d := range []struct {
		name string
		v    uint8
	}{{"INT DSCP", s.INTDSCP}, {"HPCC DSCP", s.HPCCDSCP}} {
		if d.v > 63 {
			return fmt.Errorf("decode: %s %d does not fit the 6-bit DSCP field (0-63)", d.name, d.v)
		}
	}
	return nil
}

// telemetryState holds the codecs and buffers reused across frames.
type telemetryState struct {
	// A codec per signal: the Signals' first, then rocelab's own.
	intmd   []*intmd.Codec
	hpcc    []*hpcchop.Codec
	ifa     []*ifa.Codec
	ioam    *ioam.Codec
	stack   telemetry.Stack
	strip   []byte
	inner   roce.Packet
	enabled bool
}

func (t *telemetryState) init(s Signals) {
	if t.enabled {
		return
	}
	t.enabled, t.ioam = true, ioam.New()
	for _, dscp := range distinct(s.INTDSCP, telemetry.RequestDSCPINT, telemetry.EchoDSCP) {
		c := intmd.New()
		c.DSCP = dscp
		t.intmd = append(t.intmd, c)
	}
	for _, dscp := range distinct(s.HPCCDSCP, telemetry.EchoDSCP) {
		c := hpcchop.New()
		c.DSCP = dscp
		t.hpcc = append(t.hpcc, c)
	}
	for _, proto := range distinct(s.IFAProtocol, telemetry.EchoProtocol) {
		c := ifa.New()
		c.Protocol = proto
		t.ifa = append(t.ifa, c)
	}
}

// distinct returns vs without repeats, in order.
func distinct(vs ...uint8) []uint8 {
	var out []uint8
	for _, v := range vs {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// decodeTelemetry returns the telemetry record of frame (nil when it carries none),
// the frame with the telemetry stripped (frame itself when there is none or it cannot
// be stripped) and, when a DSCP signalled telemetry that did not validate, a note
// saying so.
//
// The frame is located once, with roce.Locate (the walk the RoCEv2 decoder, the
// switch and the codecs share), and a codec is asked only when the frame shows its
// signal: a frame that is not IP has no DSCP, protocol or option to show, so it
// carries no telemetry and earns no note.
func (t *telemetryState) decodeTelemetry(frame []byte) (hdr map[string]any, inner []byte, note string) {
	l, _ := roce.Locate(frame)
	if l.IPVersion == 0 {
		return nil, frame, ""
	}
	st := &t.stack
	var codec telemetry.Codec
	// The DSCP-signalled formats: INT, then the HPCC block. rocelab's echo DSCP serves
	// both: the one whose headers validate wins.
	signal, dscp := "", uint8(0)
	for _, c := range t.intmd {
		if !c.Signal().Shown(frame, &l) {
			continue
		}
		h, err := c.Decode(frame, st)
		if errors.Is(err, telemetry.ErrNoTelemetry) {
			continue
		}
		signal, dscp = "INT", c.DSCP
		if err != nil {
			note = dscpNote(signal, dscp, err)
			break
		}
		hdr, codec = map[string]any{
			"type": h.Type, "npt": h.NPT, "length_words": h.Length, "orig_dscp": h.OrigDSCP, "version": h.Version,
			"d": h.D, "e": h.E, "m": h.M, "hop_ml": h.HopML, "remaining_hop_count": h.RemainingHops,
			"instruction_bitmap": h.Instructions, "domain_id": h.DomainID, "ds_instructions": h.DSInstructions,
			"ds_flags": h.DSFlags,
		}, c
		break
	}
	if hdr == nil { // no INT: the HPCC block
		for _, c := range t.hpcc {
			if !c.Signal().Shown(frame, &l) {
				continue
			}
			h, err := c.Decode(frame, st)
			if errors.Is(err, telemetry.ErrNoTelemetry) {
				continue
			}
			signal, dscp = "HPCC", c.DSCP
			if err != nil {
				if note == "" {
					note = dscpNote(signal, dscp, err)
				}
				break
			}
			hdr, codec = map[string]any{"version": h.Version, "orig_dscp": h.OrigDSCP, "nhop": h.NHop,
				"wrapped": h.NHop > hpcchop.MaxHops, "rate_table": h.RateTable, "error": h.Error}, c
			break
		}
	}
	if hdr != nil {
		// Accept only what leaves a RoCEv2 packet whose ICRC verifies.
		stripped, err := codec.Strip(append(t.strip[:0], frame...))
		t.strip = stripped
		if err == nil {
			err = t.inner.Decode(stripped)
		}
		if err == nil {
			err = t.inner.VerifyICRC()
		}
		if err != nil {
			return nil, frame, dscpNote(signal, dscp, fmt.Errorf("the packet without it is no valid RoCEv2: %w", err))
		}
		return t.record(hdr, st), stripped, ""
	}
	// The formats whose signal is unambiguous: IFA's IP protocol, IOAM's option.
	for _, c := range t.ifa {
		if !c.Signal().Shown(frame, &l) {
			continue
		}
		if h, err := c.Decode(frame, st); err == nil {
			hdr, codec = map[string]any{"version": h.Version, "gns": h.GNS, "next_header": h.NextHeader, "flags": h.Flags,
				"mf": h.Flags&ifa.FlagMF != 0, "max_length_words": h.MaxLength, "request_vector": h.RequestVector,
				"action_vector": h.ActionVector, "hop_limit": h.HopLimit, "current_length_words": h.CurrentLength}, c
			break
		}
	}
	if hdr == nil {
		if !t.ioam.Signal().Shown(frame, &l) {
			return nil, frame, note
		}
		h, err := t.ioam.Decode(frame, st)
		if err != nil {
			return nil, frame, note
		}
		hdr, codec = map[string]any{"option_type": h.OptionType, "namespace": h.Namespace, "node_len": h.NodeLen,
			"flags": h.Flags, "overflow": h.Overflow, "remaining_len": h.RemainingLen, "trace_type": h.TraceType,
			"data_len": h.DataLen}, t.ioam
	}
	hdr = t.record(hdr, st)
	t.strip = append(t.strip[:0], frame...)
	if stripped, err := codec.Strip(t.strip); err == nil {
		return hdr, stripped, note
	}
	return hdr, frame, note
}

// dscpNote explains why a DSCP's telemetry signal was not honoured.
func dscpNote(signal string, dscp uint8, err error) string {
	return fmt.Sprintf("DSCP %d signals %s telemetry, but %v: decoded without telemetry", dscp, signal, err)
}

// record completes a format's header record with the format name and the hops.
func (t *telemetryState) record(hdr map[string]any, st *telemetry.Stack) map[string]any {
	hdr["format"] = string(st.Format)
	hops := make([]map[string]any, 0, st.N)
	for i := range st.N {
		hops = append(hops, HopRecord(&st.Hops[i]))
	}
	hdr["hops"] = hops
	if st.Truncated {
		hdr["truncated"] = true
	}
	return hdr
}

// HopRecord returns the JSON object of one hop: the fields the format carried, under
// the names `rocelab decode` documents.
func HopRecord(h *telemetry.Hop) map[string]any {
	m := map[string]any{}
	add := func(f telemetry.Field, key string, v any) {
		if h.Has&f != 0 {
			m[key] = v
		}
	}
	if h.Has&telemetry.FieldWideSwitchID != 0 {
		m["switch_id"] = h.WideSwitchID // IOAM's 56-bit node ID, in full
	} else {
		add(telemetry.FieldSwitchID, "switch_id", h.SwitchID)
	}
	add(telemetry.FieldIngressPort, "ingress_port", h.IngressPort)
	add(telemetry.FieldEgressPort, "egress_port", h.PortID)
	add(telemetry.FieldTS, "ts_ns", h.TS)
	add(telemetry.FieldIngressTS, "ingress_ts_ns", h.IngressTS)
	add(telemetry.FieldQLen, "qlen_bytes", h.QLen)
	add(telemetry.FieldTxBytes, "tx_bytes", h.TxBytes)
	add(telemetry.FieldRate, "bw_bps", h.Rate)
	add(telemetry.FieldHopLatency, "hop_latency_ns", h.HopLatency)
	add(telemetry.FieldQueueID, "queue_id", h.QueueID)
	add(telemetry.FieldBufferOcc, "buffer_occupancy", h.BufferOcc)
	add(telemetry.FieldTTL, "hop_limit", h.TTL)
	add(telemetry.FieldTxUtil, "tx_utilization", h.TxUtil)
	add(telemetry.FieldCongestion, "congestion", h.Congestion)
	add(telemetry.FieldPortSpeed, "port_speed_code", h.PortSpeed)
	add(telemetry.FieldLNS, "lns", h.LNS)
	add(telemetry.FieldChecksum, "checksum_complement", h.Checksum)
	if h.Has&telemetry.FieldOpaque != 0 {
		m["opaque_schema"] = h.OpaqueID
		m["opaque_len"] = len(h.Opaque)
	}
	return m
}
