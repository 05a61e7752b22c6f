package hpcc

// Receiver is Rx-HPCC, the draft's receiver-based variant (NewINT, pseudocode lines
// 28–34): the receiver reads the telemetry in each data packet, runs the same window
// computation, and feeds W back to the sender at most once per base RTT.
//
// A Receiver is not safe for concurrent use.
type Receiver struct {
	window
	lastUpdateTime int64
}

// RxState is a Receiver update: the window state and whether to send it to the sender.
type RxState struct {
	State
	// SendAck reports that this update committed Wc and W must be fed back now.
	SendAck bool
}

// NewReceiver returns a Receiver starting at W = Wc = W_init, U = 1, stage 0.
func NewReceiver(p Params) (*Receiver, error) {
	w, err := newWindow(p)
	if err != nil {
		return nil, err
	}
	return &Receiver{window: w}, nil
}

// NewINT processes the telemetry of one data packet received at now (ns, caller's
// clock). The first packet, and the first after a path change, only records the
// telemetry and sets lastUpdateTime = now. Otherwise W is computed, and committed and
// fed back when now > lastUpdateTime + T. hops is not retained.
func (r *Receiver) NewINT(now int64, hops []Hop) RxState {
	if !r.comparable(hops) {
		r.store(hops)
		r.lastUpdateTime = now
		return RxState{State: r.state(false)}
	}
	r.measureInflight(hops)
	commit := now > r.lastUpdateTime+r.p.BaseRTT.Nanoseconds()
	r.computeWind(commit)
	if commit {
		r.lastUpdateTime = now
	}
	r.store(hops)
	return RxState{State: r.state(commit), SendAck: commit}
}
