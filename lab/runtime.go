package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/qp"
)

// Config describes a lab to bring up.
type Config struct {
	Name     string
	Topology *topo.Topology
	// TopologyFile is where the topology came from, for status output.
	TopologyFile string
	Store        netns.Store
	Log          *zap.Logger // nil logs nothing
	// Progress, if set, hears one line per step of Up (`rocelab up` prints them).
	Progress func(string)
	// Spin is the real-time driver's spin before deadlines; 0 is clock.DefaultSpin.
	Spin time.Duration
	// TxLookahead lets devices hand frames to links this far ahead of their
	// serialization (batching in real time); 0 means DefaultTxLookahead.
	TxLookahead time.Duration
	// Threads is how many event-loop threads the lab's nodes share (Options.Threads);
	// 0 is DefaultThreads.
	Threads int
	// Services, if set, is called inside each host's namespace (on a thread switched
	// into it) once the lab runs, to start what apps reach there: the verbs service.
	// What it returns is closed with the lab.
	Services func(h *Host, l *Lab) (Closer, error)
}

// DefaultThreads is a lab's number of event-loop threads: one per four CPUs, at least
// one. The apps in the lab's namespaces poll their completion queues on the other CPUs,
// and every frame that crosses from one loop thread to another costs a wake-up of the
// receiving thread: on two cores, a two-host lab's 64-byte send_lat half round trip
// was p50 47 µs with a thread per node (three), 30 µs with two and 11.7 µs with one,
// whose write_bw also rose from 5.7 to 8.3–9.8 Gb/s.
func DefaultThreads() int { return max(1, runtime.NumCPU()/4) }

// Closer is something a lab closes when it stops.
type Closer interface{ Close() error }

// DefaultTxLookahead batches a real-time device's frames over this much wire time.
const DefaultTxLookahead = 20 * time.Microsecond

// ControlSocket is the lab process's control socket in the lab's state directory:
// `rocelab status` and `rocelab capture` talk to it.
const ControlSocket = "control.sock"

// Lab is a running lab: the kernel side (namespaces, TAPs; package netns), the nodes
// on the real-time driver, a relay per host between its TAP and its soft-RNIC, the
// per-namespace services and the control socket. One process runs it: the lab process.
type Lab struct {
	cfg      Config
	Network  *Network
	clk      *clock.Real
	epoch    time.Time
	started  time.Time
	taps     map[string]*netns.TAP
	wires    []*wire
	closers  []Closer
	inboxes  map[string]*clock.Inbox
	ctl      net.Listener
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	closed   bool
	log      *zap.Logger
	progress func(string)
}

// Up builds and starts a lab: it records the lab with this process as its owner,
// creates each host's namespace and TAP, builds the nodes, starts the clock, the
// relays, the services and the control socket. On failure it closes what it opened;
// removing the namespaces it created is then the caller's job (netns.Cleaner.Down),
// as it is after Close.
func Up(cfg Config) (*Lab, error) {
	if err := netns.ValidName(cfg.Name); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	l := &Lab{cfg: cfg, taps: map[string]*netns.TAP{}, inboxes: map[string]*clock.Inbox{}, log: cfg.Log, progress: cfg.Progress}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	if l.progress == nil {
		l.progress = func(string) {}
	}
	if err := l.up(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) up() error {
	cfg, t := l.cfg, l.cfg.Topology
	self, err := netns.Self()
	if err != nil {
		return err
	}
	if old, err := cfg.Store.Load(cfg.Name); err == nil {
		if old.Running() {
			return fmt.Errorf("lab %s is already running (pid %d): rocelab down %s first", cfg.Name, old.Owner.PID, cfg.Name)
		}
		return fmt.Errorf("lab %s has leftovers of a crashed run: rocelab clean removes them", cfg.Name)
	}
	// Record before create: the state file names this process before anything exists.
	if err := cfg.Store.Save(&netns.Lab{Name: cfg.Name, Owner: self, Created: time.Now().UTC()}); err != nil {
		return err
	}
	l.progress(fmt.Sprintf("lab %s: %d hosts, %d switches, %d links (%s telemetry, %s)", cfg.Name,
		len(t.Hosts), len(t.Switches), len(t.Links), t.Telemetry, t.CongestionControl))

	v4, v6 := subnets(t)
	mtu := map[string]int{}
	for _, lk := range t.Links {
		for _, e := range lk.Endpoints {
			mtu[e] = lk.MTU
		}
	}
	for i, h := range t.Hosts {
		hc := netns.HostConfig{Name: h.Name, MAC: h.MAC, MTU: mtu[h.Name], Bridge: h.Bridge}
		// With a bridge (external VM), MAC and addresses are the VM's: netns records them
		// for status and configures none on the bridge's port.
		if h.IPv4.IsValid() {
			hc.IPv4 = netip.PrefixFrom(h.IPv4, v4)
		}
		if h.IPv6.IsValid() {
			hc.IPv6 = netip.PrefixFrom(h.IPv6, v6)
		}
		for _, o := range t.Hosts {
			if o.Name == h.Name || h.External == topo.ExternalBridge {
				continue
			}
			for _, a := range []netip.Addr{o.IPv4, o.IPv6} {
				if a.IsValid() {
					hc.Neighbours = append(hc.Neighbours, netns.Neighbour{IP: a, MAC: o.MAC})
				}
			}
		}
		tap, err := netns.AddHost(cfg.Store, cfg.Name, hc)
		if err != nil {
			return err
		}
		l.taps[h.Name] = tap
		if n := len(t.Hosts); n >= 8 && (i+1)%max(1, n/4) == 0 || i+1 == n {
			l.progress(fmt.Sprintf("namespaces and TAPs: %d/%d", i+1, n))
		}
	}

	l.epoch = time.Now()
	// GrowProcs: a loop asleep in ppoll keeps its Go scheduler slot until sysmon takes
	// it back (20 µs–10 ms later); with more loops than GOMAXPROCS, waking loops would
	// wait that long.
	l.clk = clock.NewReal(clock.RealOptions{Spin: cfg.Spin, GrowProcs: true})
	look := cfg.TxLookahead
	if look == 0 {
		look = DefaultTxLookahead
	}
	threads := cfg.Threads
	if threads == 0 {
		threads = DefaultThreads()
	}
	// The lab's hosts reach kernels, VMs and TAP queues that drop bursts (rxe under
	// QEMU drops them by the hundred): rxe's bound on unacknowledged PSNs keeps a
	// go-back-N retry from resending a whole send queue per loss.
	net, err := Build(t, l.clk, Options{TxLookahead: look, MaxUnackedPSNs: qp.RXEMaxUnackedPSNs,
		StaticNeighbours: true, Monitors: true, Threads: threads,
		HostRelay: func(host string) link.Receiver {
			return &tapWriter{tap: l.taps[host], log: l.log.With(zap.String("host", host))}
		},
		External: func(x *External) error {
			l.wires = append(l.wires, newWire(x, l.taps[x.Name], l.log.With(zap.String("external", x.Name))))
			return nil
		}})
	if err != nil {
		return err
	}
	l.Network = net
	for _, s := range net.Switches {
		l.inboxes[s.Name] = clock.NewInbox(s.Loop)
	}
	if err := l.clk.Start(); err != nil {
		return err
	}
	l.started = time.Now()
	l.progress("fabric and soft-RNICs running (real time)")

	for _, h := range net.Hosts {
		tap, dev, log := l.taps[h.Name], h.Device, l.log.With(zap.String("host", h.Name))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			readTAP(tap, log, func(frames [][]byte) { dev.SendFromHost(frames) })
		}()
	}
	for _, w := range l.wires {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); w.read() }()
	}
	if cfg.Services != nil {
		for _, h := range net.Hosts {
			var c Closer
			err := netns.Do(netns.NamespaceName(cfg.Name, h.Name), func() error {
				var err error
				c, err = cfg.Services(h, l)
				return err
			})
			if err != nil {
				return fmt.Errorf("lab: services of %s: %w", h.Name, err)
			}
			l.closers = append(l.closers, c)
		}
		l.progress("verbs services listening")
	}
	if err := l.listenControl(); err != nil {
		return err
	}
	l.log.Info("lab up", zap.String("lab", cfg.Name), zap.Int("hosts", len(t.Hosts)), zap.Duration("took", time.Since(l.epoch)))
	return nil
}

// subnets returns the prefix lengths that put every host's IPv4 and IPv6 address in
// one subnet: the hosts share one L2 segment (bridge-switches), so each kernel reaches
// every other host on-link. /24 and /64 when they fit.
func subnets(t *topo.Topology) (v4, v6 int) {
	v4, v6 = 24, 64
	for _, h := range t.Hosts {
		for _, o := range t.Hosts {
			if h.IPv4.IsValid() && o.IPv4.IsValid() {
				for v4 > 8 && !netip.PrefixFrom(h.IPv4, v4).Masked().Contains(o.IPv4) {
					v4 -= 8
				}
			}
			if h.IPv6.IsValid() && o.IPv6.IsValid() {
				for v6 > 16 && !netip.PrefixFrom(h.IPv6, v6).Masked().Contains(o.IPv6) {
					v6 -= 16
				}
			}
		}
	}
	return v4, v6
}

// Dir is the lab's state directory.
func (l *Lab) Dir() string { return l.cfg.Store.Dir(l.cfg.Name) }

// Name is the lab's name.
func (l *Lab) Name() string { return l.cfg.Name }

// Close stops the lab's control socket, services, relays and clock, and closes the
// TAPs (their netdevs vanish; their namespaces stay until netns.Cleaner.Down removes
// them). It is safe to call more than once.
func (l *Lab) Close() error {
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	if l.ctl != nil {
		errs = append(errs, l.ctl.Close())
	}
	for _, c := range l.closers {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	for _, t := range l.taps {
		errs = append(errs, t.Close()) // wakes the relays' reads
	}
	l.wg.Wait()
	if l.clk != nil {
		l.clk.Close()
	}
	return errors.Join(errs...)
}

// relayBatch is how many frames one TAP read takes: one wake-up serves a burst.
const relayBatch = 64

// readTAP reads the frames the kernel sends through tap, in batches, and hands each
// batch to deliver (which must copy what it keeps: the buffers are reused). It returns
// when the TAP is closed.
func readTAP(tap *netns.TAP, log *zap.Logger, deliver func(frames [][]byte)) {
	bufs := make([][]byte, relayBatch)
	for i := range bufs {
		bufs[i] = make([]byte, link.MaxFrame)
	}
	sizes := make([]int, relayBatch)
	frames := make([][]byte, relayBatch)
	for {
		n, err := tap.Read(0, bufs, sizes)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				log.Warn("TAP read", zap.Error(err))
			}
			return
		}
		for i := range n {
			frames[i] = bufs[i][:sizes[i]]
		}
		deliver(frames[:n])
	}
}

// tapWriter hands the frames it receives to a TAP's kernel: it is a device's Host
// receiver (the frames the soft-RNIC does not terminate) and the fabric side of an
// external host's wire. It runs on the device's loop; a TAP write
// is a short syscall that never waits for the reader (the kernel queues or drops).
type tapWriter struct {
	tap     *netns.TAP
	log     *zap.Logger
	scratch [][]byte
	errors  uint64
}

func (w *tapWriter) Receive(frames []*link.Frame) {
	w.scratch = w.scratch[:0]
	for _, f := range frames {
		w.scratch = append(w.scratch, f.Bytes())
	}
	if n, err := w.tap.Write(0, w.scratch); err != nil {
		w.errors++
		if w.errors == 1 || w.errors%1000 == 0 {
			w.log.Warn("TAP write", zap.Int("written", n), zap.Int("of", len(frames)), zap.Error(err), zap.Uint64("errors", w.errors))
		}
	}
	for _, f := range frames {
		f.Release()
	}
}

// ControlPath returns the control socket of lab in store.
func ControlPath(store netns.Store, lab string) string {
	return filepath.Join(store.Dir(lab), ControlSocket)
}

// splitPort parses "s1:p3", "s1:3" or "h1" (a host's only port) into a node and port.
func splitPort(s string) (node string, port int, err error) {
	node, p, ok := strings.Cut(s, ":")
	if !ok {
		return node, 0, nil
	}
	p = strings.TrimPrefix(p, "p")
	if _, err := fmt.Sscanf(p, "%d", &port); err != nil || port < 0 {
		return "", 0, fmt.Errorf("port %q: want NODE:PORT such as s1:p3 or s1:3", s)
	}
	return node, port, nil
}
