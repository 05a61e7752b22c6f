package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/apps/getopt"
	"github.com/rocelab/rocelab/qp"
)

// Test selects the tool.
type Test int

// The tools.
const (
	WriteBW Test = iota
	ReadBW
	SendBW
	AtomicBW
	WriteLat
	ReadLat
	SendLat
)

// Program returns the tool's command name.
func (t Test) Program() string {
	return [...]string{"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat"}[t]
}

// Latency reports whether the tool is a latency test.
func (t Test) Latency() bool { return t >= WriteLat }

// verb is perftest's VerbType: the operation a test measures.
type verb int

const (
	verbSend verb = iota
	verbWrite
	verbRead
	verbAtomic
)

func (t Test) verb() verb {
	return [...]verb{verbWrite, verbRead, verbSend, verbAtomic, verbWrite, verbRead, verbSend}[t]
}

// String is perftest's testsStr: the first word of the header's title.
func (v verb) String() string { return [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}[v] }

// AtomicOp is the operation ib_atomic_bw measures (-A).
type AtomicOp int

// The atomic operations, in perftest's order.
const (
	CmpAndSwap AtomicOp = iota
	FetchAndAdd
)

// String returns the operation's name as perftest prints it.
func (a AtomicOp) String() string { return [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}[a] }

// Config is one run's parameters, after perftest's own adjustments (force_dependecies):
// the depths capped by the iterations, CQ moderation by the TX depth, and so on.
type Config struct {
	Test       Test
	ServerName string // "" = the server
	Port       int
	Dev        string
	IBPort     int
	MTU        int // -m as given; 0 = the port's active MTU (checked against the port as perftest's set_mtu does)
	Size       int
	Iters      int // iterations mode; 0 with -D, where it is the count taken in the sample window
	All        bool
	QPs        int
	GIDIdx     int // -1: not given (rocelab then uses 1, the IPv4 GID, else 2)
	Conn       qp.Type
	Atomic     AtomicOp

	// Duration mode (-D): a run of Duration seconds of which the Margin seconds at
	// either end are not measured.
	ByDuration bool
	Duration   int
	Margin     int

	TxDepth  int
	RxDepth  int
	CQMod    int
	OutReads int // -o; 0 = the device's maximum
	NoPeak   bool
	Bidir    bool
	// Events (-e) sleeps on the CQs' completion channel when a poll finds nothing,
	// instead of spinning: the CPU goes to the lab's loops (a lab of several busy
	// apps on two cores), at a wake-up's latency per empty poll.
	Events bool

	ReportGbits bool
	ReportBoth  bool // --report-both: with -b, the local and remote results as well
	Unsorted    bool // -U: every latency sample, in the order taken
	Histogram   bool // -H: every latency sample, sorted

	QPTimeout    int
	SL           int
	TrafficClass int  // --tclass
	InlineAsked  bool // -I: perftest turns inline off on a device it does not know, and says so

	// notices are what perftest prints on stdout while it checks the parameters.
	notices []string

	VerbsAddr string       // the verbs service ("" = the lab host's)
	Listener  net.Listener // the server's listener (nil = listen on Port)
}

// Client reports whether the configuration is the connecting side.
func (c Config) Client() bool { return c.ServerName != "" }

// ErrUsage marks command-line errors after which perftest prints its usage.
var ErrUsage = errors.New("usage")

// errHelp is -h (the usage alone) and errVersion is -V.
var (
	errHelp    = errors.New("help")
	errVersion = errors.New("Version: " + VersionString)
)

// perftest's limits and defaults (perftest_parameters.h).
const (
	MaxSize         = 1 << 23 // -a sweeps 2 .. 2^23
	defaultDuration = 5
	defaultRxSend   = 512
	ucMaxRx         = 16000
	cqModSizeLimit  = 8192 // larger messages get a CQE per WR unless -Q is given
	peakItersLimit  = 20000
	atomicSize      = 8
	udQKey          = 0x11111111
	grhSize         = 40 // UD receive buffers start with the 40-byte GRH
	maxMessageSize  = 1<<31 - 1
)

// Defaults returns perftest's defaults for the tool (init_perftest_params).
func Defaults(t Test) Config {
	c := Config{Test: t, Port: 18515, IBPort: 1, QPs: 1, GIDIdx: -1, Conn: qp.RC, QPTimeout: 14,
		CQMod: 100, RxDepth: 1, Duration: defaultDuration, Margin: -1, Atomic: FetchAndAdd}
	if t.Latency() {
		c.Size, c.TxDepth, c.Iters = 2, 1, 1000
	} else {
		c.Size, c.TxDepth, c.Iters = 65536, 128, 1000
	}
	if t == WriteBW {
		c.Iters = 5000
	}
	if t == AtomicBW {
		c.Size = atomicSize
	}
	if t.verb() == verbSend {
		c.RxDepth = defaultRxSend
	}
	return c
}

// options is perftest 4.5's option table: every option it has is parsed, so that
// the ones rocelab does not implement are refused by name rather than taken for
// typos.
var options = []getopt.Option{
	getopt.Arg('p', "port"), getopt.Arg('d', "ib-dev"), getopt.Arg('i', "ib-port"), getopt.Arg('m', "mtu"),
	getopt.Arg('s', "size"), getopt.Arg('n', "iters"), getopt.Arg('t', "tx-depth"), getopt.Arg('u', "qp-timeout"),
	getopt.Arg('S', "sl"), getopt.Arg('x', "gid-index"), getopt.Flag('a', "all"), getopt.Flag('F', "CPU-freq"),
	getopt.Arg('c', "connection"), getopt.Arg('q', "qp"), getopt.Flag('e', "events"), getopt.Arg('X', "vector"),
	getopt.Arg('I', "inline_size"), getopt.Arg('o', "outs"), getopt.Flag('g', "mcg"), getopt.Flag('z', "comm_rdma_cm"),
	getopt.Flag('R', "rdma_cm"), getopt.Arg('T', "tos"), getopt.Arg('L', "hop_limit"), getopt.Flag('h', "help"),
	getopt.Arg('M', "MGID"), getopt.Arg('r', "rx-depth"), getopt.Flag('b', "bidirectional"), getopt.Arg('Q', "cq-mod"),
	getopt.Flag('N', "noPeak"), getopt.Flag('V', "version"), getopt.Flag('C', "report-cycles"),
	getopt.Flag('H', "report-histogrm"), getopt.Flag('U', "report-unsorted"), getopt.Arg('A', "atomic_type"),
	getopt.Flag('O', "dualport"), getopt.Arg('l', "post_list"), getopt.Arg('D', "duration"), getopt.Arg('f', "margin"),
	getopt.Arg('B', "source_mac"), getopt.Arg('E', "dest_mac"), getopt.Arg('J', "dest_ip"), getopt.Arg('j', "source_ip"),
	getopt.Arg('K', "dest_port"), getopt.Arg('k', "source_port"), getopt.Arg('Y', "ethertype"), getopt.Arg('w', "limit_bw"),
	getopt.Arg('y', "limit_msgrate"), getopt.Flag('Z', "server"), getopt.Flag('P', "client"), getopt.Flag('v', "mac_fwd"),
	getopt.Flag('G', "use_rss"), getopt.Arg('W', "report-counters"),
	getopt.Flag(0, "report_gbits"), getopt.Flag(0, "report-both"), getopt.Arg(0, "tclass"), getopt.Flag(0, "use_old_post_send"),
	getopt.Arg(0, "force-link"), getopt.Flag(0, "run_infinitely"), getopt.Flag(0, "use-srq"), getopt.Flag(0, "reversed"),
	getopt.Arg(0, "pkey_index"), getopt.Arg(0, "inline_recv"), getopt.Flag(0, "tcp"), getopt.Arg(0, "burst_size"),
	getopt.Arg(0, "typical_pkt_size"), getopt.Arg(0, "rate_limit"), getopt.Arg(0, "rate_limit_type"), getopt.Arg(0, "rate_units"),
	getopt.Arg(0, "output"), getopt.Flag(0, "cpu_util"), getopt.Flag(0, "out_json"), getopt.Arg(0, "out_json_file"),
	getopt.Arg(0, "latency_gap"), getopt.Arg(0, "flow_label"), getopt.Arg(0, "retry_count"), getopt.Flag(0, "dont_xchg_versions"),
	getopt.Arg(0, "mmap"), getopt.Arg(0, "mmap-offset"), getopt.Flag(0, "ipv6"), getopt.Flag(0, "ipv6-addr"),
	getopt.Flag(0, "raw_ipv6"), getopt.Flag(0, "report-per-port"), getopt.Flag(0, "odp"), getopt.Flag(0, "use_hugepages"),
	getopt.Flag(0, "promiscuous"), getopt.Flag(0, "raw_mcast"), getopt.Flag(0, "mr_per_qp"), getopt.Arg(0, "dlid"),
	getopt.Arg(0, "wait_destroy"), getopt.Arg(0, "flows"), getopt.Arg(0, "flows_burst"), getopt.Arg(0, "reply_every"),
	getopt.Flag(0, "perform_warm_up"), getopt.Flag(0, "vlan_en"), getopt.Arg(0, "vlan_pcp"), getopt.Arg(0, "recv_post_list"),
	getopt.Arg(0, "remote_mac"), getopt.Arg(0, "local_mac"), getopt.Arg(0, "remote_ip"), getopt.Arg(0, "local_ip"),
	getopt.Arg(0, "remote_port"), getopt.Arg(0, "local_port"), getopt.Flag(0, "aes_xts"), getopt.Arg(0, "log_dci_streams"),
}

// unsupported says why rocelab refuses options perftest has: what they need is not
// there, or they would change the results in ways rocelab does not reproduce.
var unsupported = map[string]string{
	"vector":             "completion vectors (-X) are not supported: rocelab devices have one",
	"mcg":                "multicast (-g) is not supported: rocelab devices have no multicast groups",
	"MGID":               "multicast (-M) is not supported: rocelab devices have no multicast groups",
	"comm_rdma_cm":       "RDMA-CM (-R, -z) is not supported: rocelab's devices have no QP1/CM",
	"rdma_cm":            "RDMA-CM (-R, -z) is not supported: rocelab's devices have no QP1/CM",
	"report-cycles":      "-C (report in CPU cycles) is not supported: rocelab measures time in nanoseconds, not TSC cycles",
	"dualport":           "dual-port mode (-O) is not supported: rocelab devices have one port",
	"limit_bw":           "result limits (-w) are not implemented by rocelab's perftest tools",
	"limit_msgrate":      "result limits (-y) are not implemented by rocelab's perftest tools",
	"report-counters":    "performance counters (-W) are not implemented by rocelab's perftest tools",
	"run_infinitely":     "--run_infinitely is not implemented by rocelab's perftest tools",
	"use-srq":            "--use-srq is not implemented by rocelab's perftest tools",
	"reversed":           "--reversed is not implemented by rocelab's perftest tools",
	"pkey_index":         "--pkey_index is not supported: rocelab devices have one P_Key",
	"inline_recv":        "inline receive is not supported by the verbs service",
	"rate_limit":         "rate limiting is not implemented by rocelab's perftest tools",
	"rate_limit_type":    "rate limiting is not implemented by rocelab's perftest tools",
	"rate_units":         "rate limiting is not implemented by rocelab's perftest tools",
	"burst_size":         "rate limiting is not implemented by rocelab's perftest tools",
	"output":             "--output is not implemented by rocelab's perftest tools: they print perftest's full report",
	"cpu_util":           "--cpu_util is not implemented by rocelab's perftest tools",
	"out_json":           "JSON reports are not implemented by rocelab's perftest tools",
	"out_json_file":      "JSON reports are not implemented by rocelab's perftest tools",
	"latency_gap":        "--latency_gap is not implemented by rocelab's perftest tools",
	"flow_label":         "--flow_label is not implemented by rocelab's perftest tools",
	"retry_count":        "--retry_count applies to RDMA-CM, which rocelab does not support",
	"dont_xchg_versions": "--dont_xchg_versions is not implemented by rocelab's perftest tools",
	"mmap":               "--mmap is not supported: the verbs service registers its own shared memory",
	"mmap-offset":        "--mmap-offset is not supported: the verbs service registers its own shared memory",
	"ipv6":               "--ipv6 is not implemented: choose the IPv6 GID with -x 2",
	"ipv6-addr":          "--ipv6-addr is not implemented: the out-of-band exchange runs over IPv4",
	"report-per-port":    "dual-port mode is not supported: rocelab devices have one port",
	"odp":                "on-demand paging (--odp) is not supported: the verbs service registers pinned shared memory",
	"use_hugepages":      "--use_hugepages is not supported: the verbs service allocates the memory of memory regions",
	"mr_per_qp":          "--mr_per_qp is not implemented by rocelab's perftest tools",
	"dlid":               "--dlid is not supported: RoCE has no LIDs",
	"wait_destroy":       "--wait_destroy is not implemented by rocelab's perftest tools",
	"perform_warm_up":    "--perform_warm_up is not implemented by rocelab's perftest tools",
	"recv_post_list":     "receive post lists are not implemented by rocelab's perftest tools",
	"aes_xts":            "AES-XTS is not supported by rocelab devices",
	"log_dci_streams":    "DC is not supported by rocelab devices",
}

// Raw Ethernet options: perftest's IB tests accept them and ignore them; rocelab says
// they do not apply.
var rawEthOptions = map[string]bool{
	"source_mac": true, "dest_mac": true, "dest_ip": true, "source_ip": true, "dest_port": true,
	"source_port": true, "ethertype": true, "server": true, "client": true, "mac_fwd": true, "use_rss": true,
	"tcp": true, "raw_ipv6": true, "promiscuous": true, "raw_mcast": true, "flows": true, "flows_burst": true,
	"reply_every": true, "vlan_en": true, "vlan_pcp": true, "remote_mac": true, "local_mac": true,
	"remote_ip": true, "local_ip": true, "remote_port": true, "local_port": true, "typical_pkt_size": true,
}

// ParseArgs parses a command line (without the program name) as perftest's parser
// does, then applies its dependencies between parameters.
func ParseArgs(t Test, args []string) (Config, error) {
	c := Defaults(t)
	opts, operands, err := getopt.Parse(args, options)
	if err != nil {
		return c, fmt.Errorf("%w: %v\n Invalid Command or flag.\n Please check command line and run again.", ErrUsage, err)
	}
	seen := map[string]bool{}
	var ps parseState
	for _, o := range opts {
		if seen[o.Name] {
			return c, fmt.Errorf(" Duplicated argument: %s", o.Name)
		}
		seen[o.Name] = true
		if err := c.apply(o, &ps); err != nil {
			return c, err
		}
	}
	switch len(operands) {
	case 0:
	case 1:
		c.ServerName = operands[0]
	default:
		return c, errors.New(" Invalid Command line. Please check command rerun ")
	}
	return c, c.dependencies(ps)
}

// parseState is what the parser notes besides the Config: whether options were given.
type parseState struct {
	cqModAsked bool // -Q: keep the CQ moderation for large messages
	tosAsked   bool // -T: refused without RDMA-CM, as perftest does
}

// intArg is perftest's CHECK_VALUE: strtol with base 0 and nothing after the number.
func intArg(o getopt.Opt, name, ctype string) (int, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(o.Arg), 0, 64)
	if err != nil {
		return 0, fmt.Errorf(" %s argument %s should be %s", name, o.Arg, ctype)
	}
	return int(v), nil
}

// rangeArg is CHECK_VALUE_IN_RANGE.
func rangeArg(o getopt.Opt, name string, lo, hi int) (int, error) {
	v, err := intArg(o, name, "int")
	if err != nil {
		return 0, err
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf(" %s should be between %d and %d", name, lo, hi)
	}
	return v, nil
}

func (c *Config) apply(o getopt.Opt, ps *parseState) error {
	t := c.Test
	v := t.verb()
	var err error
	switch o.Name {
	case "port":
		c.Port, err = rangeArg(o, "Port", 0, 65535)
	case "ib-dev":
		c.Dev = o.Arg
	case "ib-port":
		if c.IBPort, err = intArg(o, "IB Port", "uint8_t"); err == nil {
			switch {
			case c.IBPort < 1:
				err = errors.New("IB Port can't be less than 1")
			case c.IBPort > 1:
				err = fmt.Errorf(" Unable to query port %d attributes: rocelab devices have port 1 only", c.IBPort)
			}
		}
	case "mtu":
		c.MTU, err = intArg(o, "MTU", "int")
	case "size":
		c.Size, err = sizeArg(o.Arg)
	case "iters":
		c.Iters, err = rangeArg(o, "Iteration num", 5, 100000000)
	case "tx-depth":
		c.TxDepth, err = rangeArg(o, "Tx depth", 1, 15000)
	case "qp-timeout":
		if c.QPTimeout, err = intArg(o, "QP Timeout", "uint8_t"); err == nil {
			c.QPTimeout &= 0xff
		}
	case "sl":
		if c.SL, err = intArg(o, "Service Level", "uint8_t"); err == nil && c.SL&0xff > 15 {
			err = errors.New(" Only 15 Service levels")
		}
	case "gid-index":
		c.GIDIdx, err = rangeArg(o, "Gid index", 0, 64)
	case "all":
		c.All = true
	case "CPU-freq":
		// No CPU-frequency check is made: time is measured in nanoseconds.
	case "connection":
		err = c.setConnection(o.Arg)
	case "qp":
		if t.Latency() {
			return errors.New(" Multiple QPs only available on bw tests")
		}
		c.QPs, err = rangeArg(o, "num of Qps", 1, 16384)
	case "inline_size":
		if _, err = rangeArg(o, "Max inline", 0, 912); err == nil {
			if v == verbRead || v == verbAtomic {
				return errors.New(" Inline feature not available on READ/Atomic verbs")
			}
			c.InlineAsked = true
		}
	case "outs":
		if c.OutReads, err = intArg(o, "Outstanding Reads", "int"); err == nil && v != verbRead && v != verbAtomic {
			err = errors.New(" Setting Outstanding reads only available on READ verb")
		}
	case "rx-depth":
		if c.RxDepth, err = rangeArg(o, " Rx depth", 1, 16384); err == nil && v != verbSend && c.RxDepth > 1 {
			err = errors.New(" On RDMA verbs rx depth can be only 1")
		}
	case "cq-mod":
		c.CQMod, err = rangeArg(o, "CQ moderation", 1, 1024)
		ps.cqModAsked = true
	case "atomic_type":
		if v != verbAtomic {
			return errors.New(" You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests")
		}
		switch o.Arg {
		case "CMP_AND_SWAP":
			c.Atomic = CmpAndSwap
		case "FETCH_AND_ADD":
			c.Atomic = FetchAndAdd
		default:
			err = errors.New(" Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}")
		}
	case "post_list":
		var n int
		if n, err = intArg(o, "Send Post List size", "int"); err == nil && n != 1 {
			err = errors.New("post lists (-l) other than 1 are not implemented by rocelab's perftest tools")
		}
	case "duration":
		if c.Duration, err = intArg(o, "Duration period", "int"); err == nil && c.Duration <= 0 {
			err = errors.New(" Duration period must be positive")
		}
		c.ByDuration = true
	case "margin":
		if c.Margin, err = intArg(o, "Margin", "int"); err == nil && c.Margin < 0 {
			err = errors.New(" Margin must be non-negative")
		}
	case "bidirectional":
		if t.Latency() {
			return errors.New(" Bidirectional is only available in BW test")
		}
		c.Bidir = true
	case "noPeak":
		if t.Latency() {
			return errors.New(" NoPeak only valid for BW tests")
		}
		c.NoPeak = true
	case "report-histogrm":
		if !t.Latency() {
			return errors.New(" Available only on Latency tests")
		}
		c.Histogram = true
	case "report-unsorted":
		if !t.Latency() {
			return errors.New(" is Available only on Latency tests")
		}
		c.Unsorted = true
	case "tos":
		_, err = rangeArg(o, "TOS", 0, 255)
		ps.tosAsked = true
	case "hop_limit":
		if _, err = rangeArg(o, "Hop Limit", 0, 255); err == nil {
			err = errors.New(" Hop limit only valid for RawEth QP ")
		}
	case "events":
		c.Events = true
	case "report_gbits":
		c.ReportGbits = true
	case "report-both":
		c.ReportBoth = true
	case "tclass":
		if c.TrafficClass, err = intArg(o, "traffic class", "uint16_t"); err == nil {
			c.TrafficClass &= 0xff // perftest stores it in a uint8_t
		}
	case "use_old_post_send":
		// rocelab posts with the one ibv_post_send path; the header says "ibv_wr* API : OFF".
	case "force-link":
		if !strings.EqualFold(o.Arg, "ethernet") {
			err = fmt.Errorf("--force-link=%s: rocelab devices are Ethernet (RoCE) ports", o.Arg)
		}
	case "help":
		return errHelp
	case "version":
		return errVersion
	default:
		if rawEthOptions[o.Name] {
			return fmt.Errorf("--%s is a Raw Ethernet option; %s is an RDMA test (rocelab has no Raw Ethernet tests)", o.Name, t.Program())
		}
		if why, ok := unsupported[o.Name]; ok {
			return errors.New(why)
		}
		return fmt.Errorf("%s: option %s is not implemented", t.Program(), o.Name)
	}
	return err
}

// sizeArg parses -s as perftest does: a number with an optional K or M suffix.
func sizeArg(s string) (int, error) {
	factor := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		s, factor = strings.TrimSuffix(s, "K"), 1024
	case strings.HasSuffix(s, "M"):
		s, factor = strings.TrimSuffix(s, "M"), 1024*1024
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil || v*factor < 1 || v*factor > maxMessageSize {
		return 0, fmt.Errorf(" Message Size should be between %d and %d", 1, maxMessageSize)
	}
	return int(v * factor), nil
}

func (c *Config) setConnection(s string) error {
	v := c.Test.verb()
	switch s {
	case "RC":
		c.Conn = qp.RC
	case "UC":
		if v == verbRead || v == verbAtomic {
			return errors.New(" UC connection not possible in READ/ATOMIC verbs")
		}
		c.Conn = qp.UC
	case "UD":
		if v != verbSend {
			return errors.New(" UD connection only possible in SEND verb")
		}
		c.Conn = qp.UD
	case "RawEth", "XRC", "DC", "SRD":
		return fmt.Errorf("connection type %s is not supported by rocelab devices (RC, UC, UD)", s)
	default:
		return errors.New(" Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}")
	}
	return nil
}

// dependencies is perftest's force_dependecies, for what rocelab implements.
func (c *Config) dependencies(ps parseState) error {
	v := c.Test.verb()
	if !c.ByDuration {
		c.TxDepth = min(c.TxDepth, c.Iters)
		if v == verbSend {
			c.RxDepth = min(c.RxDepth, c.Iters)
		}
		if (c.Conn == qp.UD || c.Conn == qp.UC) && c.RxDepth == defaultRxSend {
			c.RxDepth = min(c.Iters, ucMaxRx)
		}
	}
	// A CQE per WR for large messages, whose moderated completions would skew the
	// bandwidth (not under -a, whose sizes start small, nor for UD).
	if c.Size > cqModSizeLimit && c.Conn != qp.UD && !c.All {
		if !ps.cqModAsked {
			c.CQMod = 1
		} else if c.CQMod > 1 {
			c.notices = append(c.notices, resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n")
		}
	}
	c.CQMod = min(c.CQMod, c.TxDepth)
	if c.All {
		c.Size = MaxSize
	}
	if v == verbAtomic && c.Size != atomicSize {
		return errors.New(resultLine + "Message size cannot be changed for Atomic tests ")
	}
	if c.ByDuration {
		c.Iters = 0
		c.NoPeak = true
		if c.All {
			return errors.New(resultLine + "Duration mode currently doesn't support running on all sizes.")
		}
	}
	if ps.tosAsked {
		return errors.New(" TOS only valid for rdma_cm based QP and RawEth QP ")
	}
	// The server of a one-way SEND test sees no send completions, so it has no peak.
	if v == verbSend && !c.Test.Latency() && !c.Client() && !c.Bidir {
		c.NoPeak = true
	}
	if c.ByDuration && c.Margin == -1 {
		c.Margin = c.Duration / 4
	}
	// perftest's work-around for an odd receive depth in SEND tests.
	if v == verbSend && c.RxDepth%2 == 1 && !c.All {
		c.RxDepth++
	}
	// The peak search is quadratic in the iterations: above 20000 it is skipped.
	if !c.ByDuration && c.Iters > peakItersLimit && !c.Test.Latency() {
		c.NoPeak = true
	}
	if !(c.Duration > 2*c.Margin) {
		return errors.New(resultLine + "please check that DURATION > 2*MARGIN")
	}
	return nil
}

// Usage is a short usage text (perftest's own lists many options rocelab refuses).
func Usage(t Test, argv0 string) string {
	d := Defaults(t)
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %[1]s            start a server and wait for connection\n  %[1]s <host>     connect to server at <host>\n\n", argv0)
	fmt.Fprintf(&b, "Options (perftest 4.5's; docs/apps.md lists what rocelab implements):\n")
	line := func(f, text string) { fmt.Fprintf(&b, "  %-28s %s\n", f, text) }
	if t.verb() != verbAtomic {
		line("-a, --all", "Run sizes from 2 till 2^23")
	} else {
		line("-A, --atomic_type=<type>", "type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)")
	}
	if !t.Latency() {
		line("-b, --bidirectional", "Measure bidirectional bandwidth (default unidirectional)")
	}
	switch t.verb() {
	case verbSend:
		line("-c, --connection=<RC/UC/UD>", "Connection type (default RC)")
	case verbWrite:
		line("-c, --connection=<RC/UC>", "Connection type (default RC)")
	default:
		line("-c, --connection=<RC>", "Connection type (default RC)")
	}
	line("-d, --ib-dev=<dev>", "Use IB device <dev> (default first device found)")
	line("-D, --duration", "Run test for a customized period of seconds.")
	line("-f, --margin", "measure results within margins. (default=duration/4)")
	line("-F, --CPU-freq", "Accepted; no CPU frequency is involved")
	if t.Latency() {
		line("-H, --report-histogrm", "Print out all results (default print summary only)")
	}
	line("-i, --ib-port=<port>", "Use port <port> of IB device (default 1)")
	line("-m, --mtu=<mtu>", "MTU size : 256 - 4096 (default port mtu)")
	line("-n, --iters=<iters>", fmt.Sprintf("Number of exchanges (at least 5, default %d)", d.Iters))
	if !t.Latency() {
		line("-N, --noPeak", "Cancel peak-bw calculation (default with peak up to iters=20000)")
	}
	if v := t.verb(); v == verbRead || v == verbAtomic {
		line("-o, --outs=<num>", "num of outstanding read/atom(default max of device)")
	}
	line("-p, --port=<port>", "Listen on/connect to port <port> (default 18515)")
	if !t.Latency() {
		line("-q, --qp=<num of qp's>", "Num of qp's(default 1)")
		line("-Q, --cq-mod", "Generate Cqe only after <--cq-mod> completion")
	}
	if t.verb() == verbSend {
		line("-r, --rx-depth=<dep>", fmt.Sprintf("Rx queue size (default %d)", defaultRxSend))
	}
	if t.verb() != verbAtomic {
		line("-s, --size=<size>", fmt.Sprintf("Size of message to exchange (default %d)", d.Size))
	}
	line("-S, --sl=<sl>", "SL (default 0)")
	line("-t, --tx-depth=<dep>", fmt.Sprintf("Size of tx queue (default %d)", d.TxDepth))
	line("-u, --qp-timeout=<timeout>", "QP timeout, timeout value is 4 usec * 2 ^(timeout), default 14")
	if t.Latency() {
		line("-U, --report-unsorted", "(implies -H) print out unsorted results (default sorted)")
	}
	line("-V, --version", "Display version number")
	line("-x, --gid-index=<index>", "Test uses GID with GID index (rxe numbering: 1 = IPv4, 2 = IPv6)")
	if !t.Latency() {
		line("    --report-both", "Report RX & TX results separately on Bidirectional BW tests")
		line("    --report_gbits", "Report Max/Average BW of test in Gbit/sec (instead of MB/sec)")
	}
	line("    --tclass=<value>", "Set the Traffic Class in GRH")
	return b.String()
}
