// Package hpcc implements congestion control for rocelab's soft-RNICs as pure,
// deterministic state machines: HPCC++ (IETF draft-miao-tsv-hpcc) in its sender-based
// form (Sender, per-ACK), its receiver-based form (Receiver, Rx-HPCC), the reference
// RoCEv2 probe-per-RTT variant (Prober), and DCQCN as the baseline (ReactionPoint,
// NotificationPoint).
//
// Nothing here does I/O, starts goroutines or reads a clock. Instants are int64
// nanoseconds on the caller's clock (virtual or real; only differences matter) and
// configured durations are time.Duration. Windows are bytes (float64: the draft's
// W = Wc/(U/eta) + W_ai is real-valued and is kept so; callers round when they compare
// against a byte count), rates are bit/s (float64).
//
// The HPCC++ types share one window computation (the draft's MeasureInflight and
// ComputeWind, pseudocode lines 1–24); they differ only in when a computed window is
// committed as the new reference Wc. docs/hpcc.md describes the algorithm, every
// parameter, and where each preset departs from the draft.
package hpcc
