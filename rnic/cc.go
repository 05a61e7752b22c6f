package rnic

import (
	"math"
	"time"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// Mode is a congestion-control mode of the draft (draft-miao-tsv-hpcc) or a baseline.
type Mode string

// The modes.
const (
	// ModeNone sends at line rate without a window.
	ModeNone Mode = "none"
	// ModeHPCC is the basic sender-based algorithm: every data packet requests
	// telemetry and asks for an ACK, every ACK echoes the hops, every ACK reacts.
	ModeHPCC Mode = "per-ack"
	// ModeHPCCProbe is the reference RoCEv2 implementation: data packets carry no
	// telemetry; one telemetry-request probe per base RTT per flow while data is in
	// flight, answered by a telemetry response with the most loaded hop.
	ModeHPCCProbe Mode = "probe"
	// ModeRxHPCC is receiver-based: data packets carry telemetry, the receiver runs the
	// window computation and feeds W back once per base RTT.
	ModeRxHPCC Mode = "rx"
	// ModeHPCCEveryN is sender-based with telemetry (and an ACK) on every Nth data
	// packet only.
	ModeHPCCEveryN Mode = "every-n"
	// ModeDCQCN is DCQCN: ECN-capable data, CNPs from the receiver, rate from the
	// reaction point.
	ModeDCQCN Mode = "dcqcn"
)

// Modes lists every mode, in documentation order.
var Modes = []Mode{ModeHPCC, ModeHPCCProbe, ModeRxHPCC, ModeHPCCEveryN, ModeDCQCN, ModeNone}

// CC configures congestion control, per device or per QP.
type CC struct {
	Mode Mode
	// Telemetry is the lab's telemetry format (HPCC modes); a device's format applies
	// to all its QPs.
	Telemetry telemetry.Format
	// HPCC parameterizes the HPCC modes. LineRate 0 means the port's rate.
	HPCC hpcc.Params
	// EveryN is N of ModeHPCCEveryN; 0 means 4.
	EveryN int
	// DCQCN parameterizes the reaction point; LineRate 0 means the port's rate.
	DCQCN hpcc.DCQCNParams
	// CNPInterval is the notification point's minimum time between CNPs of a flow.
	CNPInterval time.Duration
	// AckEvery, if positive, has a QP ask for an ACK every AckEvery request packets
	// (qp.Config.AckReqEvery) whatever the mode: the HPCC simulator's DCQCN acks
	// every packet (experiment's ns3 preset). 0 is the mode's own (ackReqEvery).
	AckEvery int
}

func (c *CC) hpccMode() bool {
	switch c.Mode {
	case ModeHPCC, ModeHPCCProbe, ModeRxHPCC, ModeHPCCEveryN:
		return true
	}
	return false
}

func (c *CC) check() error {
	if c.AckEvery < 0 {
		return errorf(ErrInvalidArgument, "congestion control: an ACK every %d packets: want 0 (the mode's) or more", c.AckEvery)
	}
	switch c.Mode {
	case "", ModeNone, ModeDCQCN:
		return nil
	case ModeHPCC, ModeHPCCProbe, ModeRxHPCC, ModeHPCCEveryN:
		if c.Telemetry == "" {
			return errorf(ErrInvalidArgument, "congestion control %s needs a telemetry format", c.Mode)
		}
		return nil
	}
	return errorf(ErrInvalidArgument, "congestion control mode %q: want one of %v", c.Mode, Modes)
}

// flowCC is one QP's congestion-control state: the sender's rate and window and,
// for the peer's flow into this QP, the receiver's duties.
type flowCC struct {
	mode    Mode
	rate    float64 // pacing rate in bit/s; +Inf: unpaced
	window  float64 // bytes in flight allowed; +Inf: none
	baseRTT int64   // ns

	sender *hpcc.Sender
	prober *hpcc.Prober
	rp     *hpcc.ReactionPoint

	// Receiver side.
	rxHPCC *hpcc.Receiver
	np     hpcc.NotificationPoint
	// The stacks (4 KB each) are allocated by the first packet that needs them: a
	// flow's sender needs neither, and most flows are short.
	echo     *telemetry.Stack // hops to echo in the next ACK (ModeHPCC, ModeHPCCEveryN)
	hasEcho  bool
	prevReq  *telemetry.Stack // the previous probe's hops, for the response's inflight
	hasPrev  bool
	probeSeq uint32
	rxSeq    uint32

	sentBytes uint64 // request payload bytes sent: NewAck's sndNxt
	dataPkts  uint64 // data packets sent: which carry telemetry in ModeHPCCEveryN
	everyN    uint64
	hops      []hpcc.Hop // scratch
}

func newFlowCC(c CC, lineRate float64) (*flowCC, error) {
	f := &flowCC{mode: c.Mode, rate: math.Inf(1), window: math.Inf(1)}
	if f.mode == "" {
		f.mode = ModeNone
	}
	p := c.HPCC
	if p.LineRate == 0 {
		p.LineRate = lineRate
	}
	f.baseRTT = p.BaseRTT.Nanoseconds()
	var err error
	switch f.mode {
	case ModeHPCC, ModeHPCCEveryN:
		f.sender, err = hpcc.NewSender(p)
		f.everyN = uint64(max(c.EveryN, 1))
		if f.mode == ModeHPCCEveryN && c.EveryN == 0 {
			f.everyN = 4
		}
		if f.mode == ModeHPCC {
			f.everyN = 1
		}
	case ModeHPCCProbe:
		f.prober, err = hpcc.NewProber(p)
	case ModeRxHPCC:
		f.rxHPCC, err = hpcc.NewReceiver(p)
	case ModeDCQCN:
		dp := c.DCQCN
		if dp.LineRate == 0 {
			dp = hpcc.DCQCNParamsFor(lineRate)
		}
		f.rp, err = hpcc.NewReactionPoint(dp)
		f.np.Interval = c.CNPInterval
	}
	if err != nil {
		return nil, errorf(ErrInvalidArgument, "congestion control %s: %v", f.mode, err)
	}
	if c.hpccMode() {
		// Every HPCC variant starts at W_init = line rate × T, paced at W/T.
		st := f.state()
		f.window, f.rate = st.W, st.Rate
	}
	return f, nil
}

// state returns the HPCC sender state of a flow that has one.
func (f *flowCC) state() hpcc.State {
	switch {
	case f.sender != nil:
		return f.sender.State()
	case f.prober != nil:
		return f.prober.State()
	case f.rxHPCC != nil:
		return f.rxHPCC.State()
	}
	return hpcc.State{}
}

// apply adopts an HPCC update.
func (f *flowCC) apply(st hpcc.State) {
	f.window, f.rate = st.W, st.Rate
}

// applyWindow adopts a window the receiver fed back (Rx-HPCC): R = W/T.
func (f *flowCC) applyWindow(w float64) {
	f.window = w
	f.rate = w * 8e9 / float64(f.baseRTT)
}

// telemetryOnNext reports whether the next data packet requests telemetry.
func (f *flowCC) telemetryOnNext() bool {
	switch f.mode {
	case ModeHPCC, ModeRxHPCC:
		return true
	case ModeHPCCEveryN:
		return f.dataPkts%f.everyN == 0
	}
	return false
}

// ackReqEvery is the qp.Config.AckReqEvery of a QP under c: HPCC flows ask for an ACK
// with every request packet, since a window of a few packets needs every ACK and the
// per-ACK modes get their telemetry back in them (package qp otherwise asks every 64
// packets). DCQCN and none keep qp's default. CC.AckEvery overrides both.
func ackReqEvery(c *CC) int {
	if c.AckEvery > 0 {
		return c.AckEvery
	}
	if c.hpccMode() {
		return 1
	}
	return 0
}

// currentRate returns the pacing rate at now.
func (f *flowCC) currentRate(now int64) float64 {
	if f.rp != nil {
		f.rp.Advance(now)
		return f.rp.Rate()
	}
	return f.rate
}
