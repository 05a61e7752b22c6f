package hpcc

// Sender is the draft's sender-based HPCC++ for one flow: the NIC feeds it the
// telemetry echoed in every ACK (NewAck, pseudocode lines 25–31) and paces the flow at
// the returned rate with at most W bytes in flight. Every ACK reacts (fast react), but
// the reference window Wc is committed at most once per RTT: when the ACK covers data
// sent after the previous commit.
//
// A Sender is not safe for concurrent use; it belongs to its QP's event loop.
type Sender struct {
	window
	lastUpdateSeq uint64
}

// NewSender returns a Sender starting at W = Wc = W_init, U = 1, stage 0.
func NewSender(p Params) (*Sender, error) {
	w, err := newWindow(p)
	if err != nil {
		return nil, err
	}
	return &Sender{window: w}, nil
}

// NewAck processes one ACK. seq is the cumulative number of bytes the ACK
// acknowledges, sndNxt the number of bytes sent so far (both on the same monotonic
// 64-bit scale; the caller unwraps PSNs), hops the echoed telemetry, first hop first.
//
// The first ACK, and the first after a path change (different hop count or switch
// ports), only records the telemetry and sets lastUpdateSeq = sndNxt: per-hop deltas
// need two samples of the same hops. Otherwise it measures U, computes W, and commits
// Wc when seq > lastUpdateSeq. hops is not retained: NewAck copies what it keeps, and it
// does not allocate once it has seen the longest path.
func (s *Sender) NewAck(seq, sndNxt uint64, hops []Hop) State {
	if !s.comparable(hops) {
		s.store(hops)
		s.lastUpdateSeq = sndNxt
		return s.state(false)
	}
	s.measureInflight(hops)
	commit := seq > s.lastUpdateSeq
	s.computeWind(commit)
	if commit {
		s.lastUpdateSeq = sndNxt
	}
	s.store(hops)
	return s.state(commit)
}
