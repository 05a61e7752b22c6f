// Package telemetrytest builds the RoCEv2 frames and hops that the telemetry codecs'
// tests, fuzz seeds and conformance suites share.
package telemetrytest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"reflect"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// BufSize is the buffer behind every frame: room for any telemetry stack.
const BufSize = 4096

// Builder returns the description of an RC RDMA WRITE Only packet of 40 payload bytes
// between the rxe captures' hosts, over IPv4 or IPv6.
func Builder(ipv6 bool) *roce.Builder {
	b := &roce.Builder{
		DstMAC: [6]byte{0x52, 0x54, 0x00, 0x00, 0x00, 0x02}, SrcMAC: [6]byte{0x52, 0x54, 0x00, 0x00, 0x00, 0x01},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		DSCP: 26, ECN: 2, SrcPort: 0xC123, IPID: 0x1234,
		BTH:  roce.BTHFields{Opcode: roce.OpRCWriteOnly, PKey: 0xFFFF, DestQP: 0x11, PSN: 0x123456, AckReq: true},
		RETH: roce.RETHFields{VA: 0x7F0000001000, RKey: 0x1234, DMALen: 40},
	}
	if ipv6 {
		b.Src, b.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
		b.FlowLabel = 0xABCDE
	}
	for i := range 40 {
		b.Payload = append(b.Payload, byte(i))
	}
	return b
}

// Frame builds b into a fresh BufSize buffer and returns the frame, whose capacity
// leaves room for telemetry. It panics on a bad description: tests pass fixed ones.
func Frame(b *roce.Builder) []byte {
	buf := make([]byte, BufSize)
	n, err := b.Build(buf)
	if err != nil {
		panic(err)
	}
	return buf[:n]
}

// Tagged inserts VLAN tags with the control information tcis, outermost first, after
// frame's MAC addresses, in place (frame's capacity must allow): the innermost is an
// 802.1Q customer tag (0x8100), the ones outside it 802.1ad service tags (0x88A8), as
// a QinQ provider network stacks them.
func Tagged(frame []byte, tcis ...uint16) []byte {
	for i := len(tcis) - 1; i >= 0; i-- {
		tpid := uint16(roce.EtherTypeVLAN)
		if i < len(tcis)-1 {
			tpid = roce.EtherTypeQinQ
		}
		var err error
		if frame, err = telemetry.Open(frame, 12, roce.VLANTagSize); err != nil {
			panic(err)
		}
		binary.BigEndian.PutUint16(frame[12:], tpid)
		binary.BigEndian.PutUint16(frame[14:], tcis[i])
	}
	return frame
}

// RoCEFrame is Frame(Builder(ipv6)).
func RoCEFrame(ipv6 bool) []byte { return Frame(Builder(ipv6)) }

// Hop returns a distinct, fully populated hop for switch i (1-based), with values
// every format can carry exactly (rates the HPCC codes know, times below 2^24 ns
// for the compact format's window, ports below 2^16).
func Hop(i int) telemetry.Hop {
	u := uint64(i)
	return telemetry.Hop{
		Hop: hpcc.Hop{
			TS: 1_000_000 + 1000*u, QLen: 80 * 1000 * u, TxBytes: 128 * 100_000 * u,
			Rate: 100e9, SwitchID: uint32(0x100 + i), PortID: uint32(10 + i),
		},
		IngressPort: uint32(20 + i), IngressTS: 1_000_000 + 1000*u - 500, HopLatency: 500,
		QueueID: uint8(i), TTL: uint8(64 - i),
	}
}

// Valid reports whether frame decodes as RoCEv2 with a correct ICRC.
func Valid(frame []byte) error {
	var p roce.Packet
	if err := p.Decode(frame); err != nil {
		return err
	}
	return p.VerifyICRC()
}

// DecodeFunc decodes a frame's telemetry into a stack (a codec's Decode without its
// format-specific header).
type DecodeFunc func(frame []byte, st *telemetry.Stack) error

// RoundTrip requests telemetry on a RoCEv2 frame, pushes Hop(1..n) through c,
// decodes, checks every hop with check (hops[i] is Hop(i+1)), strips, and checks that
// the original frame is back byte for byte with a valid ICRC. It returns the first
// discrepancy.
func RoundTrip(c telemetry.Codec, decode DecodeFunc, ipv6 bool, n int, check func(got, want *telemetry.Hop) error) error {
	orig := RoCEFrame(ipv6)
	keep := append([]byte(nil), orig...)
	f, err := c.Request(orig)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	for i := 1; i <= n; i++ {
		h := Hop(i)
		var st telemetry.Status
		if f, st, err = c.Push(f, &h); err != nil || st != telemetry.Pushed {
			return fmt.Errorf("push hop %d: %v %v", i, st, err)
		}
	}
	var st telemetry.Stack
	if err := decode(f, &st); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if st.N != n {
		return fmt.Errorf("decoded %d hops, pushed %d", st.N, n)
	}
	for i := range n {
		want := Hop(i + 1)
		if err := check(&st.Hops[i], &want); err != nil {
			return fmt.Errorf("hop %d: %w", i+1, err)
		}
	}
	if f, err = c.Strip(f); err != nil {
		return fmt.Errorf("strip: %w", err)
	}
	if !bytes.Equal(f, keep) {
		return fmt.Errorf("strip did not restore the frame:\n got %x\nwant %x", f, keep)
	}
	if err := Valid(f); err != nil {
		return fmt.Errorf("stripped frame: %w", err)
	}
	return nil
}

// CheckFields compares the fields got carries (got.Has) with want.
func CheckFields(got, want *telemetry.Hop) error {
	type field struct {
		f         telemetry.Field
		name      string
		got, want uint64
	}
	for _, x := range []field{
		{telemetry.FieldSwitchID, "switch_id", uint64(got.SwitchID), uint64(want.SwitchID)},
		{telemetry.FieldIngressPort, "ingress_port", uint64(got.IngressPort), uint64(want.IngressPort)},
		{telemetry.FieldEgressPort, "egress_port", uint64(got.PortID), uint64(want.PortID)},
		{telemetry.FieldTS, "ts_ns", got.TS, want.TS},
		{telemetry.FieldIngressTS, "ingress_ts_ns", got.IngressTS, want.IngressTS},
		{telemetry.FieldQLen, "qlen_bytes", got.QLen, want.QLen},
		{telemetry.FieldTxBytes, "tx_bytes", got.TxBytes, want.TxBytes},
		{telemetry.FieldRate, "bw_bps", got.Rate, want.Rate},
		{telemetry.FieldHopLatency, "hop_latency_ns", uint64(got.HopLatency), uint64(want.HopLatency)},
		{telemetry.FieldQueueID, "queue_id", uint64(got.QueueID), uint64(want.QueueID)},
		{telemetry.FieldTTL, "ttl", uint64(got.TTL), uint64(want.TTL)},
	} {
		if got.Has&x.f != 0 && x.got != x.want {
			return fmt.Errorf("%s = %d, want %d", x.name, x.got, x.want)
		}
	}
	return nil
}

// Tailroom is the spare capacity CheckPush gives a frame: a switch's frames have
// fabric/link.Tailroom bytes after them (fabric/stamp's tests check the two agree).
const Tailroom = 256

// CheckPush stamps Hop(1) into a copy of frame with Tailroom bytes of spare capacity,
// as a switch port does with whatever frame a host sent, and returns how the push
// broke the Codec contract, if it did: an error other than ErrNoTelemetry,
// ErrUnsupported or ErrMalformed, a failed push that changed the frame, or a pushed
// hop that decode and Strip then refuse; for a codec that edits in place
// (telemetry.InPlace), PushWith on the located frame giving other bytes, status, error
// or hop TTL than Push. (A panic fails the caller by itself.) The codecs' FuzzPush
// targets run it on arbitrary input.
func CheckPush(c telemetry.Codec, decode DecodeFunc, frame []byte) error {
	buf := make([]byte, len(frame), len(frame)+Tailroom)
	copy(buf, frame)
	h := Hop(1)
	l, lerr := telemetry.Locate(frame)
	if lerr == nil {
		h.TTL = l.TTL(frame) // as PushWith sets it
	}
	out, st, err := c.Push(buf, &h)
	if ip, ok := c.(telemetry.InPlace); ok && lerr == nil {
		buf := make([]byte, len(frame), len(frame)+Tailroom)
		copy(buf, frame)
		with := Hop(1)
		wout, wst, werr := ip.PushWith(buf, l, &with, telemetry.Open)
		switch {
		case (werr == nil) != (err == nil) || wst != st || !bytes.Equal(wout, out):
			return fmt.Errorf("PushWith gave %d bytes, %v, %v; Push %d bytes, %v, %v", len(wout), wst, werr, len(out), st, err)
		case werr == nil && wst == telemetry.Pushed && with.TTL != h.TTL:
			return fmt.Errorf("PushWith took TTL %d, the frame has %d", with.TTL, h.TTL)
		}
	}
	if err != nil {
		if !errors.Is(err, telemetry.ErrNoTelemetry) && !errors.Is(err, telemetry.ErrUnsupported) && !errors.Is(err, telemetry.ErrMalformed) {
			return fmt.Errorf("push: unexpected error %w", err)
		}
		if !bytes.Equal(out, frame) {
			return fmt.Errorf("push failed (%v) but changed the frame", err)
		}
		return nil
	}
	if st != telemetry.Pushed && st != telemetry.Wrapped {
		return nil
	}
	var s telemetry.Stack
	if err := decode(out, &s); err != nil || s.N == 0 {
		return fmt.Errorf("pushed (%v), then decode found %d hops: %v", st, s.N, err)
	}
	if _, err := c.Strip(out); err != nil && !errors.Is(err, telemetry.ErrUnsupported) {
		return fmt.Errorf("pushed (%v), then strip: %w", st, err)
	}
	return nil
}

// DecodeStripper is a codec's DecodeStripIn: decode then strip in place, on a frame
// whose headers l locates.
type DecodeStripper func(frame []byte, l roce.Layout, st *telemetry.Stack, close telemetry.Closer) ([]byte, error)

// CheckDecodeStripIn returns how decodeStripIn, on frame as roce.Locate locates it,
// departs from decode then c.Strip: another error, a frame changed by a failure,
// other bytes left, or another stack decoded. A frame that does not locate is not
// checked. The codecs' FuzzDecodeStripIn targets run it on arbitrary input.
func CheckDecodeStripIn(c telemetry.Codec, decode DecodeFunc, decodeStripIn DecodeStripper, frame []byte) error {
	l, err := roce.Locate(frame)
	if err != nil {
		return nil
	}
	var want, got telemetry.Stack
	derr := decode(frame, &want)
	stripped, serr := c.Strip(bytes.Clone(frame))
	in := bytes.Clone(frame)
	out, err := decodeStripIn(in, l, &got, telemetry.Close)
	switch {
	case (err == nil) != (derr == nil && serr == nil):
		return fmt.Errorf("DecodeStripIn: %v; Decode: %v, Strip: %v", err, derr, serr)
	case err != nil:
		if !bytes.Equal(in, frame) {
			return errors.New("DecodeStripIn failed and changed the frame")
		}
		return nil
	case !bytes.Equal(out, stripped):
		return fmt.Errorf("DecodeStripIn left %x, Strip %x", out, stripped)
	case got.N != want.N || got.Format != want.Format || got.Truncated != want.Truncated:
		return fmt.Errorf("DecodeStripIn decoded %d hops (%s), Decode %d (%s)", got.N, got.Format, want.N, want.Format)
	}
	for i, hop := range got.HopList() {
		if !reflect.DeepEqual(hop, want.Hops[i]) {
			return fmt.Errorf("hop %d: DecodeStripIn %+v, Decode %+v", i, hop, want.Hops[i])
		}
	}
	return nil
}

// DetachingCodec is a codec whose block can travel beside the frame.
type DetachingCodec interface {
	telemetry.Codec
	telemetry.Detacher
}

// CheckDetached holds the detached block to the block in the frame: frame requested,
// pushed hops (each with a lab's 10 Gb/s rate where labRate[i%len(labRate)]), decoded
// and stripped both ways, room for the block as link.Frame.Detached gives it
// (detachedMax bytes), must give the same statuses and errors, the block the same
// bytes the frame held between its UDP header and its BTH, the decode the same hops
// and the strip the same frame. A frame Request refuses must be refused by
// RequestDetached too.
func CheckDetached(c DetachingCodec, decode DecodeFunc, frame []byte, hops []telemetry.Hop, detachedMax int) error {
	l, err := telemetry.Locate(frame)
	if err != nil {
		return nil
	}
	room := len(frame) + detachedMax
	inFrame, rerr := c.Request(append(make([]byte, 0, room), frame...))
	beside := bytes.Clone(frame)
	blk, derr := c.RequestDetached(beside, l, make([]byte, 0, detachedMax))
	if (rerr == nil) != (derr == nil) {
		return fmt.Errorf("in the frame, Request: %v; beside it, RequestDetached: %v", rerr, derr)
	}
	if rerr != nil {
		if !bytes.Equal(beside, frame) {
			return errors.New("RequestDetached failed and changed the frame")
		}
		return nil
	}
	ip := l.End - l.L3 // the IP packet without the block
	for i := range hops {
		h1, h2 := hops[i], hops[i]
		var st1, st2 telemetry.Status
		var err1, err2 error
		inFrame, st1, err1 = c.Push(inFrame, &h1)
		blk, st2, err2 = c.PushDetached(blk, &h2, ip+len(blk))
		if st1 != st2 || (err1 == nil) != (err2 == nil) {
			return fmt.Errorf("hop %d: Push %v %v; PushDetached %v %v", i, st1, err1, st2, err2)
		}
	}
	fl, err := telemetry.Locate(inFrame)
	if err != nil {
		return fmt.Errorf("the pushed frame does not locate: %v", err)
	}
	if off := fl.L4 + roce.UDPSize; off+len(blk) > len(inFrame) || !bytes.Equal(inFrame[off:off+len(blk)], blk) {
		return fmt.Errorf("block %x, the frame's %x", blk, inFrame[off:min(len(inFrame), off+len(blk))])
	}
	if len(beside)+len(blk) != len(inFrame) {
		return fmt.Errorf("frame %d + block %d bytes, the frame with it %d", len(beside), len(blk), len(inFrame))
	}
	var want, got telemetry.Stack
	werr := decode(inFrame, &want)
	gerr := c.DecodeDetached(blk, &got)
	if (werr == nil) != (gerr == nil) {
		return fmt.Errorf("in the frame, Decode: %v; beside it, DecodeDetached: %v", werr, gerr)
	}
	if got.N != want.N || got.Format != want.Format || got.Truncated != want.Truncated {
		return fmt.Errorf("DecodeDetached decoded %d hops (%s), Decode %d (%s)", got.N, got.Format, want.N, want.Format)
	}
	for i, hop := range got.HopList() {
		if !reflect.DeepEqual(hop, want.Hops[i]) {
			return fmt.Errorf("hop %d: DecodeDetached %+v, Decode %+v", i, hop, want.Hops[i])
		}
	}
	stripped, serr := c.Strip(inFrame)
	if err := c.StripDetached(beside, l, blk); (err == nil) != (serr == nil) {
		return fmt.Errorf("in the frame, Strip: %v; beside it, StripDetached: %v", serr, err)
	}
	if serr == nil && !bytes.Equal(beside, stripped) {
		return fmt.Errorf("StripDetached left %x, Strip %x", beside, stripped)
	}
	return nil
}
