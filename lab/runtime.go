package lab

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/lab/tunnel"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/service"
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
	// What it returns is closed with the lab. It needs the hosts' namespaces: Up
	// refuses it with an AddHost other than AddTAPHost.
	Services func(h *network.Host, l *Lab) (Closer, error)
	// VerbsBudget bounds what the verbs services' clients make the lab process hold
	// (Lab.VerbsBudget); nil derives it from the process's limits at Up, shared
	// equally by the hosts (service.ProcessBudget).
	VerbsBudget *service.Budget
	// AddHost creates each host's kernel side; nil is AddTAPHost (a namespace and a
	// TAP). The lab's tests that need no kernel give in-memory devices (lab/tuntest).
	AddHost AddHostFunc

	// Machine is the machine whose part of the lab this process runs, when the
	// topology places nodes on machines (docs/multi-machine.md); Peers override the
	// other machines' addresses, Secret authenticates the parts to each other and
	// Listen is the underlay address to bind ("" binds all).
	Machine string
	Peers   map[string]string
	Secret  []byte
	Listen  string
	// OnPeerDown, if set, is called (on its own goroutine) when another part of the
	// lab asks this one to remove itself (`rocelab down` on another machine).
	OnPeerDown func()
	// RemoteExec, if set, returns the (unstarted) command another machine's `rocelab
	// exec` or `capture` asks this part to run (tunnel.RemoteExec).
	RemoteExec func(tunnel.ExecRequest) (*exec.Cmd, error)
}

// maxLag is how far a lab's loops may fall behind real time (clock.RealOptions.MaxLag):
// the driver's default with one loop; with several, a nanosecond, so that each runs
// at real time. A frame that crosses loops is due at its sender's time plus the
// link's delay, and a sender behind its peers hands them frames due in their past,
// which their ports take as late arrivals: with the shortest link's delay (10 µs) as
// the bound, a 1 Gb/s 2:1 lab on two loops ran 67–89 % of its link (ten runs), at real
// time 78–88 %.
func maxLag(threads int) time.Duration {
	if threads == 1 {
		return clock.DefaultMaxLag
	}
	return time.Nanosecond
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
	Network  *network.Network
	clk      *clock.Real
	epoch    time.Time
	started  time.Time
	devices  map[string]Device // per host, emulated and external
	wires    []*wire
	closers  []Closer
	services map[string]Closer // by host name: what Config.Services started there
	budget   *service.Budget
	inboxes  map[string]*clock.Inbox
	recMu    sync.Mutex
	rec      *recorder // op "record"'s, while one runs
	ctl      net.Listener
	part     *tunnel.Part // this machine's side of the tunnels and of the parts' control
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
	if err := CheckNames(cfg.Store, cfg.Name, cfg.Topology); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if cfg.AddHost != nil && cfg.Services != nil {
		return nil, errors.New("lab: Services run inside the hosts' namespaces: they need the default AddHost")
	}
	if cfg.AddHost == nil {
		cfg.AddHost = AddTAPHost
	}
	l := &Lab{cfg: cfg, devices: map[string]Device{}, inboxes: map[string]*clock.Inbox{}, services: map[string]Closer{}, log: cfg.Log, progress: cfg.Progress}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	if n, err := raiseFileLimit(); err != nil {
		l.log.Warn("cannot raise the descriptor limit", zap.Error(err))
	} else {
		l.log.Debug("descriptor limit", zap.Uint64("nofile", n))
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

	opts := network.Options{RandomIDs: true, MaxUnackedPSNs: qp.RXEMaxUnackedPSNs,
		StaticNeighbours: staticNeighbours(t), OnPanic: l.nodePanicked, Monitors: true}
	if err := l.startPart(&opts); err != nil {
		return err
	}
	place := t.Placement()
	v4, v6 := subnets(t)
	mtu := map[string]int{}
	for _, lk := range t.Links {
		for _, e := range lk.Endpoints {
			mtu[e] = lk.MTU
		}
	}
	for i, h := range t.Hosts {
		if cfg.Machine != "" && place[h.Name] != cfg.Machine {
			continue // another part's
		}
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
			if o.Name == h.Name || h.External == topo.ExternalBridge || !staticNeighbours(t) {
				continue
			}
			for _, a := range []netip.Addr{o.IPv4, o.IPv6} {
				if a.IsValid() {
					hc.Neighbours = append(hc.Neighbours, netns.Neighbour{IP: a, MAC: o.MAC})
				}
			}
		}
		dev, err := cfg.AddHost(cfg.Store, cfg.Name, hc)
		if err != nil {
			return err
		}
		l.devices[h.Name] = dev
		if n := len(t.Hosts); n >= 8 && (i+1)%max(1, n/4) == 0 || i+1 == n {
			l.progress(fmt.Sprintf("namespaces and TAPs: %d/%d", i+1, n))
		}
	}

	l.epoch = time.Now()
	// GrowProcs: a loop asleep in ppoll keeps its Go scheduler slot until sysmon takes
	// it back (20 µs–10 ms later); with more loops than GOMAXPROCS, waking loops would
	// wait that long.
	threads := cfg.Threads
	if threads == 0 {
		threads = DefaultThreads()
	}
	// The loops' random sources (CM PSNs, TIDs, ports) are seeded from the system's
	// at every up: a fresh lab's identifiers are not the last one's, nor guessable.
	l.clk = clock.NewReal(clock.RealOptions{Spin: cfg.Spin, GrowProcs: true, MaxLag: maxLag(threads), Seed: randomSeed()})
	look := cfg.TxLookahead
	if look == 0 {
		look = DefaultTxLookahead
	}
	// The lab's hosts reach kernels, VMs and TAP queues that drop bursts (rxe under
	// QEMU drops them by the hundred): rxe's bound on unacknowledged PSNs keeps a
	// go-back-N retry from resending a whole send queue per loss.
	opts.TxLookahead, opts.Threads = look, threads
	opts.HostRelay = func(host string) link.Receiver {
		return &hostWriter{dev: l.devices[host], log: l.log.With(zap.String("host", host))}
	}
	opts.External = func(x *network.External) error {
		l.wires = append(l.wires, newWire(x, l.devices[x.Name], l.log.With(zap.String("external", x.Name))))
		return nil
	}
	net, err := network.Build(t, l.clk, opts)
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
	if l.part != nil {
		if err := l.part.Start(l.clk, net.Pool); err != nil {
			return err
		}
		l.progress(fmt.Sprintf("part %s: %d tunnels, VXLAN on UDP %d, control on TCP %d", cfg.Machine,
			len(l.part.Tunnels()), tunnel.VXLANPort, tunnel.ControlPort))
	}

	for _, h := range net.Hosts {
		hostDev, rnicDev, log := l.devices[h.Name], h.Device, l.log.With(zap.String("host", h.Name))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			readHost(hostDev, log, func(frames [][]byte) { rnicDev.SendFromHost(frames) })
		}()
	}
	for _, w := range l.wires {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); w.read() }()
	}
	if cfg.Services != nil {
		// After the descriptor limit is raised (Up) and the fabric built: the budget
		// is what is left for the clients.
		if l.budget = cfg.VerbsBudget; l.budget == nil {
			l.budget = service.ProcessBudget(len(net.Hosts))
		}
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
			l.services[h.Name] = c
		}
		l.progress("verbs services listening")
		// Hosts with a verbs service show its device where programs look for one.
		if err := l.createViews(); err != nil {
			return err
		}
		l.progress("host views (hostname, /sys, /etc/hosts, /dev/infiniband) ready")
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

// VerbsBudget is the budget the hosts' verbs services share (Config.VerbsBudget), nil
// before the services start.
func (l *Lab) VerbsBudget() *service.Budget { return l.budget }

// Dir is the lab's state directory.
func (l *Lab) Dir() string { return l.cfg.Store.Dir(l.cfg.Name) }

// Name is the lab's name.
func (l *Lab) Name() string { return l.cfg.Name }

// Close stops the lab's control socket, services, relays and clock, and closes the
// hosts' devices (TAPs: their netdevs vanish; their namespaces stay until netns.Cleaner.Down removes
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
	if l.part != nil {
		errs = append(errs, l.part.Close())
	}
	for _, c := range l.closers {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	for _, d := range l.devices {
		errs = append(errs, d.Close()) // wakes the relays' reads
	}
	l.wg.Wait()
	if l.clk != nil {
		l.clk.Close()
	}
	return errors.Join(errs...)
}

// relayBatch is how many frames one device read takes: one wake-up serves a burst.
const relayBatch = 64

// readHost reads the frames the host's kernel sends through dev, in batches, and hands
// each batch to deliver (which must copy what it keeps: the buffers are reused). It
// returns when dev is closed.
func readHost(dev Device, log *zap.Logger, deliver func(frames [][]byte)) {
	bufs := make([][]byte, relayBatch)
	for i := range bufs {
		bufs[i] = make([]byte, link.MaxFrame)
	}
	sizes := make([]int, relayBatch)
	frames := make([][]byte, relayBatch)
	for {
		n, err := dev.Read(bufs, sizes)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				log.Warn("host device read", zap.Error(err))
			}
			return
		}
		for i := range n {
			frames[i] = bufs[i][:sizes[i]]
		}
		deliver(frames[:n])
	}
}

// hostWriter hands the frames it receives to a host's kernel: it is a soft-RNIC's Host
// receiver (the frames the soft-RNIC does not terminate) and the fabric side of an
// external host's wire. It runs on the node's loop; a TAP write is a short syscall
// that never waits for the reader (the kernel queues or drops).
type hostWriter struct {
	dev     Device
	log     *zap.Logger
	scratch [][]byte
	errors  uint64
}

func (w *hostWriter) Receive(frames []*link.Frame) {
	w.scratch = w.scratch[:0]
	for _, f := range frames {
		w.scratch = append(w.scratch, f.Bytes())
	}
	if n, err := w.dev.Write(w.scratch); err != nil {
		w.errors++
		if w.errors == 1 || w.errors%1000 == 0 {
			w.log.Warn("host device write", zap.Int("written", n), zap.Int("of", len(frames)), zap.Error(err), zap.Uint64("errors", w.errors))
		}
	}
	for _, f := range frames {
		f.Release()
	}
}

// StaticNeighbourHosts is the largest lab whose hosts get every other host as a
// permanent neighbour, in each kernel and each soft-RNIC, so that no first packet waits
// for ARP. Beyond it that costs one netlink call per pair of hosts (quadratic: 2 million
// for 1,024 hosts) and more entries than a kernel's neighbour table holds by default
// (gc_thresh3, 1024), so larger labs resolve by ARP and NDP as real hosts do; the
// soft-RNICs learn their neighbours from the frames they relay.
const StaticNeighbourHosts = 64

func staticNeighbours(t *topo.Topology) bool { return len(t.Hosts) <= StaticNeighbourHosts }

// CheckNames says whether a lab named name can run topology t from store: a valid lab
// name, and every socket path and address it derives from the names within the
// kernel's limits. `up` calls it before it creates anything, so a name that is too long
// fails at once, naming the limit, rather than at the end of the build.
func CheckNames(store netns.Store, name string, t *topo.Topology) error {
	if err := netns.ValidName(name); err != nil {
		return fmt.Errorf("lab %w", err)
	}
	if p := ControlPath(store, name); len(p) > maxSocketPath {
		return fmt.Errorf("lab %s: its control socket %s is %d bytes, more than a socket path holds (%d): shorten the lab name or %s",
			name, p, len(p), maxSocketPath, netns.StateRootEnv)
	}
	for _, h := range t.Hosts {
		if err := service.CheckAddress(name, h.Name); err != nil {
			return err
		}
	}
	return nil
}

// maxSocketPath is the longest path a Unix socket may have: sun_path's 108 bytes less
// the terminating NUL.
const maxSocketPath = 107

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

// fileLimit is the descriptor limit a lab process asks for: every host's TAP, sockets,
// eventfds and its apps' connections, with room for a host whose apps open thousands.
const fileLimit = 1 << 20

// raiseFileLimit raises RLIMIT_NOFILE (hard and soft) towards fileLimit, as far as
// the kernel's fs.nr_open and the process's privilege allow, and returns the soft
// limit in force. Go raises the soft limit to the hard one at start-up; a lab process
// running as root can raise the hard one too.
func raiseFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := uint64(fileLimit)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			want = min(want, n)
		}
	}
	if want > lim.Max {
		raised := unix.Rlimit{Cur: want, Max: want}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err == nil {
			return want, nil
		}
	}
	lim.Cur = lim.Max
	return lim.Cur, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
}

// nodePanicked logs a node's first contained panic with its stack: the frame was
// dropped and counted (status shows Panics), the node and the lab run on, and the stack
// is what a bug report needs.
func (l *Lab) nodePanicked(node string, v any, stack []byte) {
	l.log.Error("a frame made a node panic: dropped it, the node runs on (later panics are only counted)",
		zap.String("node", node), zap.Any("panic", v), zap.ByteString("stack", stack))
}

// randomSeed draws a seed for the lab's random sources from the system's.
func randomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails on Linux (getrandom)
	return binary.LittleEndian.Uint64(b[:])
}
