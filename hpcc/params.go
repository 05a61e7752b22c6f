package hpcc

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Params configures an HPCC++ flow (Sender, Receiver or Prober). The zero value is not
// usable: BaseRTT, Eta and either WInit or LineRate must be set; DraftParams and
// SimParams return complete sets.
type Params struct {
	// BaseRTT is T, the base round-trip time of the path without queueing. It scales
	// the queue term of the utilization, the EWMA weight and the pacing rate R = W/T.
	BaseRTT time.Duration
	// LineRate is the sender's line rate in bit/s; it only supplies the default WInit.
	LineRate float64
	// Eta is the target utilization, in (0, 1].
	Eta float64
	// MaxStage is the number of consecutive additive-increase updates before the
	// window is scaled up multiplicatively even though U < Eta. 0 means never AI.
	MaxStage int
	// WAI is the additive-increase step W_ai in bytes. If it is 0 and Flows > 0 it is
	// derived with the draft's rule of thumb, WAIRuleOfThumb(WInit, Eta, Flows).
	WAI float64
	// Flows is N, the expected number of flows sharing the bottleneck; used only to
	// derive WAI when WAI is 0.
	Flows int
	// WInit is the initial and maximum window in bytes. 0 means LineRate × BaseRTT.
	WInit float64
	// WMin is the minimum window in bytes, in [0, WInit].
	WMin float64
	// Wrap describes truncated telemetry counters (zero: full-width counters).
	Wrap Wrap
}

// Defaults of the draft parameterisation, shared by DraftParams and `rocelab hpcc replay`.
const (
	DefaultEta      = 0.95
	DefaultMaxStage = 5
	DefaultWMin     = 1000 // bytes
)

// DraftParams returns the draft's parameterisation for a flow on a path with base RTT T
// and line rate lineRate (bit/s), expecting flows flows at the bottleneck: eta 0.95,
// maxStage 5, W_init = line rate × T, W_ai by the rule of thumb, W_min 1000 bytes.
func DraftParams(lineRate float64, baseRTT time.Duration, flows int) Params {
	return Params{
		BaseRTT:  baseRTT,
		LineRate: lineRate,
		Eta:      DefaultEta,
		MaxStage: DefaultMaxStage,
		Flows:    flows,
		WMin:     DefaultWMin,
	}
}

// SimParams returns the HPCC reference simulator's rate-based preset ("hp" in its
// run.py) expressed as window parameters, so that W·8/T equals the simulator's rate:
// U_TARGET 0.95, MI_THRESH 0 (maxStage 0: every update is multiplicative),
// RATE_AI = 10 Mb/s per 25 Gb/s of line rate (W_ai = RATE_AI × T), MIN_RATE 1 Gb/s
// (W_min = MIN_RATE × T) and the line rate as maximum (W_init = line rate × T).
// Fast react on every ACK without committing the reference is the draft's behaviour
// too, so Sender runs this preset unchanged.
func SimParams(lineRate float64, baseRTT time.Duration) Params {
	ns := float64(baseRTT.Nanoseconds())
	return Params{
		BaseRTT:  baseRTT,
		LineRate: lineRate,
		Eta:      0.95,
		MaxStage: 0,
		WAI:      10e6 * (lineRate / 25e9) * ns / 8e9,
		WMin:     1e9 * ns / 8e9,
	}
}

// WAIRuleOfThumb is the draft's W_ai = W_init·(1−eta)/N: with N flows each adding W_ai
// per RTT, their total increase fills the (1−eta) headroom in one RTT.
func WAIRuleOfThumb(wInit, eta float64, flows int) float64 {
	return wInit * (1 - eta) / float64(flows)
}

// resolve validates p and fills the derived values (WInit, WAI).
func (p Params) resolve() (Params, error) {
	switch {
	case p.BaseRTT <= 0:
		return p, fmt.Errorf("hpcc: base RTT must be positive, got %v", p.BaseRTT)
	case !(p.Eta > 0 && p.Eta <= 1):
		return p, fmt.Errorf("hpcc: eta must be in (0, 1], got %v", p.Eta)
	case p.MaxStage < 0:
		return p, fmt.Errorf("hpcc: max stage must be non-negative, got %d", p.MaxStage)
	case p.Flows < 0:
		return p, fmt.Errorf("hpcc: flows must be non-negative, got %d", p.Flows)
	case !finite(p.WAI) || p.WAI < 0:
		return p, fmt.Errorf("hpcc: W_ai must be a non-negative number of bytes, got %v", p.WAI)
	case !finite(p.WMin) || p.WMin < 0:
		return p, fmt.Errorf("hpcc: W_min must be a non-negative number of bytes, got %v", p.WMin)
	case !finite(p.WInit) || p.WInit < 0:
		return p, fmt.Errorf("hpcc: W_init must be a non-negative number of bytes, got %v", p.WInit)
	}
	if p.WInit == 0 {
		if !finite(p.LineRate) || p.LineRate <= 0 {
			return p, errors.New("hpcc: W_init is unset and line rate is not positive: one of them is needed")
		}
		// bit/s × ns / 8e9: exact for round rates and RTTs, unlike × Seconds() / 8.
		p.WInit = p.LineRate * float64(p.BaseRTT.Nanoseconds()) / 8e9
	}
	if p.WInit > MaxWindow || p.WAI > MaxWindow {
		return p, fmt.Errorf("hpcc: W_init %v and W_ai %v bytes must be at most %v (2^50 bytes): a larger window overflows the rate it implies",
			p.WInit, p.WAI, float64(MaxWindow))
	}
	if p.WMin > p.WInit {
		return p, fmt.Errorf("hpcc: W_min %v bytes exceeds W_init %v bytes", p.WMin, p.WInit)
	}
	if p.WAI == 0 && p.Flows > 0 {
		p.WAI = WAIRuleOfThumb(p.WInit, p.Eta, p.Flows)
	}
	return p, nil
}

// MaxWindow bounds windows: 2^50 bytes (1 PiB) is a terabit per second over a 8-second
// RTT, far beyond any network, and keeps window / RTT and every product with it finite.
const MaxWindow = 1 << 50

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
