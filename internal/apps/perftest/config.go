package perftest

//lint:file-ignore ST1005 error messages reproduce perftest's wording

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rocelab/rocelab/internal/apps/getopt"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/roce"
)

// Test selects the tool.
type Test int

// The tools.
const (
	WriteBW Test = iota
	ReadBW
	SendBW
	SendLat
	WriteLat
)

// Program returns the tool's command name.
func (t Test) Program() string {
	return [...]string{"write_bw", "read_bw", "send_bw", "send_lat", "write_lat"}[t]
}

func (t Test) title() string {
	return [...]string{"RDMA_Write BW Test", "RDMA_Read BW Test", "Send BW Test", "Send Latency Test", "RDMA_Write Latency Test"}[t]
}

// Latency reports whether the tool is a latency test.
func (t Test) Latency() bool { return t == SendLat || t == WriteLat }

// Config is one run's parameters.
type Config struct {
	Test        Test
	ServerName  string
	Port        int
	Dev         string
	IBPort      int
	MTU         roce.MTU // 0 = the port's active MTU
	Size        int
	Iters       int
	All         bool
	QPs         int
	GIDIdx      int // -1 = choose (rxe numbering: 1 = IPv4)
	ReportGbits bool
	Duration    time.Duration
	TxDepth     int
	RxDepth     int
	CQMod       int
	OutReads    int
	Conn        qp.Type
	NoPeak      bool
	QPTimeout   int
	SL          int
	TOS         int

	VerbsAddr string
	Listener  net.Listener
}

// ErrUsage marks command-line errors.
var ErrUsage = errors.New("usage")

// MaxSize is the largest message -a sweeps to (perftest's 2^23).
const MaxSize = 1 << 23

// Defaults returns perftest's defaults for the tool.
func Defaults(t Test) Config {
	c := Config{Test: t, Port: 18515, IBPort: 1, QPs: 1, GIDIdx: -1, Conn: qp.RC, QPTimeout: 14, CQMod: 100, RxDepth: 512}
	if t.Latency() {
		c.Size, c.Iters, c.TxDepth = 2, 1000, 1
	} else {
		c.Size, c.Iters, c.TxDepth = 65536, 5000, 128
	}
	return c
}

var options = []getopt.Option{
	getopt.Arg('p', "port"), getopt.Arg('d', "ib-dev"), getopt.Arg('i', "ib-port"), getopt.Arg('m', "mtu"),
	getopt.Arg('c', "connection"), getopt.Arg('s', "size"), getopt.Flag('a', "all"), getopt.Arg('n', "iters"),
	getopt.Arg('t', "tx-depth"), getopt.Arg('r', "rx-depth"), getopt.Arg('q', "qp"), getopt.Arg('x', "gid-index"),
	getopt.Flag('F', "CPU-freq"), getopt.Arg('D', "duration"), getopt.Flag(0, "report_gbits"), getopt.Arg('Q', "cq-mod"),
	getopt.Arg('o', "outs"), getopt.Flag('N', "noPeak"), getopt.Arg('u', "qp-timeout"), getopt.Arg('S', "sl"),
	getopt.Arg('I', "inline_size"), getopt.Flag('e', "events"), getopt.Arg('T', "tos"), getopt.Flag('U', "report-unsorted"),
	getopt.Arg('l', "post_list"), getopt.Flag('R', "rdma_cm"), getopt.Flag('z', "comm_rdma_cm"), getopt.Flag('b', "bidirectional"),
	getopt.Flag('h', "help"), getopt.Flag('V', "version"),
}

// ParseArgs parses a command line (without the program name) as perftest does.
func ParseArgs(t Test, args []string) (Config, error) {
	c := Defaults(t)
	opts, operands, err := getopt.Parse(args, options)
	if err != nil {
		return c, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	num := func(o getopt.Opt, lo, hi int) (int, error) {
		v, err := strconv.ParseInt(strings.TrimSpace(o.Arg), 0, 64)
		if err != nil || int(v) < lo || int(v) > hi {
			return 0, fmt.Errorf("%w: %s should be between %d and %d", ErrUsage, o.Name, lo, hi)
		}
		return int(v), nil
	}
	for _, o := range opts {
		var v int
		switch o.Name {
		case "port":
			v, err = num(o, 0, 65535)
			c.Port = v
		case "ib-dev":
			c.Dev = o.Arg
		case "ib-port":
			v, err = num(o, 1, 1)
			c.IBPort = v
		case "mtu":
			if v, err = num(o, 256, 4096); err == nil {
				if !roce.MTU(v).Valid() {
					err = fmt.Errorf("%w: Invalid MTU %d - Changing to the port's", ErrUsage, v)
				}
				c.MTU = roce.MTU(v)
			}
		case "connection":
			switch strings.ToUpper(o.Arg) {
			case "RC":
				c.Conn = qp.RC
			case "UC":
				if t == ReadBW {
					err = errors.New("UC connection not possible in READ verb")
				}
				c.Conn = qp.UC
			default:
				err = fmt.Errorf("connection type %s is not supported by rocelab's %s (RC, UC)", o.Arg, t.Program())
			}
		case "size":
			v, err = num(o, 1, MaxSize)
			c.Size = v
		case "all":
			c.All = true
		case "iters":
			v, err = num(o, 5, 100000000)
			c.Iters = v
		case "tx-depth":
			v, err = num(o, 1, 15000)
			c.TxDepth = v
		case "rx-depth":
			v, err = num(o, 1, 15000)
			c.RxDepth = v
		case "qp":
			v, err = num(o, 1, 16384)
			c.QPs = v
		case "gid-index":
			v, err = num(o, 0, 255)
			c.GIDIdx = v
		case "duration":
			v, err = num(o, 1, 1<<30)
			c.Duration = time.Duration(v) * time.Second
		case "report_gbits":
			c.ReportGbits = true
		case "cq-mod":
			v, err = num(o, 1, 1024)
			c.CQMod = v
		case "outs":
			v, err = num(o, 1, 128)
			c.OutReads = v
		case "noPeak":
			c.NoPeak = true
		case "qp-timeout":
			v, err = num(o, 0, 31)
			c.QPTimeout = v
		case "sl":
			v, err = num(o, 0, 15)
			c.SL = v
		case "tos":
			v, err = num(o, 0, 255)
			c.TOS = v
		case "post_list":
			if _, err = num(o, 1, 1); err != nil {
				err = errors.New("post lists (-l) other than 1 are not supported")
			}
		case "inline_size":
			_, err = num(o, 0, 0)
			if err != nil {
				err = errors.New("inline data (-I) is not supported by the verbs service; use -I 0")
			}
		case "CPU-freq", "events", "report-unsorted":
			// -F: no CPU-frequency check is made (time is measured in ns).
			// -e: completions are polled. -U: the report is computed from sorted samples.
		case "rdma_cm", "comm_rdma_cm":
			err = errors.New("RDMA-CM (-R, -z) is not supported: rocelab's devices have no QP1/CM")
		case "bidirectional":
			err = errors.New("bidirectional tests (-b) are not supported")
		case "help":
			err = ErrUsage
		case "version":
			err = fmt.Errorf("Version: %s", VersionString)
		}
		if err != nil {
			return c, err
		}
	}
	switch len(operands) {
	case 0:
	case 1:
		c.ServerName = operands[0]
	default:
		return c, fmt.Errorf("%w: more than one server name", ErrUsage)
	}
	if c.Duration > 0 && t != WriteBW && t != ReadBW {
		return c, fmt.Errorf("-D is supported by ib_write_bw and ib_read_bw only")
	}
	if c.Duration > 0 && c.All {
		return c, errors.New("Duration mode (-D) cannot be combined with -a")
	}
	if t == WriteLat && c.Size < 1 {
		return c, fmt.Errorf("%w: size", ErrUsage)
	}
	if !t.Latency() {
		if c.TxDepth > c.Iters {
			c.TxDepth = c.Iters
		}
		if c.CQMod > c.TxDepth {
			c.CQMod = c.TxDepth
		}
	}
	return c, nil
}

// Usage is a short usage text.
func Usage(t Test, argv0 string) string {
	return fmt.Sprintf(`Usage:
  %[1]s            start a server and wait for connection
  %[1]s <host>     connect to server at <host>

Options (perftest 4.5 spellings; see docs/apps.md for what rocelab supports):
  -p, --port=<port>          listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>         use IB device <dev> (rocelab0)
  -i, --ib-port=<port>       use port <port> of IB device (default 1)
  -m, --mtu=<mtu>            MTU size: 256 - 4096 (default port mtu)
  -c, --connection=<RC/UC>   connection type (default RC)
  -s, --size=<size>          size of message to exchange (default %[2]d)
  -a, --all                  run sizes from 2 till 2^23
  -n, --iters=<iters>        number of exchanges (at least 5, default %[3]d)
  -t, --tx-depth=<dep>       size of tx queue
  -r, --rx-depth=<dep>       rx queue size (send tests)
  -q, --qp=<num of qp's>     num of qp's (default 1)
  -x, --gid-index=<index>    GID index (rxe numbering: 1 = IPv4, 2 = IPv6)
  -Q, --cq-mod               generate a CQE every N work requests
  -o, --outs=<num>           outstanding reads (read tests)
  -u, --qp-timeout=<timeout> QP timeout (default 14)
  -D, --duration             run the test for a customized period of seconds (write/read BW)
  -N, --noPeak               cancel peak-bw calculation
  -F, --CPU-freq             do not fail on CPU-frequency warnings (no-op)
      --report_gbits         report max/average BW in Gbit/sec (instead of MB/sec)
`, argv0, Defaults(t).Size, Defaults(t).Iters)
}
