// Package pingpong implements rdma-core's libibverbs examples ibv_rc_pingpong,
// ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong (rdma-core 44) over a
// rocelab soft-RNIC's verbs service, with the same flags, the same out-of-band TCP
// exchange and the same output, so that they interoperate with the real tools on a
// kernel rxe peer.
//
// The exchange (TCP, port 18515 by default, the server binding 0.0.0.0):
//
//  1. the client connects and writes its address message(s): 52 bytes each,
//     "LLLL:QQQQQQ:PPPPPP:" + the GID as 32 hex digits + NUL (srq_pingpong: 256 of
//     them, the entries past -q all zeros);
//  2. the server reads them, moves its QP(s) to RTR and RTS, and writes its own;
//  3. the client reads them, writes "done\0" and connects its QP(s); both close.
package pingpong

//lint:file-ignore ST1005 error messages reproduce rdma-core's and perftest's wording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/rocelab/rocelab/apps/device"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

const (
	recvWRID = 1 // PINGPONG_RECV_WRID
	sendWRID = 2 // PINGPONG_SEND_WRID

	udQKey  = 0x11111111
	grhSize = 40
)

// Result is what a run measured.
type Result struct {
	Bytes    int64
	Elapsed  time.Duration
	Iters    int
	Mbps     float64
	UsecIter float64
	Invalid  int // pages that failed -c validation
}

type pingpong struct {
	cfg    Config
	out    io.Writer
	vc     *verbs.Context
	ch     *verbs.CompChannel
	pd     *verbs.PD
	mr     *verbs.MR
	cq     *verbs.CQ
	srq    *verbs.SRQ
	qps    []*verbs.QP
	ah     *verbs.AH
	my     []Dest
	rem    []Dest
	sgid   roce.GID
	sgidIx int
	routs  int

	recvWR qp.RecvWR
	sendWR qp.SendWR
}

// Run runs the example: the server if cfg.ServerName is "", else the client. It
// prints what rdma-core prints to out and returns the measurement.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	p := &pingpong{cfg: cfg, out: out}
	vc, err := device.Open(cfg.Dev, cfg.VerbsAddr)
	if err != nil {
		return Result{}, err
	}
	defer vc.Close()
	p.vc = vc
	if cfg.IBPort != 1 {
		return Result{}, fmt.Errorf("Unable to query port info for port %d (the device has port 1)", cfg.IBPort)
	}
	if err := p.init(); err != nil {
		return Result{}, err
	}
	if cfg.Kind == SRQ {
		p.routs = p.postRecv(cfg.RxDepth)
	} else {
		p.routs = p.postRecv(cfg.RxDepth)
	}
	if p.routs < cfg.RxDepth {
		return Result{}, fmt.Errorf("Couldn't post receive (%d)", p.routs)
	}
	if cfg.Events {
		if err := p.cq.ReqNotifyCQ(false); err != nil {
			return Result{}, fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
	}
	if cfg.GIDIdx >= 0 {
		table, err := device.GIDTable(vc)
		if err != nil {
			return Result{}, err
		}
		if p.sgid, p.sgidIx, err = device.RxeIndex(table, cfg.GIDIdx); err != nil {
			return Result{}, err
		}
	}
	p.my = make([]Dest, len(p.qps))
	for i, x := range p.qps {
		p.my[i] = Dest{QPN: uint32(x.QPN()), PSN: rand.Uint32() & 0xffffff, GID: p.sgid}
		sep := ","
		if cfg.Kind == UD {
			sep = ":" // ud_pingpong prints "PSN 0x%06x: GID"
		}
		fmt.Fprintf(out, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n",
			p.my[i].LID, p.my[i].QPN, p.my[i].PSN, sep, gidString(p.my[i].GID))
	}
	if cfg.ServerName != "" {
		err = p.clientExchange(ctx)
	} else {
		err = p.serverExchange(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	for i := range p.qps {
		d := p.rem[i]
		fmt.Fprintf(out, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", d.LID, d.QPN, d.PSN, gidString(d.GID))
	}
	if cfg.ServerName != "" {
		if err := p.connect(); err != nil {
			return Result{}, err
		}
	}
	return p.loop(ctx)
}

func gidString(g roce.GID) string { return netip.AddrFrom16(g).String() }

func (p *pingpong) init() error {
	cfg, vc := p.cfg, p.vc
	var err error
	if cfg.Kind == UD {
		mtu, err := device.PortMTU(vc)
		if err != nil {
			return err
		}
		if cfg.Size > int(mtu) {
			return fmt.Errorf("Requested size larger than port MTU (%d)", int(mtu))
		}
	}
	if cfg.Events {
		if p.ch, err = vc.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if p.pd, err = vc.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	bufSize := cfg.Size
	if cfg.Kind == UD {
		bufSize += grhSize
	}
	if p.mr, err = vc.RegMR(p.pd, bufSize, qp.AccessLocalWrite); err != nil {
		return fmt.Errorf("Couldn't register MR: %w", err)
	}
	if cfg.Kind != SRQ {
		b := p.mr.Bytes()
		for i := range b {
			b[i] = 0x7b // rdma-core fills the buffer with 0x7b (srq_pingpong: zeros)
		}
	}
	cqe, nqp := cfg.RxDepth+1, 1
	if cfg.Kind == SRQ {
		cqe, nqp = cfg.RxDepth+cfg.NumQP, cfg.NumQP
	}
	if p.cq, err = vc.CreateCQ(cqe, p.ch); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if cfg.Kind == SRQ {
		if p.srq, err = vc.CreateSRQ(p.pd, ibv.SRQInitAttr{MaxWR: cfg.RxDepth, MaxSGE: 1}); err != nil {
			return fmt.Errorf("Couldn't create SRQ: %w", err)
		}
	}
	typ := map[Kind]qp.Type{RC: qp.RC, UC: qp.UC, UD: qp.UD, SRQ: qp.RC}[cfg.Kind]
	for i := range nqp {
		at := verbs.QPInitAttr{Type: typ, SendCQ: p.cq, RecvCQ: p.cq, SRQ: p.srq,
			Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: cfg.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}
		if p.srq != nil {
			at.Cap.MaxRecvWR, at.Cap.MaxRecvSGE = 0, 0
		}
		x, err := vc.CreateQP(p.pd, at)
		if err != nil {
			if cfg.Kind == SRQ {
				return fmt.Errorf("Couldn't create QP[%d]: %w", i, err)
			}
			return fmt.Errorf("Couldn't create QP: %w", err)
		}
		p.qps = append(p.qps, x)
	}
	for i, x := range p.qps {
		a := qp.Attr{State: qp.StateInit, PKeyIndex: 0, Port: uint8(cfg.IBPort)}
		mask := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort
		if cfg.Kind == UD {
			a.QKey, mask = udQKey, mask|qp.AttrQKey
		} else {
			mask |= qp.AttrAccessFlags // qp_access_flags = 0
		}
		if err := vc.ModifyQP(x, &a, mask); err != nil {
			if cfg.Kind == SRQ {
				return fmt.Errorf("Failed to modify QP[%d] to INIT: %w", i, err)
			}
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
	}
	recvLen := cfg.Size
	if cfg.Kind == UD {
		recvLen += grhSize
	}
	p.recvWR = qp.RecvWR{WRID: recvWRID, SGL: []qp.SGE{{Addr: p.mr.Addr(), Length: uint32(recvLen), LKey: p.mr.LKey()}}}
	sendAddr := p.mr.Addr()
	if cfg.Kind == UD {
		sendAddr += grhSize
	}
	p.sendWR = qp.SendWR{WRID: sendWRID, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: sendAddr, Length: uint32(cfg.Size), LKey: p.mr.LKey()}}}
	return nil
}

// postRecv posts up to n receives and returns how many it posted (pp_post_recv).
func (p *pingpong) postRecv(n int) int {
	for i := range n {
		var err error
		if p.srq != nil {
			err = p.srq.PostSRQRecv(&p.recvWR)
		} else {
			err = p.qps[0].PostRecv(&p.recvWR)
		}
		if err != nil {
			return i
		}
	}
	return n
}

func (p *pingpong) postSend(i int) error {
	if p.cfg.Kind == UD {
		p.sendWR.AH, p.sendWR.RemoteQPN, p.sendWR.RemoteQKey = p.ah.AV(), p.rem[0].QPN, udQKey
	}
	// The SGL slice is copied into the ring by PostSend, so one WR serves every post.
	return p.qps[i].PostSend(&p.sendWR)
}

// connect is pp_connect_ctx: RTR and RTS with rdma-core's attributes (UD: RTR, RTS
// and the address handle).
func (p *pingpong) connect() error {
	cfg, vc := p.cfg, p.vc
	dest := p.rem[0] // srq_pingpong uses the first entry's GID for every QP
	if !dest.Global() {
		return fmt.Errorf("Failed to modify QP to RTR: the remote GID %s has no interface id, so no GRH would be used, and RoCE needs one: pass -g on both sides (-g 1 = IPv4)", gidString(dest.GID))
	}
	av := qp.AddressVector{DGID: dest.GID, SGID: p.sgid, HopLimit: 1}
	if cfg.Kind == UD {
		a := qp.Attr{State: qp.StateRTR}
		if err := vc.ModifyQP(p.qps[0], &a, qp.AttrState); err != nil {
			return fmt.Errorf("Failed to modify QP to RTR: %w", err)
		}
		a = qp.Attr{State: qp.StateRTS, SQPSN: roce.PSN(p.my[0].PSN)}
		if err := vc.ModifyQP(p.qps[0], &a, qp.AttrState|qp.AttrSQPSN); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %w", err)
		}
		ah, err := createAH(vc, p.pd, ibv.AHAttr{DGID: dest.GID, SGIDIndex: p.sgidIx, HopLimit: 1})
		if err != nil {
			return fmt.Errorf("Failed to create AH: %w", err)
		}
		p.ah = ah
		return nil
	}
	for i, x := range p.qps {
		d := p.rem[i]
		a := qp.Attr{State: qp.StateRTR, PathMTU: cfg.MTU, DestQPN: roce.QPN(d.QPN), RQPSN: roce.PSN(d.PSN), AV: av,
			MaxDestRdAtomic: 1, MinRNRTimer: 12}
		mask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
		if cfg.Kind != UC {
			mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		}
		if err := vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP%s to RTR: %w", qpIndex(cfg.Kind, i), err)
		}
		a = qp.Attr{State: qp.StateRTS, SQPSN: roce.PSN(p.my[i].PSN), Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
		mask = qp.AttrState | qp.AttrSQPSN
		if cfg.Kind != UC {
			mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
		}
		if err := vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP%s to RTS: %w", qpIndex(cfg.Kind, i), err)
		}
	}
	return nil
}

// createAH retries while the peer's MAC is being resolved (ErrUnresolved: the device
// asks the network meanwhile), as rxe waits for ARP inside ibv_create_ah.
func createAH(vc *verbs.Context, pd *verbs.PD, attr ibv.AHAttr) (*verbs.AH, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		ah, err := vc.CreateAH(pd, attr)
		if err == nil || !errors.Is(err, ibv.ErrUnresolved) || time.Now().After(deadline) {
			return ah, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func qpIndex(k Kind, i int) string {
	if k == SRQ {
		return "[" + strconv.Itoa(i) + "]"
	}
	return ""
}

func (p *pingpong) nmsg() int {
	if p.cfg.Kind == SRQ {
		return SRQMessages
	}
	return 1
}

func (p *pingpong) encodeMine() []byte {
	b := make([]byte, 0, p.nmsg()*MessageSize)
	for i := range p.nmsg() {
		var d Dest
		if i < len(p.my) {
			d = p.my[i]
		}
		m := d.Encode()
		b = append(b, m[:]...)
	}
	return b
}

func (p *pingpong) decodeTheirs(b []byte) error {
	p.rem = make([]Dest, p.nmsg())
	for i := range p.rem {
		d, err := DecodeDest(b[i*MessageSize : (i+1)*MessageSize])
		if err != nil {
			return err
		}
		p.rem[i] = d
	}
	return nil
}

// closeOnDone closes c when ctx ends, so blocking socket calls return.
func closeOnDone(ctx context.Context, c io.Closer) (stop func() bool) {
	return context.AfterFunc(ctx, func() { c.Close() })
}

func (p *pingpong) clientExchange(ctx context.Context) error {
	addr := net.JoinHostPort(p.cfg.ServerName, strconv.Itoa(p.cfg.Port))
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("Couldn't connect to %s:%d: %w", p.cfg.ServerName, p.cfg.Port, err)
	}
	defer c.Close()
	defer closeOnDone(ctx, c)()
	if _, err := c.Write(p.encodeMine()); err != nil {
		return fmt.Errorf("Couldn't send local address: %w", err)
	}
	buf := make([]byte, p.nmsg()*MessageSize)
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	if _, err := c.Write([]byte("done\x00")); err != nil {
		return fmt.Errorf("Couldn't read/write remote address: %w", err)
	}
	return p.decodeTheirs(buf)
}

func (p *pingpong) serverExchange(ctx context.Context) error {
	ln := p.cfg.Listener
	if ln == nil {
		var err error
		// rdma-core's server binds IPv4 only (0.0.0.0).
		if ln, err = net.Listen("tcp4", ":"+strconv.Itoa(p.cfg.Port)); err != nil {
			return fmt.Errorf("Couldn't listen to port %d: %w", p.cfg.Port, err)
		}
	}
	stop := closeOnDone(ctx, ln)
	c, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		return fmt.Errorf("accept() failed: %w", err)
	}
	defer c.Close()
	defer closeOnDone(ctx, c)()
	buf := make([]byte, p.nmsg()*MessageSize)
	if n, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("%d/%d: Couldn't read remote address: %w", n, len(buf), err)
	}
	if err := p.decodeTheirs(buf); err != nil {
		return err
	}
	if err := p.connect(); err != nil {
		return fmt.Errorf("Couldn't connect to remote QP: %w", err)
	}
	if _, err := c.Write(p.encodeMine()); err != nil {
		return fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	done := make([]byte, 5)
	if _, err := io.ReadFull(c, done); err != nil {
		return fmt.Errorf("Couldn't send/recv local address: %w", err)
	}
	return nil
}

// wait returns the next completions: busy-polling (the default) or, with -e, one
// event on the completion channel, re-arming, and one poll (which may find none).
func (p *pingpong) wait(ctx context.Context, wcs []qp.WC, events *int) (int, error) {
	if p.cfg.Events {
		cq, err := p.ch.GetCQEvent(ctx)
		if err != nil {
			return 0, fmt.Errorf("Failed to get cq_event: %w", err)
		}
		*events++
		if cq != p.cq {
			return 0, errors.New("CQ event for unknown CQ")
		}
		if err := p.cq.ReqNotifyCQ(false); err != nil {
			return 0, fmt.Errorf("Couldn't request CQ notification: %w", err)
		}
		n, err := p.cq.PollCQ(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll CQ failed: %w", err)
		}
		return n, nil
	}
	for spin := 1; ; spin++ {
		n, err := p.cq.PollCQ(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll CQ failed: %w", err)
		}
		if n > 0 {
			return n, nil
		}
		if spin%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		runtime.Gosched()
	}
}

func (p *pingpong) loop(ctx context.Context) (Result, error) {
	cfg := p.cfg
	pageSize := os.Getpagesize()
	buf := p.mr.Bytes()
	pending := make([]int, len(p.qps))
	client := cfg.ServerName != ""
	if client && cfg.Chk {
		// rdma-core writes i / page_size % sizeof(char) — always 0 — at each page start.
		for i := 0; i < cfg.Size; i += pageSize {
			buf[i] = 0
		}
	}
	for i := range p.qps {
		pending[i] = recvWRID
		if client {
			if err := p.postSend(i); err != nil {
				return Result{}, fmt.Errorf("Couldn't post send: %w", err)
			}
			pending[i] |= sendWRID
		}
		if cfg.Kind != SRQ {
			break
		}
	}
	start := time.Now()
	nwc, refill := 2, 1
	if cfg.Kind == SRQ {
		nwc, refill = cfg.NumQP+cfg.RxDepth, cfg.NumQP
	}
	wcs := make([]qp.WC, nwc)
	rcnt, scnt, events := 0, 0, 0
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		n, err := p.wait(ctx, wcs, &events)
		if err != nil {
			return Result{}, err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != qp.WCSuccess {
				return Result{}, fmt.Errorf("Failed status %s (%d) for wr_id %d", wc.Status, int(wc.Status), int(wc.WRID))
			}
			qi := 0
			if cfg.Kind == SRQ {
				qi = -1
				for i, x := range p.qps {
					if uint32(x.QPN()) == wc.QPNum {
						qi = i
					}
				}
				if qi < 0 {
					return Result{}, fmt.Errorf("Couldn't find QPN %06x", wc.QPNum)
				}
			}
			switch wc.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				p.routs--
				if p.routs <= refill {
					p.routs += p.postRecv(cfg.RxDepth - p.routs)
					if p.routs < cfg.RxDepth {
						return Result{}, fmt.Errorf("Couldn't post receive (%d)", p.routs)
					}
				}
				rcnt++
			default:
				return Result{}, fmt.Errorf("Completion for unknown wr_id %d", int(wc.WRID))
			}
			pending[qi] &^= int(wc.WRID)
			if scnt < cfg.Iters && pending[qi] == 0 {
				if err := p.postSend(qi); err != nil {
					return Result{}, fmt.Errorf("Couldn't post send: %w", err)
				}
				pending[qi] = recvWRID | sendWRID
			}
		}
	}
	elapsed := time.Since(start)
	var res Result
	if !client && cfg.Chk {
		for i := 0; i < cfg.Size; i += pageSize {
			if buf[i] != 0 {
				fmt.Fprintf(p.out, "invalid data in page %d\n", i/pageSize)
				res.Invalid++
			}
		}
	}
	// rdma-core computes in a float: usec = seconds*1e6 + microseconds.
	usec := float64(float32(elapsed.Microseconds()))
	bytes := int64(cfg.Size) * int64(cfg.Iters) * 2
	res.Bytes, res.Elapsed, res.Iters = bytes, elapsed, cfg.Iters
	res.Mbps, res.UsecIter = float64(bytes)*8/usec, usec/float64(cfg.Iters)
	fmt.Fprintf(p.out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, res.Mbps)
	fmt.Fprintf(p.out, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.Iters, usec/1e6, res.UsecIter)
	if p.cq != nil && events > 0 {
		p.cq.AckCQEvents(events)
	}
	return res, nil
}
