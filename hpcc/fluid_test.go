package hpcc

import (
	"math"
	"testing"
	"time"
)

// fluid is a discrete-time fluid model of flows sharing one bottleneck link, closed
// through Sender: every step each flow sends at W/(T + Q/C), the link serves C, and
// every step each flow gets an ACK echoing the switch's telemetry from half an RTT
// earlier and acknowledging what it had sent one RTT (plus queueing delay) earlier.
type fluid struct {
	c     float64 // link rate, bytes/ns
	t     int     // base RTT in steps
	h     float64 // step, ns
	flows []*Sender
	w     []float64   // current windows
	sent  [][]float64 // per flow, cumulative bytes at each step
	q, tx []float64   // switch queue and cumulative tx bytes at each step
}

const (
	fluidRate = 100e9 // bit/s
	fluidRTT  = 10 * time.Microsecond
	fluidStep = 100 // ns: 100 steps per RTT
	fluidBDP  = fluidRate / 8 * 10e-6
)

func newFluid(t *testing.T, params []Params) *fluid {
	f := &fluid{c: fluidRate / 8e9, t: int(fluidRTT.Nanoseconds() / fluidStep), h: fluidStep,
		q: []float64{0}, tx: []float64{0}}
	for _, p := range params {
		s, err := NewSender(p)
		if err != nil {
			t.Fatal(err)
		}
		f.flows = append(f.flows, s)
		f.w = append(f.w, s.Params().WInit)
		f.sent = append(f.sent, []float64{0})
	}
	return f
}

func (f *fluid) step() {
	n := len(f.q) - 1
	q := f.q[n]
	rtt := float64(f.t)*f.h + q/f.c
	arrived := 0.0
	for i := range f.flows {
		x := f.w[i] / rtt * f.h
		arrived += x
		f.sent[i] = append(f.sent[i], f.sent[i][n]+x)
	}
	q += arrived
	served := min(q, f.c*f.h)
	f.q = append(f.q, q-served)
	f.tx = append(f.tx, f.tx[n]+served)
	n++
	// Telemetry stamped half a base RTT ago travels to the receiver and back.
	m := max(0, n-f.t/2)
	hop := []Hop{{TS: uint64(float64(m) * f.h), QLen: uint64(f.q[m]), TxBytes: uint64(f.tx[m]), Rate: fluidRate}}
	acked := max(0, n-f.t-int(f.q[m]/f.c/f.h))
	for i, s := range f.flows {
		f.w[i] = s.NewAck(uint64(f.sent[i][acked]), uint64(f.sent[i][n]), hop).W
	}
}

func (f *fluid) run(rtts int) {
	for range rtts * f.t {
		f.step()
	}
}

// throughput is flow i's share of the link during RTT r, in bytes/ns.
func (f *fluid) throughput(i, r int) float64 {
	return (f.sent[i][(r+1)*f.t] - f.sent[i][r*f.t]) / (float64(f.t) * f.h)
}

// TestFluidOneFlow: a single flow settles at utilization ≈ eta with a near-zero queue.
// W_ai is sized for ten flows (BDP·(1−eta)/10), so the equilibrium utilization
// U* = eta + W_ai/BDP = 0.955 (derivation in TestFluidFairness).
func TestFluidOneFlow(t *testing.T) {
	p := DraftParams(fluidRate, fluidRTT, 10)
	f := newFluid(t, []Params{p})
	f.run(400)
	last := 100 * f.t
	n := len(f.tx) - 1
	util := (f.tx[n] - f.tx[n-last]) / (f.c * f.h * float64(last))
	maxQ := 0.0
	for _, q := range f.q[n-last:] {
		maxQ = max(maxQ, q)
	}
	t.Logf("utilization %.4f, max queue %.1f bytes (BDP %.0f)", util, maxQ, fluidBDP)
	if math.Abs(util-p.Eta) > 0.01 {
		t.Errorf("utilization %.4f, want eta %.2f ± 0.01", util, p.Eta)
	}
	if maxQ > 0.01*fluidBDP {
		t.Errorf("standing queue %.0f bytes, want below 1%% of the BDP", maxQ)
	}
}

// TestFluidFairness starts N flows together from unequal windows (NICs of 25, 50, 75
// and 100 Gb/s behind one 100 Gb/s link: W_init_i = their line rate × T) and checks
// that each comes within 10% of the fair share within the bound derived here.
//
// Derivation. Let B be the BDP, x = N·W_ai/B and δ = max_i |W_i − W̄|/W̄ the relative
// spread of the reference windows. Every committing update applies the same map to
// all flows: W_i ← k·W_i + W_ai (k = eta/U when multiplicative, k = 1 when additive),
// so δ' = δ·k·W̄/(k·W̄ + W_ai) = δ/(1 + W_ai/(kW̄)): the spread never grows and
// shrinks by a factor that depends on W_ai. In the steady state U* every update is
// multiplicative and the total is a fixed point, k·N·W̄* + N·W_ai = N·W̄* with
// N·W̄* = U*·B, so U* = eta + x and the factor is
//
//	ρ = 1 − W_ai/W̄* = eta/(eta + x).
//
// During the transient U > U* makes k smaller and the contraction faster, so from an
// initial spread δ0 the flows are within 10% after at most
//
//	n = ⌈ln(δ0/0.1) / ln(1/ρ)⌉
//
// committed updates, one per RTT, plus 2 RTTs: one to prime the telemetry and one of
// feedback delay. With the rule of thumb W_ai = B(1−eta)/N, x = 1−eta and ρ = eta:
// δ0 = 0.6 (windows 1:2:3:4), eta = 0.95 gives n = ⌈35.0⌉ + 2 = 37 RTTs.
func TestFluidFairness(t *testing.T) {
	const n = 4
	var params []Params
	for i := range n {
		p := DraftParams(fluidRate*float64(i+1)/n, fluidRTT, n)
		p.WAI = WAIRuleOfThumb(fluidBDP, p.Eta, n) // sized for the bottleneck, not the NIC
		params = append(params, p)
	}
	eta, wai := params[0].Eta, params[0].WAI
	x := n * wai / fluidBDP
	rho := eta / (eta + x)
	delta0 := 0.6 // windows B/4·(1, 2, 3, 4): max deviation 1.5 of mean 2.5
	bound := int(math.Ceil(math.Log(delta0/0.1)/math.Log(1/rho))) + 2

	f := newFluid(t, params)
	rtts := 3 * bound
	f.run(rtts)
	converged := -1 // first RTT from which every later RTT is within 10% of fair share
	for r := rtts - 1; r >= 0; r-- {
		total := 0.0
		for i := range n {
			total += f.throughput(i, r)
		}
		fair := total / n
		ok := true
		for i := range n {
			ok = ok && math.Abs(f.throughput(i, r)-fair) <= 0.1*fair
		}
		if !ok {
			break
		}
		converged = r
	}
	t.Logf("ρ = %.4f, bound %d RTTs, converged after %d RTTs", rho, bound, converged)
	if converged < 0 || converged > bound {
		t.Errorf("flows within 10%% of fair share after %d RTTs, derived bound %d", converged, bound)
	}
	// And the share is the link's: aggregate utilization in the last RTT near U* ≤ 1.
	r := rtts - 1
	total := 0.0
	for i := range n {
		total += f.throughput(i, r)
	}
	if u := total / f.c; u < eta-0.02 || u > 1.0001 {
		t.Errorf("aggregate utilization %.4f in the last RTT, want in [eta−0.02, 1]", u)
	}
}
