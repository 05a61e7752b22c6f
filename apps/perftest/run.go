// Package perftest implements perftest's ib_write_bw, ib_read_bw, ib_send_bw,
// ib_atomic_bw, ib_write_lat, ib_read_lat and ib_send_lat (4.5-0.17) over a rocelab
// soft-RNIC's verbs service, with perftest's out-of-band exchange without -R, its
// sequence of synchronisation steps and its reports, so that they interoperate with
// the real tools on a kernel rxe peer and print what those print.
//
// The exchange (TCP, port 18515; the client writes first at every step and the server
// answers with as many bytes): the 16-byte version, the cycle-buffer and cache-line
// sizes (4-byte big-endian ints), the 2-byte MTU message (the smaller MTU wins), then
// 108-byte key messages: one per QP, then more as barriers. How many, and where they
// fall between the runs, depends on the test; the sequences below were taken from
// perftest's sources and checked against captures of perftest 4.5-0.17 on rxe:
//
//	write/read/atomic_bw  per QP; connect; per QP; barrier; run (-b: barrier first);
//	                      barrier and the five 8-byte report values (-b: the values
//	                      right after the run); close
//	send_bw               per QP; connect; barrier; per QP; for each size: receives
//	                      posted, barrier, run, (-b: report values), (-a: barrier); close
//	send_lat              per QP; connect; two barriers; for each size: receives
//	                      posted, barrier, run; close
//	write_lat, read_lat   per QP; connect; three barriers; the runs; close (write_lat:
//	                      none: each side closes its socket)
//
// where close is ctx_close_connection: one more key message and "done\0" each way.
package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rocelab/rocelab/apps/device"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

// Result is what a run printed: the bandwidth lines, or the latency lines.
type Result struct {
	BW     []BWReport
	Lat    []LatReport
	LatDur []LatDurReport
}

// pollBatch is perftest's CTX_POLL_BATCH.
const pollBatch = 16

type run struct {
	ctx    context.Context
	cfg    Config
	out    io.Writer // perftest's stdout
	errOut io.Writer // perftest's stderr

	vc             *verbs.Context
	pd             *verbs.PD
	mr             *verbs.MR
	sendCQ, recvCQ *verbs.CQ          // recvCQ is sendCQ except in the SEND tests
	channel        *verbs.CompChannel // -e: both CQs' completion channel
	qps            []*verbs.QP
	ahs            []*verbs.AH // UD: one per QP
	my, rem        []KeyMsg

	sgid     roce.GID
	sgidIx   int      // the GID's index in the device's table
	gidIdx   int      // the index as rxe numbers it, which the header shows
	portMTU  roce.MTU // the port's active MTU
	mtu      roce.MTU // the MTU of the run
	outReads int

	cycle, cacheLine int // perftest's cycle buffer and cache line, the larger of both sides'
	stride           int // one QP's buffer: max(message, cycle buffer), cache-line aligned
	size             int // the message size of the current run

	m       *comm
	epoch   time.Time
	dur     *durationClock
	sampled uint64 // a -D latency run's count in the sample window
	spins   int
}

// Run runs the tool: the server if cfg.ServerName is "", else the client. out gets
// what perftest prints on stdout; errOut, when not nil, its messages on stderr.
func Run(ctx context.Context, cfg Config, out, errOut io.Writer) (Result, error) {
	if errOut == nil {
		errOut = io.Discard
	}
	r := &run{ctx: ctx, cfg: cfg, out: out, errOut: errOut, epoch: time.Now(), size: cfg.Size}
	for _, n := range cfg.notices {
		fmt.Fprint(out, n)
	}
	if err := r.openDevice(); err != nil {
		return Result{}, err
	}
	defer r.vc.Close()
	if err := r.connectTCP(); err != nil {
		return Result{}, err
	}
	defer r.m.c.Close()
	defer context.AfterFunc(ctx, func() { r.m.c.Close() })()
	if err := r.xchgSys(); err != nil {
		return Result{}, err
	}
	if cfg.Conn == qp.UD && r.size > int(r.mtu) {
		if cfg.All {
			fmt.Fprintf(errOut, " Max msg size in UD is MTU %d\n Changing to this MTU\n", int(r.mtu))
		}
		r.size = int(r.mtu)
	}
	printTestInfo(out, r.cfg, testInfo{mtu: int(r.mtu), gidIdx: r.gidIdx, outReads: r.outReads})
	if err := r.init(); err != nil {
		return Result{}, err
	}
	if err := r.setup(); err != nil {
		return Result{}, err
	}
	r.dur = newDurationClock(cfg, r.now)
	if cfg.Test.Latency() {
		return r.latency()
	}
	return r.bandwidth()
}

// now is get_cycles: nanoseconds since the run began, never 0.
func (r *run) now() uint64 { return uint64(time.Since(r.epoch)) + 1 }

// openDevice opens the verbs service and checks what perftest's check_link checks:
// the GID, inline data, the outstanding reads.
func (r *run) openDevice() error {
	cfg := r.cfg
	vc, err := device.Open(cfg.Dev, cfg.VerbsAddr)
	if err != nil {
		return fmt.Errorf(" Unable to find the Infiniband/RoCE device: %w", err)
	}
	r.vc = vc
	fail := func(err error) error { vc.Close(); return err }
	table, err := device.GIDTable(vc)
	if err != nil {
		return fail(err)
	}
	// perftest takes GID index 0 on Ethernet, rxe's fe80:: GID, which rocelab devices
	// do not have: without -x the IPv4 GID is used, else the IPv6 one.
	r.gidIdx = cfg.GIDIdx
	if r.gidIdx < 0 {
		r.gidIdx = 1
		if _, _, err := device.RxeIndex(table, 1); err != nil {
			r.gidIdx = 2
		}
	}
	if r.sgid, r.sgidIx, err = device.RxeIndex(table, r.gidIdx); err != nil {
		return fail(err)
	}
	if r.portMTU, err = device.PortMTU(vc); err != nil {
		return fail(err)
	}
	if cfg.InlineAsked {
		fmt.Fprint(r.out, resultLine)
		fmt.Fprint(r.errOut, "Device not recognized to implement inline feature. Disabling it\n")
	}
	r.outReads = 1
	if v := cfg.Test.verb(); v == verbRead || v == verbAtomic {
		dev, err := vc.QueryDevice()
		if err != nil {
			return fail(err)
		}
		r.outReads = dev.MaxQPRdAtom
		if cfg.OutReads > dev.MaxQPRdAtom {
			fmt.Fprint(r.out, resultLine)
			fmt.Fprintf(r.errOut, " Number of outstanding reads is above max = %d\n Changing to that max value\n", dev.MaxQPRdAtom)
		} else if cfg.OutReads > 0 {
			r.outReads = cfg.OutReads
		}
	}
	return nil
}

func (r *run) connectTCP() error {
	cfg := r.cfg
	if cfg.Client() {
		var d net.Dialer
		c, err := d.DialContext(r.ctx, "tcp", net.JoinHostPort(cfg.ServerName, strconv.Itoa(cfg.Port)))
		if err != nil {
			return fmt.Errorf("Couldn't connect to %s:%d: %w\n Unable to init the socket connection", cfg.ServerName, cfg.Port, err)
		}
		r.m = &comm{c: c, client: true}
		return nil
	}
	fmt.Fprint(r.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp4", ":"+strconv.Itoa(cfg.Port)); err != nil {
			return fmt.Errorf("Couldn't listen to port %d: %w", cfg.Port, err)
		}
	}
	stop := context.AfterFunc(r.ctx, func() { ln.Close() })
	c, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		return fmt.Errorf("Couldn't accept: %w\n Unable to init the socket connection", err)
	}
	r.m = &comm{c: c}
	return nil
}

// xchgSys is exchange_versions, check_sys_data and check_mtu: each side takes the
// larger cycle buffer and cache line and the smaller MTU.
func (r *run) xchgSys() error {
	v := EncodeVersion(VersionString)
	theirs, err := r.m.xchg(v[:])
	if err != nil {
		return fmt.Errorf("Couldn't exchange versions: %w", err)
	}
	if s := strings.TrimRight(string(theirs), "\x00"); !strings.HasPrefix(s, "5.") && !strings.HasPrefix(s, "6.") {
		fmt.Fprintf(r.errOut, " Warning: the peer runs perftest version %q, this is %s\n", s, VersionString)
	}
	vals := []int{CycleBuffer, CacheLine}
	for i, x := range vals {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(x))
		rb, err := r.m.xchg(b[:])
		if err != nil {
			return fmt.Errorf(" Failed to exchange %s data between server and client: %w", [...]string{"Page Size", "Cache Line Size"}[i], err)
		}
		vals[i] = max(x, int(binary.BigEndian.Uint32(rb)))
	}
	r.cycle, r.cacheLine = vals[0], vals[1]
	r.setMTU()
	mm := EncodeMTU(r.mtu)
	b, err := r.m.xchg(mm[:])
	if err != nil {
		return fmt.Errorf(" Failed to exchange data between server and clients: %w", err)
	}
	if rm, err := DecodeMTU(b); err == nil && rm < r.mtu {
		r.mtu = rm
	}
	return nil
}

// setMTU is perftest's set_mtu: the port's active MTU, or -m if the port allows it.
func (r *run) setMTU() {
	r.mtu = r.portMTU
	if r.cfg.MTU == 0 {
		return
	}
	m := roce.MTU(r.cfg.MTU)
	switch {
	case r.cfg.MTU > 0xffff || !m.Valid():
		fmt.Fprintf(r.errOut, " Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - %d\n", r.cfg.MTU, r.portMTU.Enum())
	case m > r.portMTU:
		fmt.Fprintf(r.out, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", r.portMTU.Enum())
	default:
		r.mtu = m
	}
}

// inc is perftest's INC: n rounded up to the cache line.
func (r *run) inc(n int) int { return (n + r.cacheLine - 1) / r.cacheLine * r.cacheLine }

// sendAddr and recvAddr are the two halves of the buffer (perftest's layout): each
// QP sends from its part of the first half and offers the same part of the second to
// its peer (its VAddr), where RDMA writes land and receives are placed.
func (r *run) sendAddr(i int) uint64 { return r.mr.Addr() + uint64(i*r.stride) }
func (r *run) recvAddr(i int) uint64 { return r.mr.Addr() + uint64((len(r.qps)+i)*r.stride) }

// recvBuf is where QP i's receives start: UD leaves room for the 40-byte GRH in
// front of the payload, which stays cache-line aligned.
func (r *run) recvBuf(i int) uint64 {
	if r.cfg.Conn == qp.UD {
		return r.recvAddr(i) + uint64(r.cacheLine-grhSize)
	}
	return r.recvAddr(i)
}

// init is ctx_init and set_up_connection: the buffer, CQs, QPs in INIT, key messages.
func (r *run) init() error {
	cfg, vc := r.cfg, r.vc
	var err error
	if r.pd, err = vc.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	v := cfg.Test.verb()
	r.stride = r.inc(max(r.size, r.cycle))
	total := 2 * cfg.QPs * r.stride
	if cfg.Conn == qp.UD {
		total += r.cacheLine
	}
	access := qp.AccessLocalWrite
	qpAccess := qp.Access(0)
	switch v {
	case verbWrite:
		access |= qp.AccessRemoteWrite
		qpAccess = qp.AccessRemoteWrite
	case verbRead:
		access |= qp.AccessRemoteRead
		qpAccess = qp.AccessRemoteRead
	case verbAtomic:
		access |= qp.AccessRemoteAtomic
		qpAccess = qp.AccessRemoteAtomic
	case verbSend:
		qpAccess = qp.AccessRemoteWrite | qp.AccessLocalWrite
	}
	if r.mr, err = vc.RegMR(r.pd, total, access); err != nil {
		return fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	if cfg.Events {
		if r.channel, err = vc.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	if r.sendCQ, err = vc.CreateCQ(cfg.TxDepth*cfg.QPs, r.channel); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	r.recvCQ = r.sendCQ
	if v == verbSend {
		if r.recvCQ, err = vc.CreateCQ(cfg.RxDepth*cfg.QPs, r.channel); err != nil {
			return fmt.Errorf("Couldn't create a receiver CQ: %w", err)
		}
	}
	if cfg.Events {
		for _, cq := range []*verbs.CQ{r.sendCQ, r.recvCQ} {
			if err := cq.ReqNotifyCQ(false); err != nil {
				return fmt.Errorf("Couldn't request CQ notification: %w", err)
			}
		}
	}
	for range cfg.QPs {
		x, err := vc.CreateQP(r.pd, verbs.QPInitAttr{Type: cfg.Conn, SendCQ: r.sendCQ, RecvCQ: r.recvCQ,
			Cap: ibv.QPCap{MaxSendWR: cfg.TxDepth, MaxRecvWR: cfg.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fmt.Errorf(" Unable to create QP: %w", err)
		}
		r.qps = append(r.qps, x)
		a := qp.Attr{State: qp.StateInit, Port: uint8(cfg.IBPort)}
		mask := qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort
		if cfg.Conn == qp.UD {
			a.QKey, mask = udQKey, mask|qp.AttrQKey
		} else {
			a.AccessFlags, mask = qpAccess, mask|qp.AttrAccessFlags
		}
		if err := vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
	}
	for i, x := range r.qps {
		r.my = append(r.my, KeyMsg{OutReads: uint16(r.outReads), QPN: uint32(x.QPN()), PSN: rand.Uint32() & 0xffffff,
			RKey: r.mr.RKey(), VAddr: r.recvAddr(i), GID: r.sgid})
	}
	return nil
}

// setupRounds is the sequence of key messages perftest 4.5-0.17 exchanges after the
// first round and the move to RTR/RTS, before its first run (from captures of the
// real tools): the BW tests repeat the round, a message per QP, and add a barrier —
// ib_send_bw with the barrier first — and the latency tests (one QP) have two or three
// more messages. The peer takes a repeated message as the QP's again (perftest
// overwrites its remote address with it), so each QP's must come in its place.
func (r *run) setupRounds() []KeyMsg {
	switch r.cfg.Test {
	case SendLat:
		return []KeyMsg{r.my[0], r.my[0]}
	case WriteLat, ReadLat:
		return []KeyMsg{r.my[0], r.my[0], r.my[0]}
	case SendBW:
		return append([]KeyMsg{r.my[0]}, r.my...)
	}
	return append(append([]KeyMsg(nil), r.my...), r.my[0])
}

// setup prints the addresses, exchanges the key messages, connects the QPs and
// passes the barriers that follow.
func (r *run) setup() error {
	v := r.cfg.Test.verb()
	for _, k := range r.my {
		printDest(r.out, v, "local", k)
	}
	r.rem = make([]KeyMsg, len(r.my))
	for i, k := range r.my {
		rk, err := r.m.handShake(k)
		if err != nil {
			return err
		}
		r.rem[i] = rk
		printDest(r.out, v, "remote", rk)
	}
	if r.rem[0].GID.IsIPv4() != r.sgid.IsIPv4() {
		return errors.New("\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n")
	}
	if err := r.connectQPs(); err != nil {
		return fmt.Errorf("%w\n Unable to Connect the HCA's through the link", err)
	}
	for _, k := range r.setupRounds() {
		if _, err := r.m.handShake(k); err != nil {
			return err
		}
	}
	fmt.Fprint(r.out, resultLine)
	return nil
}

// connectQPs is ctx_connect: RTR and RTS with perftest's attributes, and UD's address
// handles. (perftest leaves a one-way bandwidth server's QPs in RTR; here they go to
// RTS as well, which the peer cannot see.)
func (r *run) connectQPs() error {
	cfg, vc := r.cfg, r.vc
	for i, x := range r.qps {
		d := r.rem[i]
		// perftest asks for hop limit 0xff; rxe puts its default TTL, 64, on the wire
		// regardless, as rocelab does with 0.
		av := qp.AddressVector{DGID: d.GID, SGID: r.sgid, TrafficClass: uint8(cfg.TrafficClass)}
		a := qp.Attr{State: qp.StateRTR}
		mask := qp.AttrState
		if cfg.Conn != qp.UD {
			a.AV, a.PathMTU, a.DestQPN, a.RQPSN = av, r.mtu, roce.QPN(d.QPN), roce.PSN(d.PSN)
			mask |= qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
			if cfg.Conn == qp.RC {
				a.MaxDestRdAtomic, a.MinRNRTimer = uint8(r.my[i].OutReads), 12
				mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
			}
		}
		if err := retryUnresolved(func() error { return vc.ModifyQP(x, &a, mask) }); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", x.QPN(), err)
		}
		a = qp.Attr{State: qp.StateRTS, SQPSN: roce.PSN(r.my[i].PSN)}
		mask = qp.AttrState | qp.AttrSQPSN
		if cfg.Conn == qp.RC {
			a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = uint8(cfg.QPTimeout), 7, 7, uint8(d.OutReads)
			mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
		}
		if err := vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %w", err)
		}
		if cfg.Conn == qp.UD {
			var ah *verbs.AH
			err := retryUnresolved(func() (err error) {
				ah, err = vc.CreateAH(r.pd, ibv.AHAttr{DGID: d.GID, SGIDIndex: r.sgidIx, TrafficClass: uint8(cfg.TrafficClass)})
				return err
			})
			if err != nil {
				return fmt.Errorf("Failed to create AH for UD: %w", err)
			}
			r.ahs = append(r.ahs, ah)
		}
	}
	return nil
}

// retryUnresolved retries while the peer's MAC is being resolved: rxe waits for the
// neighbour inside modify-QP and create-AH, rocelab's device asks and says so.
func retryUnresolved(f func() error) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := f()
		if err == nil || !errors.Is(err, ibv.ErrUnresolved) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// barrier is a key-message handshake between the runs.
func (r *run) barrier() error {
	_, err := r.m.handShake(r.my[0])
	return err
}

// sizes are the message sizes of the run: -a sweeps 2 .. 2^23, UD 2 .. the MTU.
func (r *run) sizes() []int {
	if !r.cfg.All {
		return []int{r.size}
	}
	top := MaxSize
	if r.cfg.Conn == qp.UD {
		top = int(r.mtu)
	}
	var s []int
	for n := 2; n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// poll polls a CQ once, as perftest's loops do, and checks the completions' status.
func (r *run) poll(cq *verbs.CQ, wcs []qp.WC, side string) (int, error) {
	n, err := cq.PollCQ(wcs)
	if err != nil {
		return 0, fmt.Errorf("poll CQ failed %w", err)
	}
	for _, wc := range wcs[:n] {
		if wc.Status != qp.WCSuccess {
			return 0, fmt.Errorf(" Completion with error at %s\n Failed status %d: wr_id %d syndrom 0x%x (%s)",
				side, int(wc.Status), wc.WRID, wc.VendorErr, wc.Status)
		}
	}
	if n == 0 {
		if r.channel != nil {
			return 0, r.awaitEvent()
		}
		return 0, r.idle()
	}
	return n, nil
}

// eventWait bounds one wait for a CQ event, so that a -e loop still notices the end
// of a -D run or a peer that stopped sending.
const eventWait = 100 * time.Millisecond

// awaitEvent is perftest's ctx_notify_events for -e, after a poll found the CQ empty:
// it sleeps until a completion raises an event on the channel (or eventWait passes),
// acknowledges it and re-arms that CQ; the caller polls again. Every CQ stays armed
// between polls, so a completion that lands after the empty poll has already raised
// its event and the wait returns at once.
func (r *run) awaitEvent() error {
	ctx, cancel := context.WithTimeout(r.ctx, eventWait)
	defer cancel()
	cq, err := r.channel.GetCQEvent(ctx)
	switch {
	case err == nil:
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil
	default:
		return fmt.Errorf("Failed to get cq_event: %w", err)
	}
	cq.AckCQEvents(1)
	if err := cq.ReqNotifyCQ(false); err != nil {
		return fmt.Errorf("Couldn't request CQ notification: %w", err)
	}
	return nil
}

// idle is an empty turn of a busy-polling loop: it lets the verbs client's and other
// goroutines run (the loops never sleep, as perftest's don't) and notices a cancelled
// context.
func (r *run) idle() error {
	r.spins++
	if r.spins%4096 == 0 && r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	runtime.Gosched()
	return nil
}

// side names the machine in completion errors, as perftest's NOTIFY_COMP_ERROR does.
func (r *run) side() string {
	if r.cfg.Client() {
		return "client"
	}
	return "server"
}

// postRecvs is ctx_set_recv_wqes: rx_depth receives on every QP, for messages of the
// current size (and a GRH with UD), stepping through the cycle buffer in BW tests.
func (r *run) postRecvs(rx *recvRing) error {
	for i := range r.qps {
		for range r.cfg.RxDepth {
			if err := rx.post(i); err != nil {
				return fmt.Errorf("Couldn't post recv Qp = %d: %w", i, err)
			}
		}
		rx.reset(i)
	}
	return nil
}

// recvRing places a QP's receives in its half of the buffer.
type recvRing struct {
	r       *run
	length  int
	step    int // 0: every receive at the start
	per     int // receives per cycle buffer
	cursors []int
}

func (r *run) newRecvRing() *recvRing {
	length := r.size
	if r.cfg.Conn == qp.UD {
		length += grhSize
	}
	rx := &recvRing{r: r, length: length, cursors: make([]int, len(r.qps))}
	if !r.cfg.Test.Latency() && length <= r.cycle/2 {
		rx.step = r.inc(r.size)
		rx.per = r.cycle / rx.step
	}
	return rx
}

func (rx *recvRing) post(i int) error {
	r := rx.r
	addr := r.recvBuf(i)
	if rx.step > 0 {
		addr += uint64(rx.cursors[i] % rx.per * rx.step)
		rx.cursors[i]++
	}
	return r.qps[i].PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{{Addr: addr, Length: uint32(rx.length), LKey: r.mr.LKey()}}})
}

func (rx *recvRing) reset(i int) { rx.cursors[i] = 0 }

// sendWR is ctx_set_send_wqes for QP i: the WR of the test's operation, stepping
// through the cycle buffer (on both sides) in BW tests when messages fit twice.
type sendWR struct {
	wr          qp.SendWR
	local, rem  uint64 // the first addresses
	step, per   int
	posted      int
	stepsRemote bool
}

func (r *run) newSendWR(i int) *sendWR {
	cfg := r.cfg
	s := &sendWR{local: r.sendAddr(i), rem: r.rem[i].VAddr}
	s.wr = qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: s.local, Length: uint32(r.size), LKey: r.mr.LKey()}}}
	switch cfg.Test.verb() {
	case verbSend:
		s.wr.Opcode = qp.WRSend
		if cfg.Conn == qp.UD {
			s.wr.AH, s.wr.RemoteQPN, s.wr.RemoteQKey = r.ahs[i].AV(), r.rem[i].QPN, udQKey
		}
	case verbWrite:
		s.wr.Opcode = qp.WRWrite
	case verbRead:
		s.wr.Opcode = qp.WRRead
	case verbAtomic:
		s.wr.Opcode = qp.WRFetchAdd
		s.wr.CompareAdd = 1 // ATOMIC_ADD_VALUE
		if cfg.Atomic == CmpAndSwap {
			s.wr.Opcode, s.wr.CompareAdd, s.wr.Swap = qp.WRCompareSwap, 0, 0 // ATOMIC_SWAP_VALUE
		}
	}
	if s.wr.Opcode != qp.WRSend {
		s.wr.RemoteAddr, s.wr.RKey = s.rem, r.rem[i].RKey
		s.stepsRemote = true
	}
	if !cfg.Test.Latency() && r.size <= r.cycle/2 {
		s.step = r.inc(r.size)
		s.per = r.cycle / s.step
	}
	return s
}

// post posts the WR and moves its addresses on (increase_loc_addr, increase_rem_addr).
func (s *sendWR) post(x *verbs.QP) error {
	if err := x.PostSend(&s.wr); err != nil {
		return err
	}
	s.posted++
	if s.step > 0 {
		off := uint64(s.posted % s.per * s.step)
		s.wr.SGL[0].Addr = s.local + off
		if s.stepsRemote {
			s.wr.RemoteAddr = s.rem + off
		}
	}
	return nil
}

func (s *sendWR) signal(on bool) {
	if on {
		s.wr.Flags |= qp.SendSignaled
	} else {
		s.wr.Flags &^= qp.SendSignaled
	}
}
