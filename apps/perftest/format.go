package perftest

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/apps/device"
	"github.com/rocelab/rocelab/qp"
)

// perftest 4.5-0.17's output formats (perftest_parameters.h), as printf strings.
const (
	resultLine = "---------------------------------------------------------------------------------------\n"

	resultFmtMB  = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	resultFmtGb  = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
	resultFmtLat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	// With -D the latency tests report the average and the transactions per second.
	resultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average\n"

	reportFmt       = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	reportFmtExt    = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f\n" // --report_gbits below 0.1 Gb/s
	reportFmtLat    = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"
	reportFmtLatDur = " %-7d       %d            %-7.2f        %-7.2f\n"
)

// cfloat prints as C's printf does: glibc writes a NaN from an invalid operation as
// "-nan" (perftest's t_stdev comes out so when its integer arithmetic overflows).
type cfloat float64

func (f cfloat) Format(s fmt.State, verb rune) {
	if !math.IsNaN(float64(f)) {
		fmt.Fprintf(s, fmt.FormatString(s, verb), float64(f))
		return
	}
	text := "-nan"
	w, ok := s.Width()
	if !ok || w <= len(text) {
		io.WriteString(s, text)
	} else if s.Flag('-') {
		io.WriteString(s, text+strings.Repeat(" ", w-len(text)))
	} else {
		io.WriteString(s, strings.Repeat(" ", w-len(text))+text)
	}
}

// altHex is C's "%#0*x": "0x" counted in the width, and no prefix for zero.
func altHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", width, 0)
	}
	return "0x" + fmt.Sprintf("%0*x", max(width-2, 0), v)
}

// connName is perftest's connStr.
func connName(t qp.Type) string {
	switch t {
	case qp.UC:
		return "UC"
	case qp.UD:
		return "UD"
	}
	return "RC"
}

// testInfo is what ctx_print_test_info shows besides the Config.
type testInfo struct {
	mtu      int
	gidIdx   int
	outReads int
}

// printTestInfo is ctx_print_test_info (4.5-0.17's lines, rocelab's values).
func printTestInfo(w io.Writer, cfg Config, info testInfo) {
	t := cfg.Test
	v := t.verb()
	title := v.String() + " "
	if v == verbAtomic {
		title += cfg.Atomic.String() + " "
	}
	if t.Latency() {
		title += "Latency "
	} else {
		if cfg.Bidir {
			title += "Bidirectional "
		}
		title += "BW "
	}
	fmt.Fprint(w, resultLine)
	fmt.Fprintf(w, "                    %sTest\n", title)
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", deviceName(cfg.Dev))
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", cfg.QPs)
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : OFF\n", connName(cfg.Conn))
	fmt.Fprint(w, " PCIe relax order: OFF\n ibv_wr* API     : OFF\n")
	if cfg.Client() || cfg.Bidir {
		fmt.Fprintf(w, " TX depth        : %d\n", cfg.TxDepth)
	}
	if v == verbSend && (!cfg.Client() || cfg.Bidir) {
		fmt.Fprintf(w, " RX depth        : %d\n", cfg.RxDepth)
	}
	if !t.Latency() {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", cfg.CQMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n Link type       : Ethernet\n", info.mtu)
	fmt.Fprintf(w, " GID index       : %d\n", info.gidIdx)
	if v == verbRead || v == verbAtomic {
		fmt.Fprintf(w, " Outstand reads  : %d\n", info.outReads)
	} else {
		fmt.Fprint(w, " Max inline data : 0[B]\n")
	}
	fmt.Fprint(w, " rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n")
	fmt.Fprint(w, resultLine)
}

// deviceName is the device as perftest names it: -d as given, else the first device.
func deviceName(dev string) string {
	if dev != "" {
		return dev
	}
	return device.Name
}

// printDest is ctx_print_pingpong_data: the QP's address line and its GID.
func printDest(w io.Writer, v verb, side string, k KeyMsg) {
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s", side, altHex(uint64(k.LID), 4), altHex(uint64(k.QPN), 6), altHex(uint64(k.PSN), 6))
	if v == verbRead {
		fmt.Fprintf(w, " OUT %s", altHex(uint64(k.OutReads), 4))
	}
	if v == verbRead || v == verbWrite {
		fmt.Fprintf(w, " RKey %s VAddr %s", altHex(uint64(k.RKey), 8), altHex(k.VAddr, 16))
	}
	var b strings.Builder
	for i, x := range k.GID {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02d", x)
	}
	fmt.Fprintf(w, "\n GID: %s\n", b.String())
}

// printBWHeader is the bandwidth table's header (RESULT_FMT or RESULT_FMT_G).
func printBWHeader(w io.Writer, gbits bool) {
	if gbits {
		fmt.Fprint(w, resultFmtGb)
	} else {
		fmt.Fprint(w, resultFmtMB)
	}
}

// printBWLine is print_full_bw_report's line. With --report_gbits, averages below
// 0.1 Gb/s get six decimals (REPORT_FMT_EXT).
func printBWLine(w io.Writer, rep BWReport, gbits bool) {
	format := reportFmt
	if gbits && rep.BWAvg < 0.1 {
		format = reportFmtExt
	}
	fmt.Fprintf(w, format, rep.Size, rep.Iters, cfloat(rep.BWPeak), cfloat(rep.BWAvg), cfloat(rep.MsgRate))
}

// printLatLine is print_report_lat's line.
func printLatLine(w io.Writer, r LatReport) {
	fmt.Fprintf(w, reportFmtLat, r.Size, r.Iters, cfloat(r.Min), cfloat(r.Max), cfloat(r.Typical), cfloat(r.Avg),
		cfloat(r.Stdev), cfloat(r.P99), cfloat(r.P999))
}

// printLatDurLine is print_report_lat_duration's line.
func printLatDurLine(w io.Writer, r LatDurReport) {
	fmt.Fprintf(w, reportFmtLatDur, r.Size, r.Iters, cfloat(r.Avg), cfloat(r.TPS))
}

// printSamples is -U and -H: "#, usec" and one "%d, %g" line per sample.
func printSamples(w io.Writer, us []float64) {
	fmt.Fprint(w, "#, usec\n")
	for i, x := range us {
		fmt.Fprintf(w, "%d, %s\n", i+1, gFormat(x))
	}
}

// gFormat is C's %g: six significant digits, trailing zeros dropped.
func gFormat(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
