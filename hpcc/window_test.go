package hpcc

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The hand-computed cases use a path where the arithmetic is exact in decimal:
// B = 8 Gb/s (1 byte/ns) and T = 10 µs, so the bandwidth-delay product is 10000 bytes,
// a byte delta d over 10000 ns is a utilization of d/10000 and a queue of q bytes adds
// q/10000. eta 0.8 makes eta/U a short decimal for the U values used.
const testB = 8e9

func testParams() Params {
	return Params{BaseRTT: 10 * time.Microsecond, WInit: 10000, WMin: 1000, Eta: 0.8, MaxStage: 2, WAI: 100}
}

func hop(ts, tx, q uint64) Hop { return Hop{TS: ts, TxBytes: tx, QLen: q, Rate: testB} }

func approx(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func checkState(t *testing.T, got State, want State) {
	t.Helper()
	want.Rate = want.W * 8 / 10e-6 // R = W/T in bit/s
	if !approx(got.U, want.U) || !approx(got.W, want.W) || !approx(got.Wc, want.Wc) ||
		!approx(got.Rate, want.Rate) || got.IncStage != want.IncStage || got.UpdateWc != want.UpdateWc {
		t.Errorf("state\n got %+v\nwant %+v", got, want)
	}
}

// TestNewAckBranches drives each branch of MeasureInflight and ComputeWind from a set
// starting state with one ACK whose effect is computed by hand in the comment.
func TestNewAckBranches(t *testing.T) {
	type start struct {
		u, wc    float64
		incStage int
		hops     []Hop
	}
	s0 := func(u, wc float64, stage int) start { return start{u, wc, stage, []Hop{hop(0, 0, 0)}} }
	tests := []struct {
		name    string
		params  func(*Params)
		start   start
		seq     uint64 // lastUpdateSeq is 10; seq > 10 commits
		hops    []Hop
		want    State
		reprime bool // a path change: lastUpdateSeq follows snd_nxt without a commit
	}{{
		// u' = 5000/10000 = 0.5, tau = T so U = 0.5 < eta, stage 0 < 2: W = 5000 + 100.
		name: "AI commits", start: s0(1, 5000, 0), seq: 11, hops: []Hop{hop(10000, 5000, 0)},
		want: State{U: 0.5, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}, {
		// Same computation, but seq 10 does not pass lastUpdateSeq: Wc and stage stay.
		name: "AI fast react does not commit", start: s0(1, 5000, 0), seq: 10, hops: []Hop{hop(10000, 5000, 0)},
		want: State{U: 0.5, W: 5100, Wc: 5000, IncStage: 0},
	}, {
		// U = 0.64 < eta but stage 2 = maxStage: W = 5000/(0.64/0.8) + 100 = 6250 + 100.
		name: "MI after maxStage", start: s0(1, 5000, 2), seq: 11, hops: []Hop{hop(10000, 6400, 0)},
		want: State{U: 0.64, W: 6350, Wc: 6350, IncStage: 0, UpdateWc: true},
	}, {
		// txRate = B (1.0) plus min(2500, 5000)/10000 = 0.25 queued: U = 1.25.
		// W = 5000/(1.25/0.8) + 100 = 3200 + 100; the stage resets.
		name: "MD when U above eta", seq: 11,
		start: start{1, 5000, 1, []Hop{hop(0, 0, 5000)}}, hops: []Hop{hop(10000, 10000, 2500)},
		want: State{U: 1.25, W: 3300, Wc: 3300, IncStage: 0, UpdateWc: true},
	}, {
		// U = 0.8 = eta takes the multiplicative branch: W = 5000/1 + 100, stage 0 (AI
		// would have made it 1).
		name: "MD at exactly eta", start: s0(1, 5000, 0), seq: 11, hops: []Hop{hop(10000, 8000, 0)},
		want: State{U: 0.8, W: 5100, Wc: 5100, IncStage: 0, UpdateWc: true},
	}, {
		// dt = 5000 = T/2, u' = 2500·8/5µs / 8G = 0.5: U = 0.5·1 + 0.5·0.5 = 0.75.
		name: "EWMA weight tau/T", start: s0(1, 5000, 0), seq: 11, hops: []Hop{hop(5000, 2500, 0)},
		want: State{U: 0.75, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}, {
		// dt = 20000 > T is capped: U = u' = 10000/20000 = 0.5.
		name: "tau capped at T", start: s0(1, 5000, 0), seq: 11, hops: []Hop{hop(20000, 10000, 0)},
		want: State{U: 0.5, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}, {
		// Hop 0: u' = 0.5 over T; hop 1: u' = 1.0 over T/2 wins and brings its tau:
		// U = 0.5·0.5 + 0.5·1.0 = 0.75.
		name: "most loaded hop sets u and tau", seq: 11,
		start: start{0.5, 5000, 0, []Hop{hop(0, 0, 0), {Rate: testB, SwitchID: 2}}},
		hops:  []Hop{hop(10000, 5000, 0), {TS: 5000, TxBytes: 5000, Rate: testB, SwitchID: 2}},
		want:  State{U: 0.75, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}, {
		// Hop 0's time did not advance: its enormous byte delta is ignored.
		name: "hop with zero time delta skipped", seq: 11,
		start: start{1, 5000, 0, []Hop{hop(7, 0, 0), {Rate: testB, SwitchID: 2}}},
		hops:  []Hop{hop(7, 1<<40, 0), {TS: 10000, TxBytes: 5000, Rate: testB, SwitchID: 2}},
		want:  State{U: 0.5, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}, {
		// Time went backwards on the only hop: U stays 1.6, W = 5000/(1.6/0.8) + 100.
		name: "no valid hop leaves U", seq: 11,
		start: start{1.6, 5000, 0, []Hop{hop(500, 0, 0)}}, hops: []Hop{hop(400, 9000, 9000)},
		want: State{U: 1.6, W: 2600, Wc: 2600, IncStage: 0, UpdateWc: true},
	}, {
		// Nothing sent or queued: U = 0; at maxStage the MI branch would divide by zero,
		// so W = W_init.
		name: "U zero at MI gives W_init", start: s0(1, 5000, 2), seq: 11, hops: []Hop{hop(10000, 0, 0)},
		want: State{U: 0, W: 10000, Wc: 10000, IncStage: 0, UpdateWc: true},
	}, {
		// U = 0 below maxStage is an ordinary AI step.
		name: "U zero below maxStage is AI", start: s0(1, 5000, 1), seq: 11, hops: []Hop{hop(10000, 0, 0)},
		want: State{U: 0, W: 5100, Wc: 5100, IncStage: 2, UpdateWc: true},
	}, {
		// MI: 8000/(0.5/0.8) + 100 = 12900, clamped to W_init.
		name: "clamp to W_init", start: s0(1, 8000, 2), seq: 11, hops: []Hop{hop(10000, 5000, 0)},
		want: State{U: 0.5, W: 10000, Wc: 10000, IncStage: 0, UpdateWc: true},
	}, {
		// A standing 100000-byte queue: U = 1 + 10 = 11, W = 5000·0.8/11 + 100 ≈ 464,
		// clamped to W_min.
		name: "clamp to W_min", seq: 11,
		start: start{1, 5000, 0, []Hop{hop(0, 0, 100000)}}, hops: []Hop{hop(10000, 10000, 100000)},
		want: State{U: 11, W: 1000, Wc: 1000, IncStage: 0, UpdateWc: true},
	}, {
		// A second hop appeared: the ACK only re-primes; state is untouched.
		name: "path change: hop count", start: s0(1, 5000, 1), seq: 11,
		hops: []Hop{hop(10000, 5000, 0), hop(10000, 5000, 0)},
		want: State{U: 1, W: 5000, Wc: 5000, IncStage: 1}, reprime: true,
	}, {
		name: "path change: other switch port", start: s0(1, 5000, 1), seq: 11,
		hops: []Hop{{TS: 10000, TxBytes: 5000, Rate: testB, PortID: 3}},
		want: State{U: 1, W: 5000, Wc: 5000, IncStage: 1}, reprime: true,
	}, {
		// 24-bit time and 2^27-byte counter both wrapped: dt = 4000 + 6000 = 10000,
		// dtx = 2000 + 3000 = 5000, so U = 0.5 as in the first case.
		name: "wrap-around of truncated fields", seq: 11,
		params: func(p *Params) { p.Wrap = CompactWrap(1) },
		start:  start{1, 5000, 0, []Hop{hop(1<<24-4000, 1<<27-2000, 0)}},
		hops:   []Hop{hop(6000, 3000, 0)},
		want:   State{U: 0.5, W: 5100, Wc: 5100, IncStage: 1, UpdateWc: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			if tc.params != nil {
				tc.params(&p)
			}
			s, err := NewSender(p)
			if err != nil {
				t.Fatal(err)
			}
			s.u, s.w, s.wc, s.incStage = tc.start.u, tc.start.wc, tc.start.wc, tc.start.incStage
			s.store(tc.start.hops)
			s.lastUpdateSeq = 10
			checkState(t, s.NewAck(tc.seq, 99, tc.hops), tc.want)
			wantLast := uint64(10)
			if tc.want.UpdateWc || tc.reprime {
				wantLast = 99
			}
			if s.lastUpdateSeq != wantLast {
				t.Errorf("lastUpdateSeq = %d, want %d", s.lastUpdateSeq, wantLast)
			}
		})
	}
}

// TestSenderSequence runs one flow from its first ACK through a cut, fast react, AI
// stages and MI, each value computed by hand (same path as TestNewAckBranches).
func TestSenderSequence(t *testing.T) {
	s, err := NewSender(testParams())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		seq, sndNxt uint64
		hop         Hop
		want        State
	}{
		// First ACK: record the hop, lastUpdateSeq = 10000; W = Wc = W_init, U = 1.
		{0, 10000, hop(0, 0, 0), State{U: 1, W: 10000, Wc: 10000}},
		// U = 1.0 ≥ 0.8: W = 10000·0.8 + 100; seq 5000 ≤ 10000 so nothing commits.
		{5000, 20000, hop(10000, 10000, 5000), State{U: 1, W: 8100, Wc: 10000}},
		// dt = T/2: txRate 1.0 + min(5000, 5000) queued 0.5 → u' = 1.5, U = 0.5·1 +
		// 0.5·1.5 = 1.25; W = 10000·0.64 + 100 = 6500, committed (10001 > 10000).
		{10001, 30000, hop(15000, 15000, 5000), State{U: 1.25, W: 6500, Wc: 6500, UpdateWc: true}},
		// Queue gone (min(0, 5000) = 0), U = 0.5: AI from Wc, not committed.
		{20000, 40000, hop(25000, 20000, 0), State{U: 0.5, W: 6600, Wc: 6500}},
		// Committed AI stages 1 and 2.
		{30001, 50000, hop(35000, 25000, 0), State{U: 0.5, W: 6600, Wc: 6600, IncStage: 1, UpdateWc: true}},
		{50001, 60000, hop(45000, 30000, 0), State{U: 0.5, W: 6700, Wc: 6700, IncStage: 2, UpdateWc: true}},
		// Stage 2 = maxStage: MI with U = 0.64: 6700·1.25 + 100 = 8475.
		{60001, 70000, hop(55000, 36400, 0), State{U: 0.64, W: 8475, Wc: 8475, UpdateWc: true}},
	}
	for i, st := range steps {
		got := s.NewAck(st.seq, st.sndNxt, []Hop{st.hop})
		t.Logf("step %d: %+v", i, got)
		checkState(t, got, st.want)
	}
}

// TestReceiverOncePerT checks Rx-HPCC's feedback rule: a packet commits and triggers
// feedback only when now > lastUpdateTime + T (T = 10000 ns here).
func TestReceiverOncePerT(t *testing.T) {
	r, err := NewReceiver(testParams())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		now  int64
		hop  Hop
		want RxState
	}{
		// First packet primes: lastUpdateTime = 100.
		{100, hop(0, 0, 0), RxState{State: State{U: 1, W: 10000, Wc: 10000}}},
		// now = 100 + T is not later than lastUpdateTime + T: W = 10000·0.8 + 100, no feedback.
		{10100, hop(10000, 10000, 0), RxState{State: State{U: 1, W: 8100, Wc: 10000}}},
		// now = 10101 > 10100 commits and sends; lastUpdateTime = 10101.
		{10101, hop(20000, 20000, 0), RxState{State: State{U: 1, W: 8100, Wc: 8100, UpdateWc: true}, SendAck: true}},
		// U = 0.5 (half rate): AI from 8100, but 20101 is not > 10101 + 10000.
		{20101, hop(30000, 25000, 0), RxState{State: State{U: 0.5, W: 8200, Wc: 8100}}},
		{20102, hop(40000, 30000, 0), RxState{State: State{U: 0.5, W: 8200, Wc: 8200, IncStage: 1, UpdateWc: true}, SendAck: true}},
	}
	for i, st := range steps {
		got := r.NewINT(st.now, []Hop{st.hop})
		checkState(t, got.State, st.want.State)
		if got.SendAck != st.want.SendAck {
			t.Errorf("step %d: SendAck = %v, want %v", i, got.SendAck, st.want.SendAck)
		}
	}
}

// TestProber checks the probe schedule (one per T while data is in flight) and that
// every response after the first commits.
func TestProber(t *testing.T) {
	p, err := NewProber(testParams())
	if err != nil {
		t.Fatal(err)
	}
	if p.ProbeDue(0, false) {
		t.Error("probe due with nothing in flight")
	}
	if !p.ProbeDue(0, true) {
		t.Error("first probe not due")
	}
	p.ProbeSent(0)
	if p.ProbeDue(9999, true) {
		t.Error("second probe due before T")
	}
	if !p.ProbeDue(10000, true) {
		t.Error("second probe not due after T")
	}
	checkState(t, p.OnResponse([]Hop{hop(0, 0, 0)}), State{U: 1, W: 10000, Wc: 10000})
	// U = 1: W = 10000·0.8 + 100, committed without any sequence condition.
	checkState(t, p.OnResponse([]Hop{hop(10000, 10000, 0)}), State{U: 1, W: 8100, Wc: 8100, UpdateWc: true})
	checkState(t, p.OnResponse([]Hop{hop(20000, 15000, 0)}), State{U: 0.5, W: 8200, Wc: 8200, IncStage: 1, UpdateWc: true})
}

func TestParamsValidation(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Params)
		err  string
	}{
		{"zero base RTT", func(p *Params) { p.BaseRTT = 0 }, "base RTT must be positive"},
		{"negative base RTT", func(p *Params) { p.BaseRTT = -time.Microsecond }, "base RTT must be positive"},
		{"eta zero", func(p *Params) { p.Eta = 0 }, "eta must be in (0, 1]"},
		{"eta above one", func(p *Params) { p.Eta = 1.01 }, "eta must be in (0, 1]"},
		{"eta NaN", func(p *Params) { p.Eta = math.NaN() }, "eta must be in (0, 1]"},
		{"negative max stage", func(p *Params) { p.MaxStage = -1 }, "max stage"},
		{"negative W_ai", func(p *Params) { p.WAI = -1 }, "W_ai"},
		{"W_min above W_init", func(p *Params) { p.WMin = 20000 }, "exceeds W_init"},
		{"no W_init nor line rate", func(p *Params) { p.WInit = 0 }, "line rate"},
		{"negative flows", func(p *Params) { p.Flows = -2 }, "flows"},
	}
	for _, tc := range tests {
		p := testParams()
		tc.mod(&p)
		if _, err := NewSender(p); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want it to mention %q", tc.name, err, tc.err)
		}
	}
}

func TestDerivedParams(t *testing.T) {
	// 100 Gb/s × 5 µs = 62500 bytes; rule of thumb with 4 flows: 62500·0.05/4.
	s, err := NewSender(DraftParams(100e9, 5*time.Microsecond, 4))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Params(); !approx(p.WInit, 62500) || !approx(p.WAI, 781.25) || p.MaxStage != 5 || p.Eta != 0.95 {
		t.Errorf("draft params resolved to %+v", p)
	}
	// The simulator at 100 Gb/s: RATE_AI 40 Mb/s → 25 bytes per 5 µs; MIN_RATE 1 Gb/s → 625.
	s, err = NewSender(SimParams(100e9, 5*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Params(); !approx(p.WAI, 25) || !approx(p.WMin, 625) || !approx(p.WInit, 62500) || p.MaxStage != 0 {
		t.Errorf("sim params resolved to %+v", p)
	}
	if st := s.State(); !approx(st.Rate, 100e9) {
		t.Errorf("initial rate %v, want line rate", st.Rate)
	}
}

func TestWrapDeltas(t *testing.T) {
	w := CompactWrap(4)
	if w.TS != 1<<24 || w.TxBytes != 1<<29 {
		t.Fatalf("CompactWrap(4) = %+v", w)
	}
	tests := []struct {
		name      string
		w         Wrap
		cur, prev Hop
		dt, dtx   int64
	}{
		{"full width forward", Wrap{}, Hop{TS: 30, TxBytes: 500}, Hop{TS: 10, TxBytes: 100}, 20, 400},
		{"full width backward is negative", Wrap{}, Hop{TS: 10}, Hop{TS: 30}, -20, 0},
		{"24-bit time wraps", w, Hop{TS: 5}, Hop{TS: 1<<24 - 5}, 10, 0},
		{"byte counter wraps", w, Hop{TxBytes: 128}, Hop{TxBytes: 1<<29 - 128}, 0, 256},
		{"values above the modulus are reduced", w, Hop{TS: 1<<24 + 7}, Hop{TS: 2}, 5, 0},
		{"huge modulus does not overflow", Wrap{TS: 1<<64 - 1}, Hop{TS: 1}, Hop{TS: 1<<64 - 2}, 2, 0},
	}
	for _, tc := range tests {
		if dt, dtx := tc.w.TimeDelta(tc.cur, tc.prev), tc.w.TxBytesDelta(tc.cur, tc.prev); dt != tc.dt || dtx != tc.dtx {
			t.Errorf("%s: deltas (%d, %d), want (%d, %d)", tc.name, dt, dtx, tc.dt, tc.dtx)
		}
	}
}
