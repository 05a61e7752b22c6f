package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"fmt"

	"github.com/rocelab/rocelab/qp"
)

// bandwidth runs the BW tests' main sequences (write_bw.c, read_bw.c, atomic_bw.c,
// send_bw.c).
func (r *run) bandwidth() (Result, error) {
	cfg := r.cfg
	var res Result
	printBWHeader(r.out, cfg.ReportGbits)
	if cfg.Test.verb() == verbSend {
		return r.sendBandwidth()
	}
	if !cfg.Client() && !cfg.Bidir {
		// The passive side of WRITE, READ and atomics waits for the client's report.
		if err := r.barrier(); err != nil {
			return res, err
		}
		theirs, err := r.m.xchgReports(BWReport{})
		if err != nil {
			return res, err
		}
		printBWLine(r.out, theirs, cfg.ReportGbits)
		res.BW = append(res.BW, theirs)
		fmt.Fprint(r.out, resultLine)
		r.m.close(r.my[0])
		return res, nil
	}
	var mine, theirs BWReport
	for _, size := range r.sizes() {
		r.size = size
		if cfg.Bidir {
			if err := r.barrier(); err != nil {
				return res, err
			}
		}
		t, err := r.runIterBW()
		if err != nil {
			return res, err
		}
		if cfg.Bidir && cfg.All {
			// perftest ≥ 4.6 (the version it sends is 6.06) syncs after each size.
			if err := r.barrier(); err != nil {
				return res, err
			}
		}
		mine = bwReport(t, cfg.ReportGbits)
		if !cfg.Bidir {
			printBWLine(r.out, mine, cfg.ReportGbits)
			res.BW = append(res.BW, mine)
			continue
		}
		if theirs, err = r.m.xchgReports(mine); err != nil {
			return res, err
		}
		both := mine.sum(theirs)
		printBWLine(r.out, both, cfg.ReportGbits)
		res.BW = append(res.BW, both)
	}
	if cfg.Bidir && cfg.ReportBoth && !cfg.All {
		r.printBoth(mine, theirs)
	}
	fmt.Fprint(r.out, resultLine)
	if !cfg.Bidir {
		if err := r.barrier(); err != nil {
			return res, err
		}
		if _, err := r.m.xchgReports(mine); err != nil {
			return res, err
		}
	}
	r.m.close(r.my[0])
	return res, nil
}

// printBoth is --report-both: each direction's line under a header of its own.
func (r *run) printBoth(mine, theirs BWReport) {
	for i, rep := range []BWReport{mine, theirs} {
		fmt.Fprint(r.out, resultLine)
		fmt.Fprintf(r.out, "\n %s results: \n", [...]string{"Local", "Remote"}[i])
		fmt.Fprint(r.out, resultLine)
		printBWHeader(r.out, r.cfg.ReportGbits)
		printBWLine(r.out, rep, r.cfg.ReportGbits)
	}
}

// sendBandwidth is send_bw.c's sequence: the receiver posts its receives and both
// pass a barrier before each size, the report values are exchanged only with -b,
// and -a adds a barrier after each size.
func (r *run) sendBandwidth() (Result, error) {
	cfg := r.cfg
	var res Result
	var mine, theirs BWReport
	exchanged := false
	for _, size := range r.sizes() {
		r.size = size
		rx := r.newRecvRing()
		if !cfg.Client() || cfg.Bidir {
			if err := r.postRecvs(rx); err != nil {
				return res, err
			}
		}
		if err := r.barrier(); err != nil {
			return res, err
		}
		var t bwTimes
		var err error
		switch {
		case cfg.Bidir:
			t, err = r.runIterBi(rx)
		case cfg.Client():
			t, err = r.runIterBW()
		default:
			t, err = r.runIterBWServer(rx)
		}
		if err != nil {
			return res, err
		}
		mine = bwReport(t, cfg.ReportGbits)
		if !cfg.Bidir || cfg.ByDuration {
			printBWLine(r.out, mine, cfg.ReportGbits)
			res.BW = append(res.BW, mine)
		}
		if cfg.Bidir && !cfg.ByDuration {
			if theirs, err = r.m.xchgReports(mine); err != nil {
				return res, err
			}
			exchanged = true
			both := mine.sum(theirs)
			printBWLine(r.out, both, cfg.ReportGbits)
			res.BW = append(res.BW, both)
		}
		if cfg.All {
			if err := r.barrier(); err != nil {
				return res, err
			}
		}
	}
	if cfg.ReportBoth && exchanged && !cfg.All {
		r.printBoth(mine, theirs)
	}
	fmt.Fprint(r.out, resultLine)
	r.m.close(r.my[0])
	return res, nil
}

// newTimes allocates perftest's timestamp arrays for a bandwidth run.
func (r *run) newTimes() bwTimes {
	cfg := r.cfg
	t := bwTimes{size: r.size, iters: uint64(cfg.Iters), qps: len(r.qps), cqMod: cfg.CQMod,
		byDuration: cfg.ByDuration, noPeak: cfg.NoPeak}
	n := 1
	if !cfg.NoPeak {
		n = cfg.Iters * len(r.qps)
	}
	t.tposted, t.tcompleted = make([]uint64, n), make([]uint64, n)
	return t
}

// fillSendQueues is the posting half of run_iter_bw and run_iter_bi: every QP gets
// WRs until it has tx_depth in flight or has posted its iterations (with -D, until the
// run ends), one in cq_mod of them signalled, and the last; with the peak computed,
// each post's time goes to t.tposted.
func (r *run) fillSendQueues(t *bwTimes, wrs []*sendWR, scnt, ccnt []uint64, totscnt *uint64) error {
	cfg := r.cfg
	iters, mod := uint64(cfg.Iters), uint64(cfg.CQMod)
	for i, x := range r.qps {
		w := wrs[i]
		for (scnt[i] < iters || cfg.ByDuration) && scnt[i]-ccnt[i] < uint64(cfg.TxDepth) {
			if scnt[i]%mod == 0 && mod > 1 && !(scnt[i] == iters-1 && !cfg.ByDuration) {
				w.signal(false)
			}
			if !cfg.NoPeak {
				t.tposted[*totscnt] = r.now()
			}
			if cfg.ByDuration && r.dur.current() == stateEnd {
				break
			}
			if err := w.post(x); err != nil {
				return fmt.Errorf("Couldn't post send: qp %d scnt=%d: %w", i, scnt[i], err)
			}
			scnt[i]++
			*totscnt++
			if scnt[i]%mod == mod-1 || (!cfg.ByDuration && scnt[i] == iters-1) {
				w.signal(true)
			}
		}
	}
	return nil
}

// finish takes the counts and times of a -D run's sample window.
func (r *run) finish(t *bwTimes, sampled uint64) {
	if r.cfg.ByDuration {
		t.iters = sampled
		t.tposted[0], t.tcompleted[0] = r.dur.sampleStart, r.dur.sampleEnd
	}
}

// runIterBW is run_iter_bw: every QP keeps up to tx_depth WRs in flight, one in
// cq_mod of them signalled (and the last), until each has posted iters (or, with -D,
// until the run ends; what is in flight then is left).
func (r *run) runIterBW() (bwTimes, error) {
	cfg := r.cfg
	t := r.newTimes()
	nqp := len(r.qps)
	iters := uint64(cfg.Iters)
	totIters := iters * uint64(nqp)
	mod := uint64(cfg.CQMod)
	scnt, ccnt := make([]uint64, nqp), make([]uint64, nqp)
	wrs := make([]*sendWR, nqp)
	for i := range wrs {
		wrs[i] = r.newSendWR(i)
	}
	var totscnt, totccnt, sampled uint64
	wcs := make([]qp.WC, pollBatch)
	if cfg.ByDuration {
		r.dur.begin()
	}
	if !cfg.ByDuration && cfg.NoPeak {
		t.tposted[0] = r.now()
	}
	for totscnt < totIters || totccnt < totIters || (cfg.ByDuration && r.dur.current() != stateEnd) {
		if err := r.fillSendQueues(&t, wrs, scnt, ccnt, &totscnt); err != nil {
			return t, err
		}
		if totccnt < totIters || (cfg.ByDuration && totccnt < totscnt) {
			n, err := r.poll(r.sendCQ, wcs, r.side())
			if err != nil {
				return t, err
			}
			for _, wc := range wcs[:n] {
				i := wc.WRID
				ccnt[i] += mod
				totccnt += mod
				if !cfg.NoPeak {
					if totccnt >= totIters-1 {
						t.tcompleted[totIters-1] = r.now()
					} else {
						t.tcompleted[totccnt-1] = r.now()
					}
				}
				if cfg.ByDuration && r.dur.current() == stateSample {
					sampled += mod
				}
			}
		} else if err := r.idle(); err != nil {
			return t, err
		}
	}
	if !cfg.ByDuration && cfg.NoPeak {
		t.tcompleted[0] = r.now()
	}
	r.finish(&t, sampled)
	return t, nil
}

// runIterBWServer is run_iter_bw_server: ib_send_bw's receiver counts receives and
// reposts while more are to come (none are left over once iters have arrived).
func (r *run) runIterBWServer(rx *recvRing) (bwTimes, error) {
	cfg := r.cfg
	t := r.newTimes()
	nqp := len(r.qps)
	totIters := uint64(cfg.Iters) * uint64(nqp)
	rcntQP := make([]uint64, nqp)
	var rcnt, sampled uint64
	wcs := make([]qp.WC, pollBatch)
	first := true
	for rcnt < totIters || (cfg.ByDuration && r.dur.current() != stateEnd) {
		if cfg.ByDuration && r.dur.current() == stateEnd {
			break
		}
		n, err := r.poll(r.recvCQ, wcs, "server")
		if err != nil {
			return t, err
		}
		if n > 0 && first {
			r.firstRx(&t)
			first = false
		}
		for _, wc := range wcs[:n] {
			i := int(wc.WRID)
			rcntQP[i]++
			rcnt++
			if cfg.ByDuration && r.dur.current() == stateSample {
				sampled++
			}
			if cfg.ByDuration || rcntQP[i]+uint64(cfg.RxDepth) <= uint64(cfg.Iters) {
				if err := rx.post(i); err != nil {
					return t, fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %w", i, rcntQP[i], err)
				}
			}
		}
	}
	if !cfg.ByDuration {
		t.tcompleted[0] = r.now()
	}
	r.finish(&t, sampled)
	return t, nil
}

// firstRx is set_on_first_rx_packet: a receiver's clock starts with its first
// completion.
func (r *run) firstRx(t *bwTimes) {
	if r.cfg.ByDuration {
		r.dur.begin()
	} else if !r.cfg.Test.Latency() {
		t.tposted[0] = r.now()
	}
}

// runIterBi is run_iter_bi, ib_send_bw -b: both sides send and receive; the server
// starts sending at its first receive, so that the client's test has begun.
func (r *run) runIterBi(rx *recvRing) (bwTimes, error) {
	cfg := r.cfg
	t := r.newTimes()
	nqp := len(r.qps)
	iters := uint64(cfg.Iters)
	totIters := iters * uint64(nqp)
	mod := uint64(cfg.CQMod)
	scnt, ccnt, rcntQP := make([]uint64, nqp), make([]uint64, nqp), make([]uint64, nqp)
	wrs := make([]*sendWR, nqp)
	for i := range wrs {
		wrs[i] = r.newSendWR(i)
	}
	var totscnt, totccnt, totrcnt, sampled uint64
	rwcs, swcs := make([]qp.WC, cfg.RxDepth), make([]qp.WC, pollBatch)
	if cfg.NoPeak {
		t.tposted[0] = r.now()
	}
	beforeFirstRx := !cfg.Client()
	if cfg.Client() && cfg.ByDuration {
		r.dur.begin()
	}
	for (cfg.ByDuration && r.dur.current() != stateEnd) || totccnt < totIters || totrcnt < totIters {
		if !beforeFirstRx {
			if err := r.fillSendQueues(&t, wrs, scnt, ccnt, &totscnt); err != nil {
				return t, err
			}
		}
		n, err := r.poll(r.recvCQ, rwcs, r.side())
		if err != nil {
			return t, err
		}
		if n > 0 && beforeFirstRx {
			beforeFirstRx = false
			if cfg.ByDuration {
				r.dur.begin()
			}
		}
		for _, wc := range rwcs[:n] {
			i := int(wc.WRID)
			rcntQP[i]++
			totrcnt++
			if cfg.ByDuration && r.dur.current() == stateSample {
				sampled++
			}
			if cfg.ByDuration || rcntQP[i]+uint64(cfg.RxDepth) <= iters {
				if err := rx.post(i); err != nil {
					return t, fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %w", i, rcntQP[i], err)
				}
			}
		}
		n, err = r.poll(r.sendCQ, swcs, r.side())
		if err != nil {
			return t, err
		}
		for _, wc := range swcs[:n] {
			totccnt += mod
			ccnt[wc.WRID] += mod
			if !cfg.NoPeak {
				if !cfg.ByDuration && totccnt >= totIters-1 {
					t.tcompleted[totIters-1] = r.now()
				} else {
					t.tcompleted[totccnt-1] = r.now()
				}
			}
			if cfg.ByDuration && r.dur.current() == stateSample {
				sampled += mod
			}
		}
	}
	if cfg.NoPeak && !cfg.ByDuration {
		t.tcompleted[0] = r.now()
	}
	r.finish(&t, sampled)
	return t, nil
}
