package hpcc

import (
	"fmt"
	"time"
)

// DCQCNParams configures DCQCN (Zhu et al., SIGCOMM 2015). Rates are bit/s.
//
// Two decrease disciplines are supported. With DecreaseInterval 0 the reaction point
// follows the paper's equations: every CNP cuts at once (RT = RC, RC = RC·(1−α/2),
// α = (1−g)α + g) and α decays as α = (1−g)α after each AlphaInterval without a CNP.
// With DecreaseInterval > 0 it follows the Mellanox-style implementation in the HPCC
// simulator: CNPs only set flags; every AlphaInterval α = (1−g)α + g·[CNP seen], and
// every DecreaseInterval the rate is cut once if a CNP was seen.
type DCQCNParams struct {
	// LineRate is the initial and maximum rate.
	LineRate float64
	// MinRate is the floor of the current rate after a cut.
	MinRate float64
	// G is the α gain g, in (0, 1].
	G float64
	// AlphaInterval is K: the α update (or decay) period.
	AlphaInterval time.Duration
	// DecreaseInterval is the rate-decrease check period; 0 cuts on every CNP.
	DecreaseInterval time.Duration
	// IncreaseTimer is T: a rate-increase event every T after the last cut.
	IncreaseTimer time.Duration
	// ByteCounter is B: a rate-increase event every B bytes sent after the last cut.
	// 0 disables the byte counter (the HPCC simulator has none).
	ByteCounter uint64
	// FastRecovery is F, the number of fast-recovery steps before additive increase.
	FastRecovery int
	// RateAI and RateHAI are the target-rate steps of additive and hyper increase.
	RateAI, RateHAI float64
	// ClampTargetRate makes every cut set RT = RC. When false (the simulator's
	// CLAMP_TARGET_RATE 0) RT is only lowered by a cut that follows an increase event,
	// so back-to-back cuts keep the older, higher target to recover to.
	ClampTargetRate bool
}

// DCQCNSimParams returns the HPCC simulator's "dcqcn" configuration (run.py) for a
// NIC of lineRate bit/s: α update every 1 µs, decrease check every 4 µs, increase
// timer 300 µs, g = 1/256, F = 1, RATE_AI = 5 Mb/s and RATE_HAI = 50 Mb/s per 25 Gb/s of
// line rate, no target clamp, no byte counter, and MIN_RATE 1 Gb/s — at the rates the
// simulator runs (25 Gb/s and up). Below 25 Gb/s the floor scales with the line rate
// as the increase steps do (1 Gb/s per 25 Gb/s): a 1 Gb/s floor on a 1 Gb/s NIC is the
// line rate, and no CNP could slow a sender.
func DCQCNSimParams(lineRate float64) DCQCNParams {
	return DCQCNParams{
		LineRate:         lineRate,
		MinRate:          min(1e9, lineRate/25),
		G:                1.0 / 256,
		AlphaInterval:    time.Microsecond,
		DecreaseInterval: 4 * time.Microsecond,
		IncreaseTimer:    300 * time.Microsecond,
		FastRecovery:     1,
		RateAI:           5e6 * lineRate / 25e9,
		RateHAI:          50e6 * lineRate / 25e9,
	}
}

// DCQCNSimPaperParams returns the HPCC simulator's "dcqcn_paper" configuration: as
// DCQCNSimParams but with the DCQCN paper's timers: α update and decrease check every
// 50 µs and increase timer 55 µs.
func DCQCNSimPaperParams(lineRate float64) DCQCNParams {
	p := DCQCNSimParams(lineRate)
	p.AlphaInterval = 50 * time.Microsecond
	p.DecreaseInterval = 50 * time.Microsecond
	p.IncreaseTimer = 55 * time.Microsecond
	return p
}

// DCQCNLabRate is the line rate below which DCQCNParamsFor uses the DCQCN paper's
// timers: the slowest rate the HPCC simulator's configurations were tuned for.
const DCQCNLabRate = 25e9

// DCQCNParamsFor returns the DCQCN parameters a NIC of lineRate bit/s runs by default:
// the simulator's (DCQCNSimParams) from 25 Gb/s up, and below it, at the rates of a
// real-time lab, the simulator's "dcqcn_paper" timers (DCQCNSimPaperParams). The
// simulator's 1 µs α update and 4 µs decrease check are shorter than one 1 KB frame at
// 1 Gb/s (8.2 µs): a flow sees at most one CNP per frame it sends, so α decays to
// nothing between two CNPs, every cut is a few per cent, and an 8:1 incast at 1 Gb/s
// builds a 2 MB queue. The paper's 50–55 µs periods span several frames there (and
// hold the queue between K_min and K_max at 1 and 10 Gb/s; docs/rnic.md).
func DCQCNParamsFor(lineRate float64) DCQCNParams {
	if lineRate < DCQCNLabRate {
		return DCQCNSimPaperParams(lineRate)
	}
	return DCQCNSimParams(lineRate)
}

func (p DCQCNParams) validate() error {
	switch {
	case !(p.LineRate > 0) || !finite(p.LineRate):
		return fmt.Errorf("hpcc: DCQCN line rate must be positive, got %v", p.LineRate)
	case !(p.MinRate >= 0 && p.MinRate <= p.LineRate):
		return fmt.Errorf("hpcc: DCQCN min rate must be in [0, line rate], got %v", p.MinRate)
	case !(p.G > 0 && p.G <= 1):
		return fmt.Errorf("hpcc: DCQCN g must be in (0, 1], got %v", p.G)
	case p.AlphaInterval <= 0:
		return fmt.Errorf("hpcc: DCQCN alpha interval must be positive, got %v", p.AlphaInterval)
	case p.DecreaseInterval < 0:
		return fmt.Errorf("hpcc: DCQCN decrease interval must be non-negative, got %v", p.DecreaseInterval)
	case p.IncreaseTimer <= 0:
		return fmt.Errorf("hpcc: DCQCN increase timer must be positive, got %v", p.IncreaseTimer)
	case p.FastRecovery < 0:
		return fmt.Errorf("hpcc: DCQCN fast-recovery steps must be non-negative, got %d", p.FastRecovery)
	case !(p.RateAI >= 0) || !(p.RateHAI >= 0):
		return fmt.Errorf("hpcc: DCQCN rate steps must be non-negative, got AI %v HAI %v", p.RateAI, p.RateHAI)
	}
	return nil
}

// never is a deadline that does not fire.
const never = int64(^uint64(0) >> 1)

// ReactionPoint is DCQCN's sender side for one flow: it lowers the current rate RC on
// congestion notifications and recovers towards the target rate RT with fast recovery,
// additive and hyper increase, driven by a timer and a byte counter.
//
// Nothing happens before the first CNP: the flow runs at line rate with α = 1 and no
// timers. The driver calls Advance with the current time before reading Rate, and may
// use NextEvent to schedule its next wake-up. All instants are ns on the caller's clock
// and must not go backwards. A ReactionPoint is not safe for concurrent use.
type ReactionPoint struct {
	p         DCQCNParams
	rc, rt    float64
	alpha     float64
	active    bool // a CNP has been seen: timers run
	cnpAlpha  bool // CNP since the last α update (periodic discipline)
	cnpCut    bool // CNP since the last decrease check (periodic discipline)
	increased bool // an increase event happened since the last cut
	timers    int  // timer expiries since the last cut
	counts    int  // byte-counter expiries since the last cut
	bytes     uint64
	// Deadlines in ns; never when not armed.
	nextAlpha, nextCut, nextInc int64
}

// NewReactionPoint returns a ReactionPoint at line rate.
func NewReactionPoint(p DCQCNParams) (*ReactionPoint, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &ReactionPoint{p: p, rc: p.LineRate, rt: p.LineRate, alpha: 1,
		nextAlpha: never, nextCut: never, nextInc: never}, nil
}

// Rate returns the current sending rate RC in bit/s.
func (r *ReactionPoint) Rate() float64 { return r.rc }

// TargetRate returns the target rate RT in bit/s.
func (r *ReactionPoint) TargetRate() float64 { return r.rt }

// Alpha returns the congestion estimate α.
func (r *ReactionPoint) Alpha() float64 { return r.alpha }

// NextEvent returns the earliest pending timer deadline, and false when none is armed.
func (r *ReactionPoint) NextEvent() (int64, bool) {
	d := min(r.nextAlpha, r.nextCut, r.nextInc)
	return d, d != never
}

// Advance fires, in time order, every timer due at or before now. At equal deadlines α
// is updated before the decrease check (which uses it), and both before an increase.
func (r *ReactionPoint) Advance(now int64) {
	for {
		switch d := min(r.nextAlpha, r.nextCut, r.nextInc); {
		case d > now:
			return
		case d == r.nextAlpha:
			r.updateAlpha()
			r.nextAlpha = d + r.p.AlphaInterval.Nanoseconds()
		case d == r.nextCut:
			r.nextCut = d + r.p.DecreaseInterval.Nanoseconds()
			if r.cnpCut {
				r.cut(d)
			}
		default:
			r.nextInc = d + r.p.IncreaseTimer.Nanoseconds()
			r.timers++
			r.increase()
		}
	}
}

// OnCNP handles a congestion notification received at now.
func (r *ReactionPoint) OnCNP(now int64) {
	r.Advance(now)
	k := r.p.AlphaInterval.Nanoseconds()
	if r.p.DecreaseInterval == 0 {
		// The paper: cut with the current α, then raise α; α decays only after a
		// full K without CNPs.
		r.active = true
		r.cut(now)
		r.alpha = (1-r.p.G)*r.alpha + r.p.G
		r.nextAlpha = now + k
		return
	}
	r.cnpAlpha, r.cnpCut = true, true
	if !r.active {
		// The first CNP arms the periodic α update and decrease check. α starts at 1
		// and this CNP is not counted again in the first α update.
		r.active = true
		r.alpha, r.cnpAlpha = 1, false
		r.nextAlpha = now + k
		r.nextCut = now + r.p.DecreaseInterval.Nanoseconds()
	}
}

// OnSent counts bytes sent at now towards the byte counter.
func (r *ReactionPoint) OnSent(now int64, bytes uint64) {
	r.Advance(now)
	if !r.active || r.p.ByteCounter == 0 {
		return
	}
	r.bytes += bytes
	for r.bytes >= r.p.ByteCounter {
		r.bytes -= r.p.ByteCounter
		r.counts++
		r.increase()
	}
}

func (r *ReactionPoint) updateAlpha() {
	if r.p.DecreaseInterval == 0 {
		r.alpha *= 1 - r.p.G // no CNP for K: the paper's decay
		return
	}
	r.alpha *= 1 - r.p.G
	if r.cnpAlpha {
		r.alpha += r.p.G
	}
	r.cnpAlpha = false
}

// cut is the rate decrease at now: RC = max(MinRate, RC·(1−α/2)), resetting the
// increase state and restarting the increase timer.
func (r *ReactionPoint) cut(now int64) {
	if r.p.ClampTargetRate || r.increased {
		r.rt = r.rc
	}
	r.rc = max(r.p.MinRate, r.rc*(1-r.alpha/2))
	r.cnpCut, r.increased = false, false
	r.timers, r.counts, r.bytes = 0, 0, 0
	r.nextInc = now + r.p.IncreaseTimer.Nanoseconds()
}

// increase is one rate-increase event, after the timer or byte count that caused it
// was counted. With a byte counter (the paper): fast recovery while both counts are at
// most F, hyper increase once both exceed F, additive otherwise. Without one (the
// simulator): fast recovery for the first F timer events, additive for the next one,
// hyper after.
func (r *ReactionPoint) increase() {
	f := r.p.FastRecovery
	var fast, hyper bool
	if r.p.ByteCounter == 0 {
		fast, hyper = r.timers <= f, r.timers > f+1
	} else {
		fast, hyper = max(r.timers, r.counts) <= f, min(r.timers, r.counts) > f
	}
	switch {
	case fast:
	case hyper:
		r.rt = min(r.rt+r.p.RateHAI, r.p.LineRate)
	default:
		r.rt = min(r.rt+r.p.RateAI, r.p.LineRate)
	}
	r.rc = (r.rt + r.rc) / 2
	r.increased = true
}

// NotificationPoint is DCQCN's receiver side for one flow: it turns CE-marked packets
// into CNPs, at most one per Interval. The zero value with Interval 0 answers every
// marked packet (the HPCC simulator's behaviour); the paper uses 50 µs.
type NotificationPoint struct {
	// Interval is the minimum time between two CNPs of the flow.
	Interval time.Duration
	last     int64
	sent     bool
}

// OnCE reports whether a CE-marked packet received at now (ns) should trigger a CNP,
// and if so records it as sent.
func (n *NotificationPoint) OnCE(now int64) bool {
	if n.sent && now-n.last < n.Interval.Nanoseconds() {
		return false
	}
	n.last, n.sent = now, true
	return true
}
