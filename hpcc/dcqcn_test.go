package hpcc

import (
	"math"
	"strings"
	"testing"
	"time"
)

const us = int64(time.Microsecond)

type dcqcnStep struct {
	at      int64 // ns
	cnp     bool
	sent    uint64 // bytes reported sent at this instant (0: just Advance)
	rc, rt  float64
	alpha   float64
	comment string
}

func runDCQCN(t *testing.T, p DCQCNParams, steps []dcqcnStep) {
	t.Helper()
	r, err := NewReactionPoint(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		switch {
		case st.cnp:
			r.OnCNP(st.at)
		case st.sent > 0:
			r.OnSent(st.at, st.sent)
		default:
			r.Advance(st.at)
		}
		if !approx(r.Rate(), st.rc) || !approx(r.TargetRate(), st.rt) || !approx(r.Alpha(), st.alpha) {
			t.Errorf("t=%dµs %s: RC %v RT %v α %v, want %v %v %v", st.at/us, st.comment,
				r.Rate()/1e9, r.TargetRate()/1e9, r.Alpha(), st.rc/1e9, st.rt/1e9, st.alpha)
		}
	}
}

// TestDCQCNPaperEquations follows the DCQCN paper's reaction point with numbers chosen
// to stay exact: 40 Gb/s, g = 1/4, F = 2, R_AI = 1 Gb/s, R_HAI = 4 Gb/s, timer 50 µs,
// K = 55 µs, byte counter 1 MB. On a CNP: RT = RC, RC = RC(1−α/2), α = (1−g)α + g.
// Without a CNP for K: α = (1−g)α. Each timer or byte-counter event: fast recovery
// RC = (RT+RC)/2 while max(T, BC) ≤ F; additive RT += R_AI while min(T, BC) ≤ F < max;
// hyper RT += R_HAI once min(T, BC) > F; then RC = (RT+RC)/2.
func TestDCQCNPaperEquations(t *testing.T) {
	const G = 1e9
	p := DCQCNParams{LineRate: 40 * G, G: 0.25, AlphaInterval: 55 * time.Microsecond,
		IncreaseTimer: 50 * time.Microsecond, ByteCounter: 1e6, FastRecovery: 2,
		RateAI: 1 * G, RateHAI: 4 * G, ClampTargetRate: true}
	runDCQCN(t, p, []dcqcnStep{
		{at: 0, cnp: true, rc: 20 * G, rt: 40 * G, alpha: 1, comment: "RC = 40(1−1/2); α = 0.75+0.25"},
		{at: 10 * us, cnp: true, rc: 10 * G, rt: 20 * G, alpha: 1, comment: "second cut"},
		{at: 60 * us, rc: 15 * G, rt: 20 * G, alpha: 1, comment: "timer T=1: fast recovery (20+10)/2"},
		{at: 65 * us, rc: 15 * G, rt: 20 * G, alpha: 0.75, comment: "K without CNP: α = 0.75"},
		{at: 100 * us, sent: 1e6, rc: 17.5 * G, rt: 20 * G, alpha: 0.75, comment: "BC=1: fast recovery"},
		{at: 110 * us, rc: 18.75 * G, rt: 20 * G, alpha: 0.75, comment: "T=2: fast recovery"},
		{at: 120 * us, rc: 18.75 * G, rt: 20 * G, alpha: 0.5625, comment: "α = 0.75²"},
		// BC=2: still fast recovery (19.375); BC=3 > F but T = 2: additive, RT = 21,
		// RC = (21 + 19.375)/2.
		{at: 130 * us, sent: 2e6, rc: 20.1875 * G, rt: 21 * G, alpha: 0.5625, comment: "BC=2 FR, BC=3 AI"},
		{at: 160 * us, rc: 22.59375 * G, rt: 25 * G, alpha: 0.5625, comment: "T=3: hyper, RT = 21+4"},
		{at: 175 * us, rc: 22.59375 * G, rt: 25 * G, alpha: 0.421875, comment: "α = 0.75³"},
		// RT = RC; RC = 22.59375·(1 − 0.421875/2) = 73023/4096; α = 0.75·0.421875 + 0.25.
		{at: 180 * us, cnp: true, rc: 17.827880859375 * G, rt: 22.59375 * G, alpha: 0.56640625, comment: "cut"},
		// The cut reset the counters and restarted the timer: next event at 230 µs is
		// fast recovery again; the byte count restarted from zero too.
		{at: 229 * us, sent: 999999, rc: 17.827880859375 * G, rt: 22.59375 * G, alpha: 0.56640625, comment: "nothing due"},
		{at: 230 * us, rc: (22.59375 + 17.827880859375) / 2 * G, rt: 22.59375 * G, alpha: 0.56640625, comment: "T=1 after cut"},
	})
}

// TestDCQCNSimulatorDiscipline follows the HPCC simulator's periodic discipline
// (decrease interval > 0, no byte counter, no target clamp) with g = 1/4, α period
// 2 µs, decrease check 4 µs, increase timer 10 µs, F = 1, R_AI 1 Gb/s, R_HAI 4 Gb/s.
func TestDCQCNSimulatorDiscipline(t *testing.T) {
	const G = 1e9
	p := DCQCNParams{LineRate: 40 * G, MinRate: 1 * G, G: 0.25, AlphaInterval: 2 * time.Microsecond,
		DecreaseInterval: 4 * time.Microsecond, IncreaseTimer: 10 * time.Microsecond,
		FastRecovery: 1, RateAI: 1 * G, RateHAI: 4 * G}
	// α decays by 3/4 every 2 µs and gains 1/4 in a period that saw a CNP.
	a4 := 0.5625                  // t=2: 0.75, t=4: 0.5625 (first CNP not counted)
	a8 := (a4*0.75 + 0.25) * 0.75 // CNP at 5 counted at t=6, none by t=8
	rc8 := 28.75 * (1 - a8/2)     // second cut; RT stays 40 (no increase between)
	a18 := decay(a8, 5)           // t=10..18
	rc18 := (40 + rc8) / 2        // first timer event: fast recovery
	a20 := a18*0.75 + 0.25        // CNP at 19
	rc20 := rc18 * (1 - a20/2)    // cut after an increase: RT = RC first
	rc30 := (rc18 + rc20) / 2     // fast recovery towards RT = rc18
	rc40 := (rc18 + 1 + rc30) / 2 // additive: RT = rc18 + R_AI
	runDCQCN(t, p, []dcqcnStep{
		{at: 0, cnp: true, rc: 40 * G, rt: 40 * G, alpha: 1, comment: "first CNP arms timers only"},
		{at: 2 * us, rc: 40 * G, rt: 40 * G, alpha: 0.75, comment: "α period without a counted CNP"},
		// α is updated first at t=4, then the cut uses it: 40·(1 − 0.5625/2).
		{at: 4 * us, rc: 28.75 * G, rt: 40 * G, alpha: a4, comment: "first cut, RT not clamped"},
		{at: 5 * us, cnp: true, rc: 28.75 * G, rt: 40 * G, alpha: a4, comment: "CNP only sets flags"},
		{at: 8 * us, rc: rc8 * G, rt: 40 * G, alpha: a8, comment: "second cut, RT still 40"},
		{at: 12 * us, rc: rc8 * G, rt: 40 * G, alpha: decay(a8, 2), comment: "no CNP: no cut"},
		{at: 18 * us, rc: rc18 * G, rt: 40 * G, alpha: a18, comment: "timer 1: fast recovery"},
		{at: 19 * us, cnp: true, rc: rc18 * G, rt: 40 * G, alpha: a18},
		{at: 20 * us, rc: rc20 * G, rt: rc18 * G, alpha: a20, comment: "cut after increase clamps RT"},
		{at: 30 * us, rc: rc30 * G, rt: rc18 * G, alpha: decay(a20, 5), comment: "timer 1: fast recovery"},
		{at: 40 * us, rc: rc40 * G, rt: (rc18 + 1) * G, alpha: decay(a20, 10), comment: "timer 2 = F+1: additive"},
		{at: 50 * us, rc: (rc18 + 5 + rc40) / 2 * G, rt: (rc18 + 5) * G, alpha: decay(a20, 15), comment: "timer 3: hyper"},
	})
}

// decay applies n α periods without a CNP at g = 1/4.
func decay(a float64, n int) float64 { return a * math.Pow(0.75, float64(n)) }

func TestDCQCNHyperAndFloor(t *testing.T) {
	p := DCQCNSimParams(100e9)
	r, err := NewReactionPoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.NextEvent(); ok {
		t.Error("timers armed before any CNP")
	}
	// CNPs every 4 µs for 1 ms drive RC down to the 1 Gb/s floor.
	for now := int64(0); now <= 1000*us; now += 4 * us {
		r.OnCNP(now)
	}
	r.Advance(1004 * us)
	if r.Rate() != 1e9 {
		t.Fatalf("rate after sustained CNPs %v, want MIN_RATE 1e9", r.Rate())
	}
	// The cuts never followed an increase, so RT is still the line rate. Without CNPs
	// the 300 µs timer recovers: FR to 50.5, AI (RT capped at 100) to 75.25, HAI to
	// 87.625 Gb/s.
	if r.TargetRate() != 100e9 {
		t.Fatalf("target %v, want line rate", r.TargetRate())
	}
	r.Advance(1004*us + 3*300*us)
	if !approx(r.Rate(), 87.625e9) {
		t.Errorf("rate after FR, AI, HAI = %v, want 87.625e9", r.Rate())
	}
	if d, ok := r.NextEvent(); !ok || d <= 1004*us+3*300*us {
		t.Errorf("next event %v %v, want a future deadline", d, ok)
	}
	pp := DCQCNSimPaperParams(25e9)
	if pp.AlphaInterval != 50*time.Microsecond || pp.IncreaseTimer != 55*time.Microsecond || pp.RateAI != 5e6 || pp.RateHAI != 50e6 {
		t.Errorf("dcqcn_paper preset %+v", pp)
	}
}

func TestNotificationPoint(t *testing.T) {
	np := NotificationPoint{Interval: 50 * time.Microsecond}
	got := []bool{np.OnCE(0), np.OnCE(10 * us), np.OnCE(49 * us), np.OnCE(50 * us), np.OnCE(60 * us), np.OnCE(100 * us)}
	want := []bool{true, false, false, true, false, true}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("CE %d: CNP %v, want %v", i, got[i], want[i])
		}
	}
	var every NotificationPoint
	first := every.OnCE(5)
	if second := every.OnCE(5); !first || !second {
		t.Error("zero interval must answer every marked packet")
	}
}

func TestDCQCNValidation(t *testing.T) {
	tests := []struct {
		mod func(*DCQCNParams)
		err string
	}{
		{func(p *DCQCNParams) { p.LineRate = 0 }, "line rate"},
		{func(p *DCQCNParams) { p.MinRate = 2e11 }, "min rate"},
		{func(p *DCQCNParams) { p.G = 0 }, "g must be"},
		{func(p *DCQCNParams) { p.AlphaInterval = 0 }, "alpha interval"},
		{func(p *DCQCNParams) { p.DecreaseInterval = -1 }, "decrease interval"},
		{func(p *DCQCNParams) { p.IncreaseTimer = 0 }, "increase timer"},
		{func(p *DCQCNParams) { p.FastRecovery = -1 }, "fast-recovery"},
		{func(p *DCQCNParams) { p.RateAI = -1 }, "rate steps"},
	}
	for _, tc := range tests {
		p := DCQCNSimParams(100e9)
		tc.mod(&p)
		if _, err := NewReactionPoint(p); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("error %v, want it to mention %q", err, tc.err)
		}
	}
}
