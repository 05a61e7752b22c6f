package hpcc

// Prober is the reference RoCEv2 variant of sender-based HPCC++: instead of telemetry
// in every data packet and ACK, the sender sends one telemetry-request probe per base
// RTT per flow while data is in flight, and each telemetry response drives one
// committing update. There is no fast react between responses, so the window changes
// once per RTT.
//
// A Prober is not safe for concurrent use.
type Prober struct {
	window
	lastProbe int64
	probed    bool
}

// NewProber returns a Prober starting at W = Wc = W_init, U = 1, stage 0.
func NewProber(p Params) (*Prober, error) {
	w, err := newWindow(p)
	if err != nil {
		return nil, err
	}
	return &Prober{window: w}, nil
}

// ProbeDue reports whether a probe should be sent at now (ns): the flow has data in
// flight and no probe was sent in the last base RTT. A lost response therefore delays
// the next update by at most one RTT instead of stalling the flow.
func (p *Prober) ProbeDue(now int64, inflight bool) bool {
	return inflight && (!p.probed || now-p.lastProbe >= p.p.BaseRTT.Nanoseconds())
}

// ProbeSent records that a probe left at now.
func (p *Prober) ProbeSent(now int64) {
	p.lastProbe, p.probed = now, true
}

// OnResponse processes one telemetry response. The first response, and the first
// after a path change, only records the telemetry; every later one commits
// (ComputeWind(MeasureInflight(resp), true)), since responses arrive once per RTT.
// hops is not retained.
func (p *Prober) OnResponse(hops []Hop) State {
	if !p.comparable(hops) {
		p.store(hops)
		return p.state(false)
	}
	p.measureInflight(hops)
	p.computeWind(true)
	p.store(hops)
	return p.state(true)
}
