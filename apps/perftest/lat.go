package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rocelab/rocelab/qp"
)

// latency runs the latency tests' main sequences (send_lat.c, write_lat.c,
// read_lat.c).
func (r *run) latency() (Result, error) {
	cfg := r.cfg
	var res Result
	if cfg.Test == ReadLat && !cfg.Client() {
		// The target of the reads takes no part in the run: it waits for the close.
		r.m.close(r.my[0])
		return res, nil
	}
	if cfg.ByDuration {
		fmt.Fprint(r.out, resultFmtLatDur)
	} else {
		fmt.Fprint(r.out, resultFmtLat)
	}
	for _, size := range r.sizes() {
		r.size = size
		var ts []uint64
		var err error
		switch cfg.Test {
		case SendLat:
			// The receives are posted for each size, then a barrier, so that the
			// client does not send before the server's receives are there.
			rx := r.newRecvRing()
			if err := r.postRecvs(rx); err != nil {
				return res, err
			}
			if err := r.barrier(); err != nil {
				return res, err
			}
			ts, err = r.runIterLatSend(rx)
		case WriteLat:
			ts, err = r.runIterLatWrite()
		case ReadLat:
			ts, err = r.runIterLat()
		}
		if err != nil {
			return res, err
		}
		r.reportLat(&res, ts)
	}
	fmt.Fprint(r.out, resultLine)
	if cfg.Test == WriteLat {
		r.awaitPeerExit()
		return res, nil
	}
	r.m.close(r.my[0])
	return res, nil
}

// peerExitWait bounds awaitPeerExit: a -D peer stops within its own run's time of ours.
const peerExitWait = 10 * time.Second

// awaitPeerExit ends ib_write_lat, which has no closing handshake: its peer may still
// have a write in flight when this side is done (with -D, the side whose time runs out
// first stops writing; the other sends one more when its time is up, as perftest
// does). If this side's QP went away first, the peer's write would never be
// acknowledged (rxe then retransmits it for good), so the QP is kept until the peer
// has closed its socket, its run over, or until peerExitWait.
func (r *run) awaitPeerExit() {
	if tc, ok := r.m.c.(*net.TCPConn); ok {
		tc.CloseWrite() // a rocelab peer waits for this side the same way
	}
	r.m.c.SetReadDeadline(time.Now().Add(peerExitWait))
	io.Copy(io.Discard, r.m.c)
}

// rttFactor is how many one-way trips a sample spans: READ measures the round trip.
func (r *run) rttFactor() int {
	if r.cfg.Test == ReadLat {
		return 1
	}
	return 2
}

func (r *run) reportLat(res *Result, ts []uint64) {
	cfg := r.cfg
	if cfg.ByDuration {
		rep := latDurReport(r.size, r.sampled, r.dur.window(), r.rttFactor())
		printLatDurLine(r.out, rep)
		res.LatDur = append(res.LatDur, rep)
		return
	}
	rep, unsorted, sorted := latReport(r.size, cfg.Iters, ts, r.rttFactor())
	if cfg.Unsorted {
		printSamples(r.out, unsorted)
	}
	if cfg.Histogram {
		printSamples(r.out, sorted)
	}
	if cfg.Unsorted || cfg.Histogram {
		fmt.Fprint(r.out, resultLine+resultFmtLat)
	}
	printLatLine(r.out, rep)
	res.Lat = append(res.Lat, rep)
}

// runIterLatSend is run_iter_lat_send: the client sends first; each side waits for a
// message, then sends one. A receive is reposted only while iters are still to come,
// so none is left over for the next size.
func (r *run) runIterLatSend(rx *recvRing) ([]uint64, error) {
	cfg := r.cfg
	iters := uint64(cfg.Iters)
	mod := uint64(cfg.CQMod)
	ts := make([]uint64, cfg.Iters)
	w := r.newSendWR(0) // QP 0, always from and to the start of the buffers
	w.signal(false)
	wc := make([]qp.WC, 1)
	var scnt, rcnt uint64
	r.sampled = 0
	first := true
	for scnt < iters || rcnt < iters || (cfg.ByDuration && r.dur.current() != stateEnd) {
		if (rcnt < iters || cfg.ByDuration) && !(scnt < 1 && cfg.Client()) {
			for {
				n, err := r.poll(r.recvCQ, wc, r.side())
				if err != nil {
					return nil, err
				}
				if cfg.ByDuration && r.dur.current() == stateEnd {
					break
				}
				if n == 0 {
					continue
				}
				if first {
					if cfg.ByDuration {
						r.dur.begin()
					}
					first = false
				}
				rcnt++
				if cfg.ByDuration && r.dur.current() == stateSample {
					r.sampled++
				}
				if cfg.ByDuration || rcnt+uint64(cfg.RxDepth) <= iters {
					if err := rx.post(0); err != nil {
						return nil, fmt.Errorf("Couldn't post recv: rcnt=%d: %w", rcnt, err)
					}
				}
				break
			}
		}
		if scnt < iters || (cfg.ByDuration && r.dur.current() != stateEnd) {
			if !cfg.ByDuration {
				ts[scnt] = r.now()
			}
			scnt++
			signalled := scnt%mod == 0 || (!cfg.ByDuration && scnt == iters)
			if signalled {
				w.signal(true)
			}
			if cfg.ByDuration && r.dur.current() == stateEnd {
				break
			}
			if err := w.post(r.qps[0]); err != nil {
				return nil, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
			if signalled {
				if err := r.waitSend(); err != nil {
					return nil, err
				}
				w.signal(false)
			}
		}
	}
	return ts, nil
}

// waitSend polls the send CQ until the signalled send completes.
func (r *run) waitSend() error {
	wc := make([]qp.WC, 1)
	for {
		n, err := r.poll(r.sendCQ, wc, r.side())
		if err != nil || n > 0 {
			return err
		}
	}
}

// runIterLatWrite is run_iter_lat_write: the server writes first; each side waits
// until the peer's write of iteration k has put k in the last byte of its buffer,
// then writes k+1 into the peer's.
func (r *run) runIterLatWrite() ([]uint64, error) {
	cfg := r.cfg
	iters := uint64(cfg.Iters)
	ts := make([]uint64, cfg.Iters)
	w := r.newSendWR(0) // QP 0, always from and to the start of the buffers
	buf := r.mr.Bytes()
	postOff := r.size - 1
	pollOff := len(r.qps)*r.stride + r.size - 1
	var scnt, ccnt, rcnt uint64
	r.sampled = 0
	if cfg.ByDuration {
		r.dur.begin()
	}
	for scnt < iters || ccnt < iters || rcnt < iters || (cfg.ByDuration && r.dur.current() != stateEnd) {
		if (rcnt < iters || cfg.ByDuration) && !(scnt < 1 && !cfg.Client()) {
			rcnt++
			for loadByte(buf, pollOff) != byte(rcnt) && !(cfg.ByDuration && r.dur.current() == stateEnd) {
				if err := r.idle(); err != nil {
					return nil, err
				}
			}
		}
		if scnt < iters || cfg.ByDuration {
			if !cfg.ByDuration {
				ts[scnt] = r.now()
			}
			scnt++
			buf[postOff] = byte(scnt)
			if err := w.post(r.qps[0]); err != nil {
				return nil, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
			}
		}
		if cfg.ByDuration && r.dur.current() == stateEnd {
			break
		}
		if ccnt < iters || cfg.ByDuration {
			if err := r.waitSend(); err != nil {
				return nil, err
			}
			ccnt++
			if cfg.ByDuration && r.dur.current() == stateSample {
				r.sampled++
			}
		}
	}
	return ts, nil
}

// runIterLat is run_iter_lat, ib_read_lat's client: one READ at a time.
func (r *run) runIterLat() ([]uint64, error) {
	cfg := r.cfg
	iters := uint64(cfg.Iters)
	ts := make([]uint64, cfg.Iters)
	w := r.newSendWR(0) // QP 0, always from and to the start of the buffers
	var scnt uint64
	r.sampled = 0
	if cfg.ByDuration {
		r.dur.begin()
	}
	for scnt < iters || (cfg.ByDuration && r.dur.current() != stateEnd) {
		if !cfg.ByDuration {
			ts[scnt] = r.now()
			scnt++
		}
		if err := w.post(r.qps[0]); err != nil {
			return nil, fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
		}
		if cfg.ByDuration && r.dur.current() == stateEnd {
			break
		}
		if err := r.waitSend(); err != nil {
			return nil, err
		}
		if cfg.ByDuration && r.dur.current() == stateSample {
			r.sampled++
		}
	}
	return ts, nil
}

// loadByte reads b[i] with an atomic load of its aligned word: the RNIC writes the
// page from another process.
func loadByte(b []byte, i int) byte {
	w := (*uint32)(unsafe.Pointer(&b[i&^3]))
	return byte(atomic.LoadUint32(w) >> (8 * (i & 3)))
}
