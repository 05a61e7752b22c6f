// Package cmatose is librdmacm's ucmatose example (rdma-core librdmacm/examples/
// cmatose.c) over a rocelab soft-RNIC: one RC connection made through RDMA-CM, the
// server SENDs -C messages of -S bytes, the client answers with as many, the server
// disconnects. Same flags, same output, same exchange, so it connects to the real
// ucmatose on a kernel rxe host. See docs/apps.md.
package cmatose

//lint:file-ignore ST1005 error messages reproduce cmatose's wording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/rocelab/rocelab/apps/device"
	"github.com/rocelab/rocelab/apps/getopt"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/verbs"
)

// Config is a parsed command line.
type Config struct {
	Server       string // -s: connect to this address (client); "" = be the server
	Bind         string // -b: bind to this address
	Port         uint16 // -p
	MessageCount int    // -C
	MessageSize  int    // -S
	Service      string // the verbs service ("" = the lab host's)
}

var options = []getopt.Option{{Short: 's', HasArg: true}, {Short: 'b', HasArg: true}, {Short: 'p', HasArg: true},
	{Short: 'C', HasArg: true}, {Short: 'S', HasArg: true}, {Short: 'c', HasArg: true}}

// Usage is cmatose's usage text (for the flags this rewrite accepts).
const Usage = "usage: ucmatose\n\t[-s server_address]\n\t[-b bind_address]\n\t[-c connections] (1)\n\t[-C message_count]\n\t[-S message_size]\n\t[-p port_number]\n"

// ParseArgs parses the arguments after the program name.
func ParseArgs(args []string) (Config, error) {
	cfg := Config{Port: 7471, MessageCount: 10, MessageSize: 100}
	opts, operands, err := getopt.Parse(args, options)
	if err != nil {
		return cfg, err
	}
	if len(operands) > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", operands[0])
	}
	for _, o := range opts {
		n, nerr := strconv.Atoi(o.Arg)
		switch o.Name {
		case "s":
			cfg.Server = o.Arg
		case "b":
			cfg.Bind = o.Arg
		case "p":
			if nerr != nil || n < 0 || n > 65535 {
				return cfg, fmt.Errorf("bad port %q", o.Arg)
			}
			cfg.Port = uint16(n)
		case "C", "S":
			if nerr != nil || n < 0 {
				return cfg, fmt.Errorf("bad -%s %q", o.Name, o.Arg)
			}
			if o.Name == "C" {
				cfg.MessageCount = n
			} else {
				cfg.MessageSize = n
			}
		case "c":
			if nerr != nil || n != 1 {
				return cfg, fmt.Errorf("-c %s: this rewrite makes one connection", o.Arg)
			}
		}
	}
	if cfg.MessageSize == 0 {
		cfg.MessageCount = 0
	}
	return cfg, nil
}

// node is cmatose's struct cmatest_node: one connection's objects.
type node struct {
	id       *verbs.CMID
	pd       *verbs.PD
	sendCQ   *verbs.CQ
	recvCQ   *verbs.CQ
	mr       *verbs.MR
	qp       *verbs.QP
	cfg      *Config
	destroys []func() error
}

func (n *node) init(ctx *verbs.Context) error {
	var err error
	if n.pd, err = ctx.AllocPD(); err != nil {
		return fmt.Errorf("cmatose: unable to allocate PD: %w", err)
	}
	n.destroys = append(n.destroys, func() error { return ctx.DeallocPD(n.pd) })
	cqe := max(n.cfg.MessageCount, 1)
	if n.sendCQ, err = ctx.CreateCQ(cqe, nil); err == nil {
		n.destroys = append(n.destroys, func() error { return ctx.DestroyCQ(n.sendCQ) })
		n.recvCQ, err = ctx.CreateCQ(cqe, nil)
	}
	if err != nil {
		return fmt.Errorf("cmatose: unable to create CQ: %w", err)
	}
	n.destroys = append(n.destroys, func() error { return ctx.DestroyCQ(n.recvCQ) })
	n.qp, err = n.id.CreateQP(n.pd, verbs.QPInitAttr{SendCQ: n.sendCQ, RecvCQ: n.recvCQ, SigAll: true,
		Cap: ibv.QPCap{MaxSendWR: cqe, MaxRecvWR: cqe, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return fmt.Errorf("cmatose: unable to create QP: %w", err)
	}
	n.destroys = append(n.destroys, func() error { return ctx.DestroyQP(n.qp) })
	if n.cfg.MessageCount == 0 {
		return nil
	}
	if n.mr, err = ctx.RegMR(n.pd, n.cfg.MessageSize, qp.AccessLocalWrite); err != nil {
		return fmt.Errorf("failed to reg MR: %w", err)
	}
	n.destroys = append(n.destroys, func() error { return ctx.DeregMR(n.mr) })
	for range n.cfg.MessageCount {
		if err := n.qp.PostRecv(&qp.RecvWR{SGL: n.sge()}); err != nil {
			return fmt.Errorf("failed to post receives: %w", err)
		}
	}
	return nil
}

func (n *node) sge() []qp.SGE {
	return []qp.SGE{{Addr: n.mr.Addr(), Length: uint32(n.cfg.MessageSize), LKey: n.mr.LKey()}}
}

func (n *node) postSends() error {
	for range n.cfg.MessageCount {
		if err := n.qp.PostSend(&qp.SendWR{Opcode: qp.WRSend, SGL: n.sge()}); err != nil {
			return fmt.Errorf("failed to post sends: %w", err)
		}
	}
	return nil
}

// poll waits for MessageCount completions on cq, as cmatose's poll_cqs (which
// ignores their status; a failed one is reported here).
func (n *node) poll(ctx context.Context, cq *verbs.CQ) error {
	wcs := make([]qp.WC, 8)
	for done := 0; done < n.cfg.MessageCount; {
		k, err := cq.PollCQ(wcs)
		if err != nil {
			return fmt.Errorf("cmatose: failed polling CQ: %w", err)
		}
		for _, wc := range wcs[:k] {
			if wc.Status != qp.WCSuccess {
				return fmt.Errorf("cmatose: completion with status %v", wc.Status)
			}
		}
		done += k
		if k == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(50 * time.Microsecond) // busy polling, as cmatose, but yielding
		}
	}
	return nil
}

func (n *node) destroy() {
	for i := len(n.destroys) - 1; i >= 0; i-- {
		n.destroys[i]()
	}
}

// param is the connection offer cmatose makes.
var param = ibv.CMConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5, RNRRetryCount: 7}

// Run runs one side and writes cmatose's output to out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	vctx, err := device.Open("", cfg.Service)
	if err != nil {
		return err
	}
	defer vctx.Close()
	ch, err := vctx.CreateCMChannel()
	if err != nil {
		return fmt.Errorf("cmatose: failed to create event channel: %w", err)
	}
	defer ch.Destroy()
	next := func(want ibv.CMEventType) (verbs.CMEvent, error) {
		e, err := ch.GetEvent(ctx)
		if err != nil {
			return e, fmt.Errorf("cmatose: failure in rdma_get_cm_event: %w", err)
		}
		if e.Type != want {
			fmt.Fprintf(out, "cmatose: event: %v, error: %d\n", e.Type, e.Status)
			return e, fmt.Errorf("cmatose: %v while waiting for %v", e.Type, want)
		}
		return e, nil
	}
	n := &node{cfg: &cfg}
	defer n.destroy()
	if cfg.Server == "" {
		fmt.Fprintln(out, "cmatose: starting server")
		listen, err := ch.CreateID()
		if err != nil {
			return fmt.Errorf("cmatose: listen request failed: %w", err)
		}
		defer listen.Destroy()
		bind := netip.IPv4Unspecified()
		if cfg.Bind != "" {
			if bind, err = netip.ParseAddr(cfg.Bind); err != nil {
				return fmt.Errorf("cmatose: bind address failed: %w", err)
			}
		}
		if err := listen.Listen(netip.AddrPortFrom(bind, cfg.Port), 0); err != nil {
			return fmt.Errorf("cmatose: failure trying to listen: %w", err)
		}
		req, err := next(ibv.CMEventConnectRequest)
		if err != nil {
			return err
		}
		n.id = req.ID
		defer n.id.Destroy()
		if err := n.init(vctx); err != nil {
			n.id.Reject(nil)
			return err
		}
		if err := n.id.Accept(n.qp, param); err != nil {
			return fmt.Errorf("cmatose: failure accepting: %w", err)
		}
		if _, err := next(ibv.CMEventEstablished); err != nil {
			return err
		}
		if cfg.MessageCount > 0 {
			fmt.Fprintln(out, "initiating data transfers")
			if err := n.postSends(); err != nil {
				return err
			}
			fmt.Fprintln(out, "completing sends")
			if err := n.poll(ctx, n.sendCQ); err != nil {
				return err
			}
			fmt.Fprintln(out, "receiving data transfers")
			if err := n.poll(ctx, n.recvCQ); err != nil {
				return err
			}
			fmt.Fprintln(out, "data transfers complete")
		}
		fmt.Fprintln(out, "cmatose: disconnecting")
		if err := n.id.Disconnect(); err != nil {
			return err
		}
		if _, err := next(ibv.CMEventDisconnected); err != nil {
			return err
		}
		fmt.Fprintln(out, "disconnected")
		return nil
	}

	fmt.Fprintln(out, "cmatose: starting client")
	dst, err := netip.ParseAddr(cfg.Server)
	if err != nil {
		return fmt.Errorf("getrdmaaddr error: %w", err)
	}
	var src netip.Addr
	if cfg.Bind != "" {
		if src, err = netip.ParseAddr(cfg.Bind); err != nil {
			return fmt.Errorf("getrdmaaddr error: %w", err)
		}
	}
	fmt.Fprintln(out, "cmatose: connecting")
	if n.id, err = ch.CreateID(); err != nil {
		return err
	}
	defer n.id.Destroy()
	if err := n.id.ResolveAddr(src, netip.AddrPortFrom(dst, cfg.Port), 2*time.Second); err != nil {
		return fmt.Errorf("cmatose: failure getting addr: %w", err)
	}
	if _, err := next(ibv.CMEventAddrResolved); err != nil {
		return err
	}
	if err := n.id.ResolveRoute(); err != nil {
		return fmt.Errorf("cmatose: resolve route failed: %w", err)
	}
	if _, err := next(ibv.CMEventRouteResolved); err != nil {
		return err
	}
	if err := n.init(vctx); err != nil {
		return err
	}
	if err := n.id.Connect(n.qp, param); err != nil {
		return fmt.Errorf("cmatose: failure connecting: %w", err)
	}
	if _, err := next(ibv.CMEventEstablished); err != nil {
		return err
	}
	if cfg.MessageCount > 0 {
		fmt.Fprintln(out, "receiving data transfers")
		if err := n.poll(ctx, n.recvCQ); err != nil {
			return err
		}
		fmt.Fprintln(out, "sending replies")
		if err := n.postSends(); err != nil {
			return err
		}
		// cmatose leaves its replies to complete while it waits for the disconnect.
		if err := n.poll(ctx, n.sendCQ); err != nil {
			return err
		}
		fmt.Fprintln(out, "data transfers complete")
	}
	if _, err := next(ibv.CMEventDisconnected); err != nil {
		return err
	}
	if err := n.id.Disconnect(); err != nil && !errors.Is(err, ibv.ErrInvalidArgument) {
		return err
	}
	return nil
}
