package qp

// NextDeadline returns the time at which the QP needs OnTimer, or Never.
func (q *QP) NextDeadline() int64 { return min(q.comp.rtoDeadline, q.req.rnrUntil) }

// OnTimer runs the timers due at now: the end of an RNR wait resumes transmission, and
// the transport timer starts a go-back-N retry (or fails the oldest WQE with
// RETRY_EXC_ERR when retry_cnt is spent). Calling it early is harmless.
func (q *QP) OnTimer(now int64) {
	if now >= q.req.rnrUntil {
		q.req.rnrUntil = Never
	}
	if now >= q.comp.rtoDeadline {
		q.comp.rtoDeadline = Never
		if q.state != StateRTS && q.state != StateSQD || !q.comp.psn.Before(q.req.highPSN) {
			return
		}
		q.ctr.Timeouts++
		if !q.spendRetry() {
			return
		}
		q.comp.retrying = true
		q.resumeFrom(q.comp.psn)
	}
}

// rto returns the transport timeout of the timeout attribute: 4.096 µs × 2^timeout
// (IBTA 9.7.6.1.3), in nanoseconds.
func rto(timeout uint8) int64 { return 4096 << timeout }

// rnrTimerNS is IBTA table 45 (the RNR NAK timer field), in nanoseconds: code 0 is
// 655.36 ms, codes 1..31 run from 0.01 ms to 491.52 ms.
var rnrTimerNS = [32]int64{
	655_360_000, 10_000, 20_000, 30_000, 40_000, 60_000, 80_000, 120_000,
	160_000, 240_000, 320_000, 480_000, 640_000, 960_000, 1_280_000, 1_920_000,
	2_560_000, 3_840_000, 5_120_000, 7_680_000, 10_240_000, 15_360_000, 20_480_000, 30_720_000,
	40_960_000, 61_440_000, 81_920_000, 122_880_000, 163_840_000, 245_760_000, 327_680_000, 491_520_000,
}

func rnrTimeout(code uint8) int64 { return rnrTimerNS[code&31] }
