package pingpong

//lint:file-ignore ST1005 error messages reproduce rdma-core's and perftest's wording

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rocelab/rocelab/apps/getopt"
	"github.com/rocelab/rocelab/roce"
)

// Kind selects the example: ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong or
// ibv_srq_pingpong.
type Kind int

// The examples.
const (
	RC Kind = iota
	UC
	UD
	SRQ
)

// Program returns the example's command name.
func (k Kind) Program() string {
	return [...]string{"rc_pingpong", "uc_pingpong", "ud_pingpong", "srq_pingpong"}[k]
}

// Config is one run's parameters, with rdma-core 44's defaults from Defaults.
type Config struct {
	Kind       Kind
	ServerName string // "" = be the server
	Port       int    // TCP port of the exchange (-p)
	Dev        string // -d
	IBPort     int    // -i
	Size       int    // -s
	MTU        roce.MTU
	RxDepth    int // -r
	Iters      int // -n
	SL         int // -l (accepted; RoCE has no SL on the wire)
	Events     bool
	GIDIdx     int // -g, -1 = none
	Chk        bool
	NumQP      int // -q (srq)
	NewSend    bool

	// VerbsAddr is the verbs service's address ("" = the lab host's, from the
	// environment). Listener, if set, is the server's listening socket instead of
	// 0.0.0.0:Port (tests use a loopback port of their own).
	VerbsAddr string
	Listener  net.Listener
}

// ErrUsage marks command-line errors: the caller prints Usage.
var ErrUsage = errors.New("usage")

// Defaults returns rdma-core 44's defaults for the example.
func Defaults(k Kind) Config {
	c := Config{Kind: k, Port: 18515, IBPort: 1, Size: 4096, MTU: roce.MTU1024, RxDepth: 500, Iters: 1000, GIDIdx: -1}
	switch k {
	case UD:
		c.Size = 2048
	case SRQ:
		c.NumQP = 16
	}
	return c
}

func options(k Kind) []getopt.Option {
	o := []getopt.Option{getopt.Arg('p', "port"), getopt.Arg('d', "ib-dev"), getopt.Arg('i', "ib-port"), getopt.Arg('s', "size")}
	if k != UD {
		o = append(o, getopt.Arg('m', "mtu"))
	}
	if k == SRQ {
		o = append(o, getopt.Arg('q', "num-qp"))
	}
	o = append(o, getopt.Arg('r', "rx-depth"), getopt.Arg('n', "iters"), getopt.Arg('l', "sl"),
		getopt.Flag('e', "events"), getopt.Arg('g', "gid-idx"))
	switch k {
	case RC:
		o = append(o, getopt.Flag('o', "odp"), getopt.Flag('O', "iodp"), getopt.Flag('P', "prefetch"),
			getopt.Flag('t', "ts"), getopt.Flag('c', "chk"), getopt.Flag('j', "dm"),
			getopt.Flag('N', "new_send"))
	case UC:
		o = append(o, getopt.Flag('c', "chk"))
	}
	return o
}

// strtol parses as C's strtol(s, NULL, 0): decimal, 0x hex or 0 octal.
func strtol(name, s string) (int, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: bad value %q for %s", ErrUsage, s, name)
	}
	return int(v), nil
}

// MTUFromBytes is rdma-core's pp_mtu_to_enum: 256, 512, 1024, 2048 or 4096.
func MTUFromBytes(n int) (roce.MTU, bool) {
	m := roce.MTU(n)
	return m, n > 0 && n <= 4096 && m.Valid()
}

// ParseArgs parses a command line (without the program name) as the example does.
func ParseArgs(k Kind, args []string) (Config, error) {
	c := Defaults(k)
	opts, operands, err := getopt.Parse(args, options(k))
	if err != nil {
		return c, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	for _, o := range opts {
		var v int
		switch o.Name {
		case "ib-dev":
			c.Dev = o.Arg
			continue
		case "events", "chk", "new_send", "odp", "iodp", "prefetch", "ts", "dm":
		default:
			if v, err = strtol(o.Name, o.Arg); err != nil {
				return c, err
			}
		}
		switch o.Name {
		case "port":
			if v < 0 || v > 65535 {
				return c, fmt.Errorf("%w: port %d", ErrUsage, v)
			}
			c.Port = v
		case "ib-port":
			if v < 1 {
				return c, fmt.Errorf("%w: ib-port %d", ErrUsage, v)
			}
			c.IBPort = v
		case "size":
			if v < 1 {
				return c, fmt.Errorf("%w: size %d", ErrUsage, v)
			}
			c.Size = v
		case "mtu":
			m, ok := MTUFromBytes(v)
			if !ok {
				return c, fmt.Errorf("%w: mtu %d (256, 512, 1024, 2048 or 4096)", ErrUsage, v)
			}
			c.MTU = m
		case "num-qp":
			c.NumQP = v
		case "rx-depth":
			c.RxDepth = v
		case "iters":
			c.Iters = v
		case "sl":
			c.SL = v
		case "events":
			c.Events = true
		case "gid-idx":
			c.GIDIdx = v
		case "chk":
			c.Chk = true
		case "new_send":
			c.NewSend = true
		case "odp", "iodp", "prefetch":
			return c, errors.New("The device isn't ODP capable or does not support RC send (rocelab registers pinned shared memory only)")
		case "ts":
			return c, errors.New("The device isn't completion timestamp capable")
		case "dm":
			return c, errors.New("Device memory is not supported")
		}
	}
	switch len(operands) {
	case 0:
	case 1:
		c.ServerName = operands[0]
	default:
		return c, fmt.Errorf("%w: more than one server name", ErrUsage)
	}
	if c.RxDepth < 1 || c.Iters < 1 {
		return c, fmt.Errorf("%w: rx-depth and iters must be positive", ErrUsage)
	}
	if k == SRQ {
		if c.NumQP < 1 || c.NumQP > SRQMessages {
			return c, fmt.Errorf("%w: num-qp %d (1..%d)", ErrUsage, c.NumQP, SRQMessages)
		}
		if c.NumQP > c.RxDepth {
			return c, fmt.Errorf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", c.RxDepth, c.NumQP)
		}
	}
	return c, nil
}

// Usage returns the example's usage text, as rdma-core prints it.
func Usage(k Kind, argv0 string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s            start a server and wait for connection\n  %s <host>     connect to server at <host>\n\nOptions:\n", argv0, argv0)
	d := Defaults(k)
	b.WriteString("  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n")
	b.WriteString("  -d, --ib-dev=<dev>     use IB device <dev> (default first device found; here " + "rocelab0" + ")\n")
	b.WriteString("  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n")
	fmt.Fprintf(&b, "  -s, --size=<size>      size of message to exchange (default %d)\n", d.Size)
	if k != UD {
		b.WriteString("  -m, --mtu=<size>       path MTU (default 1024)\n")
	}
	if k == SRQ {
		b.WriteString("  -q, --num-qp=<num>     number of QPs to use (default 16)\n")
	}
	b.WriteString("  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n")
	b.WriteString("  -n, --iters=<iters>    number of exchanges (default 1000)\n")
	b.WriteString("  -l, --sl=<sl>          service level value\n")
	b.WriteString("  -e, --events           sleep on CQ events (default poll)\n")
	b.WriteString("  -g, --gid-idx=<gid index> local port gid index (rxe numbering: 1 = IPv4, 2 = IPv6)\n")
	if k == RC || k == UC {
		b.WriteString("  -c, --chk              validate received buffer\n")
	}
	if k == RC {
		b.WriteString("  -N, --new_send         use new post send WR API\n")
	}
	return b.String()
}
