package hpcc

// State is what an HPCC++ update reports: the utilization estimate, the window and
// pacing rate to use from now on, and whether this update committed the reference.
type State struct {
	// U is the EWMA of the normalized inflight bytes of the most loaded hop
	// (1.0 = the hop's bandwidth-delay product is in flight).
	U float64
	// W is the window in bytes the flow may have in flight.
	W float64
	// Wc is the reference window in bytes that the next update scales.
	Wc float64
	// Rate is the pacing rate R = W·8/T in bit/s.
	Rate float64
	// IncStage counts consecutive committed additive increases.
	IncStage int
	// UpdateWc reports whether this update committed W as the new Wc.
	UpdateWc bool
}

// window is the state the draft's MeasureInflight and ComputeWind share (pseudocode
// lines 1–24). Sender, Receiver and Prober embed it and decide only when to commit.
type window struct {
	p        Params  // resolved
	t        float64 // T in ns: hop timestamps are ns, so tau/T needs no conversion
	u, w, wc float64
	incStage int
	hops     []Hop // the telemetry of the previous event, reused to stay allocation-free
	primed   bool  // hops holds a previous event's telemetry
}

func newWindow(p Params) (window, error) {
	p, err := p.resolve()
	if err != nil {
		return window{}, err
	}
	return window{p: p, t: float64(p.BaseRTT.Nanoseconds()), u: 1, w: p.WInit, wc: p.WInit}, nil
}

// comparable reports whether hops are later samples of the stored hops, so that
// per-hop deltas mean something: there must be stored telemetry, of the same length,
// from the same switch ports. When it returns false the caller re-primes.
func (c *window) comparable(hops []Hop) bool {
	if !c.primed || len(hops) != len(c.hops) {
		return false
	}
	for i := range hops {
		if hops[i].SwitchID != c.hops[i].SwitchID || hops[i].PortID != c.hops[i].PortID {
			return false
		}
	}
	return true
}

// store makes hops the reference for the next event's deltas.
func (c *window) store(hops []Hop) {
	c.hops = append(c.hops[:0], hops...)
	c.primed = true
}

// measureInflight is the draft's MeasureInflight (lines 1–14): the hop with the largest
// normalized inflight u' = min(qlen, qlen_prev)/(B·T) + txRate/B sets u and tau, and U
// moves towards u with weight tau/T. Hops whose time did not advance carry no rate and
// are skipped; if none advanced, U is left as it was. Requires comparable(hops).
func (c *window) measureInflight(hops []Hop) {
	var u, tau float64
	valid := false
	for i := range hops {
		cur, prev := &hops[i], &c.hops[i]
		dt := c.p.Wrap.TimeDelta(*cur, *prev)
		if dt <= 0 {
			continue
		}
		b := float64(cur.Rate)
		// Scaling by 8e9 before dividing by ns keeps hand-computable cases exact.
		txRate := float64(c.p.Wrap.TxBytesDelta(*cur, *prev)) * 8e9 / float64(dt)
		// The smaller of the two queue samples: a queue that just formed or just
		// drained is not counted as standing (the draft's min filter).
		q := min(cur.QLen, prev.QLen)
		up := float64(q)*8e9/(b*c.t) + txRate/b
		if !valid || up > u {
			u, tau, valid = up, float64(dt), true
		}
	}
	if !valid {
		return
	}
	tau = min(tau, c.t)
	c.u = (1-tau/c.t)*c.u + (tau/c.t)*u
}

// computeWind is the draft's ComputeWind (lines 15–24) plus the [W_min, W_init] clamp:
// multiplicative when U ≥ eta or after maxStage additive steps, additive otherwise.
// Only a committing update (commit) moves Wc and the stage.
func (c *window) computeWind(commit bool) {
	var w float64
	stage := c.incStage + 1
	if c.u >= c.p.Eta || c.incStage >= c.p.MaxStage {
		if c.u == 0 {
			w = c.p.WInit // an idle path: Wc/(0/eta) would be infinite
		} else {
			w = c.wc/(c.u/c.p.Eta) + c.p.WAI
		}
		stage = 0
	} else {
		w = c.wc + c.p.WAI
	}
	c.w = min(max(w, c.p.WMin), c.p.WInit)
	if commit {
		c.incStage = stage
		c.wc = c.w
	}
}

func (c *window) state(committed bool) State {
	return State{
		U: c.u, W: c.w, Wc: c.wc,
		Rate:     c.w * 8e9 / c.t,
		IncStage: c.incStage, UpdateWc: committed,
	}
}

// Params returns the resolved parameters (WInit and WAI filled in).
func (c *window) Params() Params { return c.p }

// State returns the current state without an update; UpdateWc is false.
func (c *window) State() State { return c.state(false) }
