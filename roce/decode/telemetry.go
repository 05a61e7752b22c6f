package decode

import (
	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/hpcchop"
	"github.com/rocelab/rocelab/roce/telemetry/ifa"
	"github.com/rocelab/rocelab/roce/telemetry/intmd"
	"github.com/rocelab/rocelab/roce/telemetry/ioam"
)

// Telemetry detection for `rocelab decode`. Each format is recognised by its own
// signal with the codecs' default configuration — INT over UDP by DSCP 0x17, the
// HPCC block by DSCP 0x19, IFA by IP protocol 253, IOAM by an IPv6 Hop-by-Hop option
// 0x31 — whatever the packet carries after it. The record's other keys describe the
// packet with the telemetry stripped, as the receiving NIC sees it, so the RoCEv2
// fields and the ICRC check apply to the original packet.

// telemetryState holds the codecs and buffers reused across frames.
type telemetryState struct {
	intmd   *intmd.Codec
	hpcc    *hpcchop.Codec
	ifa     *ifa.Codec
	ioam    *ioam.Codec
	stack   telemetry.Stack
	strip   []byte
	enabled bool
}

func (t *telemetryState) init() {
	if !t.enabled {
		t.intmd, t.hpcc, t.ifa, t.ioam, t.enabled = intmd.New(), hpcchop.New(), ifa.New(), ioam.New(), true
	}
}

// decodeTelemetry returns the telemetry record of frame (nil when it carries none)
// and the frame with the telemetry stripped (frame itself when there is none or it
// cannot be stripped).
func (t *telemetryState) decodeTelemetry(frame []byte) (map[string]any, []byte) {
	t.init()
	st := &t.stack
	var hdr map[string]any
	var codec telemetry.Codec
	if h, err := t.intmd.Decode(frame, st); err == nil {
		hdr, codec = map[string]any{
			"type": h.Type, "npt": h.NPT, "length_words": h.Length, "orig_dscp": h.OrigDSCP, "version": h.Version,
			"d": h.D, "e": h.E, "m": h.M, "hop_ml": h.HopML, "remaining_hop_count": h.RemainingHops,
			"instruction_bitmap": h.Instructions, "domain_id": h.DomainID, "ds_instructions": h.DSInstructions,
			"ds_flags": h.DSFlags,
		}, t.intmd
	} else if h, err := t.hpcc.Decode(frame, st); err == nil {
		hdr, codec = map[string]any{"version": h.Version, "orig_dscp": h.OrigDSCP, "nhop": h.NHop,
			"wrapped": h.NHop > hpcchop.MaxHops, "rate_table": h.RateTable, "error": h.Error}, t.hpcc
	} else if h, err := t.ifa.Decode(frame, st); err == nil {
		hdr, codec = map[string]any{"version": h.Version, "gns": h.GNS, "next_header": h.NextHeader, "flags": h.Flags,
			"mf": h.Flags&ifa.FlagMF != 0, "max_length_words": h.MaxLength, "request_vector": h.RequestVector,
			"action_vector": h.ActionVector, "hop_limit": h.HopLimit, "current_length_words": h.CurrentLength}, t.ifa
	} else if h, err := t.ioam.Decode(frame, st); err == nil {
		hdr, codec = map[string]any{"option_type": h.OptionType, "namespace": h.Namespace, "node_len": h.NodeLen,
			"flags": h.Flags, "overflow": h.Overflow, "remaining_len": h.RemainingLen, "trace_type": h.TraceType,
			"data_len": h.DataLen}, t.ioam
	} else {
		return nil, frame
	}
	hdr["format"] = string(st.Format)
	hops := make([]map[string]any, 0, st.N)
	for i := range st.N {
		hops = append(hops, HopRecord(&st.Hops[i]))
	}
	hdr["hops"] = hops
	if st.Truncated {
		hdr["truncated"] = true
	}
	t.strip = append(t.strip[:0], frame...)
	if stripped, err := codec.Strip(t.strip); err == nil {
		return hdr, stripped
	}
	return hdr, frame
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
	add(telemetry.FieldSwitchID, "switch_id", h.SwitchID)
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
