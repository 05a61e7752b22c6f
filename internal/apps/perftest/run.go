// Package perftest implements perftest's ib_write_bw, ib_read_bw, ib_send_bw,
// ib_send_lat and ib_write_lat (4.5-0.17) over a rocelab soft-RNIC's verbs service,
// with perftest's out-of-band exchange without -R and its output table, so that they
// interoperate with the real tools on a kernel rxe peer.
//
// The exchange (TCP, port 18515; the client writes first at every step and the server
// answers with as many bytes): the 16-byte version, the cycle-buffer size and the
// cache-line size (4-byte big-endian ints), the 2-byte MTU message (the smaller MTU
// wins), a 108-byte key message per QP, the same again per QP after the QPs are
// connected, and one more as a barrier; after the test one barrier, the bandwidth
// report (five 8-byte big-endian values, bandwidth tests only), a last key-message
// handshake and "done\0" each way.
package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rocelab/rocelab/internal/apps/device"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/verbs"
	"github.com/rocelab/rocelab/roce"
)

const resultLine = "---------------------------------------------------------------------------------------\n"

// Result is what a run measured: one BWReport per size for bandwidth tests, or the
// latency figures (µs, one-way as perftest reports them).
type Result struct {
	BW  []BWReport
	Lat []LatReport
}

// LatReport is one latency line.
type LatReport struct {
	Size, Iters                              int
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
}

type run struct {
	cfg    Config
	out    io.Writer
	vc     *verbs.Context
	pd     *verbs.PD
	mr     *verbs.MR
	cq     *verbs.CQ
	qps    []*verbs.QP
	my     []KeyMsg
	rem    []KeyMsg
	sgid   roce.GID
	gidIdx int
	mtu    roce.MTU
	bufSz  int // per QP (latency: per half)
	m      *comm
}

// Run runs the tool: the server if cfg.ServerName is "", else the client.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	r := &run{cfg: cfg, out: out}
	vc, err := device.Open(cfg.Dev, cfg.VerbsAddr)
	if err != nil {
		return Result{}, err
	}
	defer vc.Close()
	r.vc = vc
	table, err := device.GIDTable(vc)
	if err != nil {
		return Result{}, err
	}
	r.gidIdx = cfg.GIDIdx
	if r.gidIdx < 0 { // perftest picks a RoCEv2 GID itself; prefer IPv4 as it does
		r.gidIdx = 1
		if _, _, err := device.RxeIndex(table, 1); err != nil {
			r.gidIdx = 2
		}
	}
	if r.sgid, _, err = device.RxeIndex(table, r.gidIdx); err != nil {
		return Result{}, err
	}
	portMTU, err := device.PortMTU(vc)
	if err != nil {
		return Result{}, err
	}
	r.mtu = portMTU
	if cfg.MTU != 0 && cfg.MTU < portMTU {
		r.mtu = cfg.MTU
	}
	if err := r.connectTCP(ctx); err != nil {
		return Result{}, err
	}
	defer r.m.c.Close()
	defer context.AfterFunc(ctx, func() { r.m.c.Close() })()
	if err := r.xchgSys(); err != nil {
		return Result{}, err
	}
	if err := r.init(); err != nil {
		return Result{}, err
	}
	r.printHeader()
	if err := r.setup(); err != nil {
		return Result{}, err
	}
	if cfg.Test.Latency() {
		return r.latency(ctx)
	}
	return r.bandwidth(ctx)
}

func (r *run) connectTCP(ctx context.Context) error {
	cfg := r.cfg
	if cfg.ServerName != "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(cfg.ServerName, strconv.Itoa(cfg.Port)))
		if err != nil {
			return fmt.Errorf("Couldn't connect to %s:%d: %w", cfg.ServerName, cfg.Port, err)
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
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, err := ln.Accept()
	stop()
	ln.Close()
	if err != nil {
		return fmt.Errorf("Couldn't accept: %w", err)
	}
	r.m = &comm{c: c}
	return nil
}

// xchgSys exchanges the version, the system data and the MTU.
func (r *run) xchgSys() error {
	v := EncodeVersion(VersionString)
	theirs, err := r.m.xchg(v[:])
	if err != nil {
		return fmt.Errorf("Couldn't exchange versions: %w", err)
	}
	if s := strings.TrimRight(string(theirs), "\x00"); !strings.HasPrefix(s, "5.") && !strings.HasPrefix(s, "6.") {
		fmt.Fprintf(r.out, " Warning: the peer runs perftest version %q, this is %s\n", s, VersionString)
	}
	for _, x := range []uint32{CycleBuffer, CacheLine} {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], x)
		if _, err := r.m.xchg(b[:]); err != nil {
			return fmt.Errorf("Couldn't exchange system data: %w", err)
		}
	}
	mm := EncodeMTU(r.mtu)
	b, err := r.m.xchg(mm[:])
	if err != nil {
		return fmt.Errorf("Couldn't exchange MTU: %w", err)
	}
	rm, err := DecodeMTU(b)
	if err != nil {
		return err
	}
	if rm < r.mtu {
		r.mtu = rm
	}
	return nil
}

func (r *run) init() error {
	cfg, vc := r.cfg, r.vc
	var err error
	if r.pd, err = vc.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	maxSize := cfg.Size
	if cfg.All {
		maxSize = MaxSize
		if cfg.Test.Latency() {
			maxSize = 1 << 23
		}
	}
	r.bufSz = max(maxSize, CycleBuffer)
	r.bufSz = (r.bufSz + CycleBuffer - 1) / CycleBuffer * CycleBuffer
	total := r.bufSz * cfg.QPs
	if cfg.Test == WriteLat {
		total = 2 * r.bufSz // a half we send from, a half the peer writes into
	}
	access := qp.AccessLocalWrite | qp.AccessRemoteWrite | qp.AccessRemoteRead
	if r.mr, err = vc.RegMR(r.pd, total, access); err != nil {
		return fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	cqe := cfg.TxDepth*cfg.QPs + cfg.RxDepth*cfg.QPs + 16
	if r.cq, err = vc.CreateCQ(cqe, nil); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	outReads := 1
	if cfg.Test == ReadBW {
		dev, err := vc.QueryDevice()
		if err != nil {
			return err
		}
		outReads = min(dev.MaxQPRdAtom, 16)
		if cfg.OutReads > 0 {
			outReads = min(cfg.OutReads, dev.MaxQPRdAtom)
		}
	}
	rx := 0
	if cfg.Test == SendBW || cfg.Test == SendLat {
		rx = cfg.RxDepth
	}
	for i := range cfg.QPs {
		x, err := vc.CreateQP(r.pd, verbs.QPInitAttr{Type: cfg.Conn, SendCQ: r.cq, RecvCQ: r.cq,
			Cap: rnic.QPCap{MaxSendWR: cfg.TxDepth, MaxRecvWR: max(rx, 1), MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fmt.Errorf("Couldn't create QP: %w", err)
		}
		a := qp.Attr{State: qp.StateInit, Port: 1, AccessFlags: access}
		if err := vc.ModifyQP(x, &a, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
		r.qps = append(r.qps, x)
		vaddr := r.mr.Addr() + uint64(i*r.bufSz)
		if cfg.Test == WriteLat {
			vaddr = r.mr.Addr() + uint64(r.bufSz)
		}
		r.my = append(r.my, KeyMsg{OutReads: uint16(outReads), QPN: uint32(x.QPN()), PSN: rand.Uint32() & 0xffffff,
			RKey: r.mr.RKey(), VAddr: vaddr, GID: r.sgid})
	}
	// Receives for the send tests are posted before the exchange, as perftest does.
	if rx > 0 {
		for i := range r.qps {
			for range rx {
				if err := r.postRecv(i); err != nil {
					return fmt.Errorf("Couldn't post receive: %w", err)
				}
			}
		}
	}
	return nil
}

func (r *run) postRecv(i int) error {
	return r.qps[i].PostRecv(&qp.RecvWR{WRID: uint64(i), SGL: []qp.SGE{{Addr: r.mr.Addr() + uint64(i*r.bufSz),
		Length: uint32(r.bufSz), LKey: r.mr.LKey()}}})
}

func (r *run) printHeader() {
	cfg := r.cfg
	w := r.out
	fmt.Fprint(w, resultLine)
	fmt.Fprintf(w, "                    %s\n", cfg.Test.title())
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", device.Name)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", cfg.QPs)
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : OFF\n", cfg.Conn)
	fmt.Fprintf(w, " PCIe relax order: OFF\n ibv_wr* API     : OFF\n")
	if cfg.Test == ReadBW {
		fmt.Fprintf(w, " TX depth        : %d\n Outstand reads  : %d\n", cfg.TxDepth, r.my[0].OutReads)
	} else if cfg.Test == SendBW || cfg.Test == SendLat {
		fmt.Fprintf(w, " TX depth        : %d\n RX depth        : %d\n", cfg.TxDepth, cfg.RxDepth)
	} else {
		fmt.Fprintf(w, " TX depth        : %d\n", cfg.TxDepth)
	}
	if !cfg.Test.Latency() {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", cfg.CQMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n Link type       : Ethernet\n GID index       : %d\n", int(r.mtu), r.gidIdx)
	fmt.Fprintf(w, " Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n")
	fmt.Fprint(w, resultLine)
}

// altHex is C's "%#0*x": no prefix for zero.
func altHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", width, 0)
	}
	return fmt.Sprintf("0x%0*x", max(width-2, 0), v)
}

func (r *run) printDest(side string, k KeyMsg) {
	w := r.out
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s", side, altHex(uint64(k.LID), 4), altHex(uint64(k.QPN), 6), altHex(uint64(k.PSN), 6))
	if r.cfg.Test == ReadBW {
		fmt.Fprintf(w, " OUT %s", altHex(uint64(k.OutReads), 4))
	}
	if r.cfg.Test != SendBW && r.cfg.Test != SendLat {
		fmt.Fprintf(w, " RKey %s VAddr %s", altHex(uint64(k.RKey), 8), altHex(k.VAddr, 16))
	}
	fmt.Fprintf(w, "\n GID: ")
	for i, b := range k.GID {
		if i > 0 {
			fmt.Fprint(w, ":")
		}
		fmt.Fprintf(w, "%02d", b)
	}
	fmt.Fprintln(w)
}

// setup exchanges the keys, connects the QPs and passes the barriers.
func (r *run) setup() error {
	cfg := r.cfg
	for _, k := range r.my {
		r.printDest("local", k)
	}
	r.rem = make([]KeyMsg, len(r.my))
	for i, k := range r.my {
		rk, err := r.m.handShake(k)
		if err != nil {
			return err
		}
		r.rem[i] = rk
		r.printDest("remote", rk)
	}
	fmt.Fprint(r.out, resultLine)
	if r.rem[0].GID.IsIPv4() != r.sgid.IsIPv4() {
		return fmt.Errorf("Local and remote GIDs are not of the same type (IPv4/IPv6): %s, %s", r.sgid, r.rem[0].GID)
	}
	for i, x := range r.qps {
		d := r.rem[i]
		a := qp.Attr{State: qp.StateRTR, PathMTU: r.mtu, DestQPN: roce.QPN(d.QPN), RQPSN: roce.PSN(d.PSN),
			AV: qp.AddressVector{DGID: d.GID, SGID: r.sgid, HopLimit: 1, TrafficClass: uint8(cfg.TOS)}}
		mask := qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN
		if cfg.Conn == qp.RC {
			a.MaxDestRdAtomic, a.MinRNRTimer = uint8(r.my[i].OutReads), 12
			mask |= qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer
		}
		if err := r.vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", x.QPN(), err)
		}
		a = qp.Attr{State: qp.StateRTS, SQPSN: roce.PSN(r.my[i].PSN)}
		mask = qp.AttrState | qp.AttrSQPSN
		if cfg.Conn == qp.RC {
			a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = uint8(cfg.QPTimeout), 7, 7, uint8(d.OutReads)
			mask |= qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic
		}
		if err := r.vc.ModifyQP(x, &a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %w", err)
		}
	}
	// The same messages once more per QP after ctx_connect, then a barrier after RTR
	// (rxe-peer README: measured against perftest 4.5-0.17).
	for _, k := range r.my {
		if _, err := r.m.handShake(k); err != nil {
			return err
		}
	}
	_, err := r.m.handShake(r.my[0])
	return err
}

func (r *run) sizes() []int {
	if !r.cfg.All {
		return []int{r.cfg.Size}
	}
	var s []int
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}

// poll busy-polls the CQ.
func (r *run) poll(ctx context.Context, wcs []qp.WC) (int, error) {
	for spin := 1; ; spin++ {
		n, err := r.cq.PollCQ(wcs)
		if err != nil {
			return 0, fmt.Errorf("poll CQ failed: %w", err)
		}
		if n > 0 {
			for _, wc := range wcs[:n] {
				if wc.Status != qp.WCSuccess {
					return 0, fmt.Errorf("Completion with error: Failed status %s (%d): wr_id %d syndrom 0x%x",
						wc.Status, int(wc.Status), wc.WRID, wc.VendorErr)
				}
			}
			return n, nil
		}
		if spin%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		runtime.Gosched()
	}
}

func (r *run) bwHeader() {
	if r.cfg.ReportGbits {
		fmt.Fprintln(r.out, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
	} else {
		fmt.Fprintln(r.out, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
	}
}

func (r *run) bwLine(rep BWReport) {
	fmt.Fprintf(r.out, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n", rep.Size, rep.Iters, rep.BWPeak, rep.BWAvg, rep.MsgRate)
}

func (r *run) bandwidth(ctx context.Context) (Result, error) {
	cfg := r.cfg
	var res Result
	client := cfg.ServerName != ""
	r.bwHeader()
	var last BWReport
	for _, size := range r.sizes() {
		var rep BWReport
		var err error
		switch {
		case client:
			rep, err = r.bwClient(ctx, size)
		case cfg.Test == SendBW:
			rep, err = r.bwRecv(ctx, size)
		default:
			continue // the passive side of WRITE and READ
		}
		if err != nil {
			return res, err
		}
		if cfg.Test == SendBW && cfg.All {
			// Each size ends with a barrier, so the receiver is ready for the next one.
			if _, err := r.m.handShake(r.my[0]); err != nil {
				return res, err
			}
		}
		if client || cfg.Test == SendBW {
			r.bwLine(rep)
			res.BW = append(res.BW, rep)
		}
		last = rep
	}
	if _, err := r.m.handShake(r.my[0]); err != nil {
		return res, err
	}
	theirs, err := r.m.xchgReports(last)
	if err != nil {
		return res, err
	}
	if !client && cfg.Test != SendBW {
		r.bwLine(theirs) // the passive side prints the active side's figures
		res.BW = append(res.BW, theirs)
	}
	fmt.Fprint(r.out, resultLine)
	r.m.close(r.my[0])
	return res, nil
}

func (r *run) report(size int, iters int, tposted, tcompleted []int64, start, end int64, nqp int) BWReport {
	unit := 1048576.0 // MB/sec in perftest is MiB/s
	if r.cfg.ReportGbits {
		unit = 1e9 / 8
	}
	dur := float64(end-start) / 1e9
	total := float64(size) * float64(iters) * float64(nqp)
	avg := total / dur / unit
	peak := avg
	if !r.cfg.NoPeak && len(tposted) > 0 {
		// perftest: the smallest time per message over any run of messages that ends
		// at a completion.
		opt := math.Inf(1)
		n, mod := len(tposted), r.cfg.CQMod
		step := max(1, n*(n/mod+1)/20_000_000)
		for i := 0; i < n; i += step {
			for j := ((i+1+mod-1)/mod)*mod - 1; j < n; j += mod {
				if t := float64(tcompleted[j]-tposted[i]) / float64(j-i+1); t < opt {
					opt = t
				}
			}
		}
		if opt > 0 && !math.IsInf(opt, 1) {
			// The timestamps are QP 0's; the QPs post in turn, so in QP 0's time per
			// message every QP sent one: perftest's counters span all QPs.
			peak = float64(size) * float64(nqp) / (opt / 1e9) / unit
		}
	}
	return BWReport{Size: uint64(size), Iters: uint64(iters), BWPeak: peak, BWAvg: avg, MsgRate: float64(iters*nqp) / dur / 1e6}
}

func now(t0 time.Time) int64 { return int64(time.Since(t0)) }

// bwClient runs WRITE, READ or SEND traffic of size bytes on every QP.
func (r *run) bwClient(ctx context.Context, size int) (BWReport, error) {
	cfg := r.cfg
	nqp := len(r.qps)
	iters := cfg.Iters
	var deadline time.Time
	mod := cfg.CQMod
	if cfg.Duration > 0 {
		iters, mod = math.MaxInt32, 1 // every WR signaled, so that stopping leaves no tail
	}
	var tposted, tcompleted []int64 // QP 0's, for the peak
	if cfg.Duration == 0 && !cfg.NoPeak {
		tposted, tcompleted = make([]int64, iters), make([]int64, iters)
	}
	scnt, ccnt := make([]int, nqp), make([]int, nqp)
	op := map[Test]qp.WROpcode{WriteBW: qp.WRWrite, ReadBW: qp.WRRead, SendBW: qp.WRSend}[cfg.Test]
	sgl := []qp.SGE{{Length: uint32(size), LKey: r.mr.LKey()}}
	wr := qp.SendWR{Opcode: op, SGL: sgl}
	wcs := make([]qp.WC, 64)
	cycle := max(size, CycleBuffer)
	t0 := time.Now()
	if cfg.Duration > 0 {
		deadline = t0.Add(cfg.Duration)
	}
	done := 0
	stopped := false
	for done < nqp {
		for i, x := range r.qps {
			for scnt[i] < iters && scnt[i]-ccnt[i] < cfg.TxDepth && !stopped {
				off := uint64((scnt[i] * size) % cycle)
				if size > CycleBuffer {
					off = 0
				}
				sgl[0].Addr = r.mr.Addr() + uint64(i*r.bufSz) + off
				wr.RemoteAddr, wr.RKey = r.rem[i].VAddr+off, r.rem[i].RKey
				wr.WRID = uint64(i)
				wr.Flags = 0
				if (scnt[i]+1)%mod == 0 || scnt[i]+1 == iters {
					wr.Flags = qp.SendSignaled
				}
				if i == 0 && tposted != nil {
					tposted[scnt[i]] = now(t0)
				}
				if err := x.PostSend(&wr); err != nil {
					return BWReport{}, fmt.Errorf("Couldn't post send: qp %d scnt=%d: %w", i, scnt[i], err)
				}
				scnt[i]++
			}
		}
		n, err := r.poll(ctx, wcs)
		if err != nil {
			return BWReport{}, err
		}
		t := now(t0)
		for _, wc := range wcs[:n] {
			i := int(wc.WRID)
			next := min(ccnt[i]+mod, scnt[i])
			if i == 0 && tcompleted != nil {
				for k := ccnt[i]; k < next; k++ {
					tcompleted[k] = t
				}
			}
			ccnt[i] = next
			if ccnt[i] == scnt[i] && (scnt[i] == iters || stopped) {
				done++
			}
		}
		if cfg.Duration > 0 && !stopped && time.Now().After(deadline) {
			stopped = true // stop posting; wait for what is outstanding
			for i := range r.qps {
				if ccnt[i] == scnt[i] {
					done++
				}
			}
		}
	}
	end := now(t0)
	if cfg.Duration > 0 {
		iters = ccnt[0]
	}
	return r.report(size, iters, tposted, tcompleted, 0, end, nqp), nil
}

// bwRecv is the receiving side of ib_send_bw.
func (r *run) bwRecv(ctx context.Context, size int) (BWReport, error) {
	cfg := r.cfg
	nqp := len(r.qps)
	wcs := make([]qp.WC, 64)
	total := cfg.Iters * nqp
	got := 0
	var t0 time.Time
	for got < total {
		n, err := r.poll(ctx, wcs)
		if err != nil {
			return BWReport{}, err
		}
		if got == 0 {
			t0 = time.Now()
		}
		for _, wc := range wcs[:n] {
			got++
			if err := r.postRecv(int(wc.WRID)); err != nil {
				return BWReport{}, fmt.Errorf("Couldn't post receive: %w", err)
			}
		}
	}
	end := int64(time.Since(t0))
	rep := r.report(size, cfg.Iters, nil, nil, 0, max(end, 1), nqp)
	return rep, nil
}

// loadByte reads b[i] with an atomic load of its aligned word: the RNIC writes the
// page from another process.
func loadByte(b []byte, i int) byte {
	w := (*uint32)(unsafe.Pointer(&b[i&^3]))
	return byte(atomic.LoadUint32(w) >> (8 * (i & 3)))
}

func (r *run) latency(ctx context.Context) (Result, error) {
	cfg := r.cfg
	var res Result
	client := cfg.ServerName != ""
	fmt.Fprintln(r.out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
	for _, size := range r.sizes() {
		if cfg.All && size > 1<<23 {
			break
		}
		var ts []int64
		var err error
		if cfg.Test == SendLat {
			ts, err = r.sendLat(ctx, size, client)
		} else {
			ts, err = r.writeLat(ctx, size, client)
		}
		if err != nil {
			return res, err
		}
		rep := latReport(size, cfg.Iters, ts)
		fmt.Fprintf(r.out, " %-7d %-10d       %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
			rep.Size, rep.Iters, rep.Min, rep.Max, rep.Typical, rep.Avg, rep.Stdev, rep.P99, rep.P999)
		res.Lat = append(res.Lat, rep)
		if cfg.All {
			if _, err := r.m.handShake(r.my[0]); err != nil {
				return res, err
			}
		}
	}
	fmt.Fprint(r.out, resultLine)
	r.m.close(r.my[0])
	return res, nil
}

// latReport computes perftest's latency line from the post timestamps: the deltas
// between consecutive posts are round trips, halved.
func latReport(size, iters int, ts []int64) LatReport {
	d := make([]float64, 0, len(ts))
	for i := 1; i < len(ts); i++ {
		d = append(d, float64(ts[i]-ts[i-1])/1e3/2)
	}
	if len(d) == 0 {
		return LatReport{Size: size, Iters: iters}
	}
	sort.Float64s(d)
	n := len(d)
	var sum float64
	for _, x := range d {
		sum += x
	}
	avg := sum / float64(n)
	var sq float64
	for _, x := range d {
		sq += (x - avg) * (x - avg)
	}
	pct := func(p float64) float64 { return d[min(n-1, max(0, int(math.Ceil(float64(n)*p))-1))] }
	return LatReport{Size: size, Iters: iters, Min: d[0], Max: d[n-1], Typical: d[n/2], Avg: avg,
		Stdev: math.Sqrt(sq / float64(n)), P99: pct(0.99), P999: pct(0.999)}
}

// sendLat: the client sends and waits for the answer; the server answers each
// message. Timestamps are taken at every post.
func (r *run) sendLat(ctx context.Context, size int, client bool) ([]int64, error) {
	iters := r.cfg.Iters
	ts := make([]int64, 0, iters)
	x := r.qps[0]
	wr := qp.SendWR{Opcode: qp.WRSend, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: r.mr.Addr(), Length: uint32(size), LKey: r.mr.LKey()}}}
	wcs := make([]qp.WC, 8)
	t0 := time.Now()
	scnt, rcnt, ccnt := 0, 0, 0
	post := func() error {
		ts = append(ts, now(t0))
		scnt++
		return x.PostSend(&wr)
	}
	if client {
		if err := post(); err != nil {
			return nil, err
		}
	}
	for rcnt < iters || ccnt < iters {
		n, err := r.poll(ctx, wcs)
		if err != nil {
			return nil, err
		}
		for _, wc := range wcs[:n] {
			if wc.Opcode == qp.WCRecv {
				rcnt++
				if err := r.postRecv(0); err != nil {
					return nil, err
				}
				if scnt < iters {
					if err := post(); err != nil {
						return nil, err
					}
				}
			} else {
				ccnt++
			}
		}
	}
	return ts, nil
}

// writeLat: each side writes size bytes into the other's buffer, the last byte
// carrying the iteration number, and waits for the peer's write to land in its own.
func (r *run) writeLat(ctx context.Context, size int, client bool) ([]int64, error) {
	iters := r.cfg.Iters
	ts := make([]int64, 0, iters)
	x := r.qps[0]
	buf := r.mr.Bytes()
	sendOff, pollOff := size-1, r.bufSz+size-1
	wr := qp.SendWR{Opcode: qp.WRWrite, Flags: qp.SendSignaled, SGL: []qp.SGE{{Addr: r.mr.Addr(), Length: uint32(size), LKey: r.mr.LKey()}},
		RemoteAddr: r.rem[0].VAddr, RKey: r.rem[0].RKey}
	wcs := make([]qp.WC, 8)
	t0 := time.Now()
	// The bytes at size-1 of both halves are untouched by smaller sizes (-a doubles the
	// size), so every size counts from 0.
	scnt, rcnt, ccnt := 0, 0, 0
	for scnt < iters || ccnt < iters || rcnt < iters {
		if rcnt < iters && !(scnt < 1 && client) { // the client writes first
			rcnt++
			want := byte(rcnt)
			for spin := 1; loadByte(buf, pollOff) != want; spin++ {
				if spin%4096 == 0 {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					runtime.Gosched()
				}
			}
		}
		if scnt < iters {
			ts = append(ts, now(t0))
			scnt++
			buf[sendOff] = byte(scnt)
			if err := x.PostSend(&wr); err != nil {
				return nil, err
			}
		}
		if ccnt < scnt {
			n, err := r.poll(ctx, wcs)
			if err != nil {
				return nil, err
			}
			ccnt += n
		}
	}
	return ts, nil
}
