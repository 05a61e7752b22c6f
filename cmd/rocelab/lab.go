package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
)

func init() {
	rootCmd.AddCommand(newUpCmd(), newLabProcessCmd())
}

// labLog is the lab process's log in its state directory.
const labLog = "lab.log"

// Lines the lab process writes on its readiness pipe.
const (
	readyPrefix    = "ready"
	progressPrefix = "progress "
	errorPrefix    = "error "
)

func needRootFor(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (network namespaces and TAP devices): run it with sudo; "+
			"`rocelab experiment` runs the fabric and soft-RNICs in virtual time without root", what)
	}
	return nil
}

// defaultLabName derives a lab name from the topology file: topologies/incast.yaml → incast.
func defaultLabName(file string) string {
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

// upHelp is up's --help text.
const upHelp = `up builds the topology as a lab: one network namespace per host with a TAP netdev
as its NIC (addresses, MTU and static neighbours configured), and one lab process that
runs every switch and soft-RNIC on the real-time clock. The soft-RNIC relays the host
kernel's frames (ARP, ping, TCP) to and from the fabric and terminates RoCEv2 itself.
Each host's verbs service listens inside its namespace for apps (rocelab exec).

up prints its progress and returns once the lab is ready; the lab process keeps
running in the background, with its pid, log (lab.log) and state in
$ROCELAB_STATE_DIR/LAB (default /run/rocelab/LAB). Stop it with rocelab down.

--metrics ADDR (host:port) serves the lab's counters to Prometheus at
http://ADDR/metrics from the lab process (docs/observability.md); rocelab metrics does
the same for a lab already running. --web ADDR serves a live view of the lab at
http://ADDR/ (topology, link utilization and queues, flows, captures); rocelab web does
the same for a lab already running.

A topology that places its nodes on machines (machines:, and machine: per host or
switch) runs as one part per machine: on each, up --machine NAME --secret-file FILE
starts that machine's hosts and switches, and each link to another machine becomes a
VXLAN tunnel (UDP 4789) between the two parts, which authenticate each other with the
lab secret on TCP 4790. status on any machine shows every part; down on any machine
removes every part (docs/multi-machine.md).

--exit-with PID ties the lab to a process: when that process exits, however it exits,
the lab goes down as rocelab down would take it, with the processes started in it. A
script passes its own pid ($$); a test harness sets $ROCELAB_EXIT_WITH to its pid once,
so that a test killed by its timeout leaves no lab behind.`

func newUpCmd() *cobra.Command {
	var file, name, metrics, webAddr, captureDir string
	var threads, exitWith int
	var foreground, verbose bool
	var timeout time.Duration
	var part partFlags
	cmd := &cobra.Command{
		Use:   "up -f TOPOLOGY.yaml [--name LAB] [--metrics ADDR] [--web ADDR] [--machine M --secret-file F]",
		Short: "Start a lab: namespaces, TAPs, the Go fabric and a soft-RNIC per host",
		Long:  upHelp,
		Example: `  sudo rocelab up -f topologies/two-hosts.yaml
  sudo rocelab up -f topologies/leaf-spine.yaml --name ls
  sudo rocelab status
  sudo rocelab exec h1 -- ping -c 3 10.0.0.2
  sudo rocelab down
  sudo rocelab up -f topologies/two-machines.yaml --machine a --secret-file lab.secret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("up: -f TOPOLOGY.yaml is required (see topologies/)")
			}
			if name == "" {
				name = defaultLabName(file)
			}
			t, err := topo.Load(file)
			if err != nil {
				return err
			}
			if err := lab.CheckNames(netns.DefaultStore(), name, t); err != nil {
				return fmt.Errorf("up: %w (choose another with --name)", err)
			}
			if err := needRootFor("rocelab up"); err != nil {
				return err
			}
			partArgs, err := part.args()
			if err != nil {
				return err
			}
			watched, err := openExitWith(exitWith)
			if err != nil {
				return fmt.Errorf("up: %w", err)
			}
			if foreground {
				log := stderrLogger(cmd.ErrOrStderr(), verbose)
				err := runLabProcess(name, file, threads, serving{metrics, webAddr, captureDir}, part, nil, watched, log, cmd.OutOrStdout())
				_, derr := (&netns.Cleaner{Store: netns.DefaultStore(), Log: log}).Down(name)
				if errors.Is(derr, os.ErrNotExist) {
					derr = nil
				}
				return errors.Join(err, derr)
			}
			if timeout <= 0 {
				return fmt.Errorf("up: --timeout %v: want a positive duration", timeout)
			}
			return startDaemon(cmd.OutOrStdout(), name, file, threads, timeout, serving{metrics, webAddr, captureDir}, partArgs, watched)
		},
	}
	part.bind(cmd.Flags())
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file (YAML)")
	cmd.Flags().StringVar(&name, "name", "", "lab name (default: the topology file's base name)")
	cmd.Flags().BoolVar(&foreground, "foreground", false, "run the lab in this terminal until Ctrl-C, then remove it")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "with --foreground, log each step")
	cmd.Flags().IntVar(&threads, "threads", defaultThreads, threadsHelp)
	cmd.Flags().IntVar(&exitWith, "exit-with", exitWithDefault(), exitWithHelp)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up, and remove the half-built lab, if it is not ready by then")
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port)")
	cmd.Flags().StringVar(&webAddr, "web", "", "serve a live view of the lab at http://ADDR/ (host:port)")
	cmd.Flags().StringVar(&captureDir, "capture-dir", defaultCaptureDir, "with --web, where captures started from the page are written")
	return cmd
}

// serving is what the lab process serves besides its control socket.
type serving struct {
	metrics    string // Prometheus address, "" for none
	web        string // live view address, "" for none
	captureDir string // where the live view's captures go
}

// start serves the lab's metrics and live view as asked, saying where on progress.
func (srv serving) start(l *lab.Lab, name string, progress func(string)) error {
	if srv.metrics != "" {
		addr, err := serveMetrics(srv.metrics, func() (lab.Status, error) { return l.StatusOfParts().WholeLab(), nil }, true)
		if err != nil {
			return err
		}
		progress("Prometheus metrics at http://" + addr + "/metrics")
	}
	if srv.web != "" {
		url, err := serveWeb(srv.web, netns.DefaultStore(), name, srv.captureDir)
		if err != nil {
			return err
		}
		progress("live view at " + url)
	}
	return nil
}

// startDaemon starts the lab process detached (its own session, output to the lab's
// log), relays its progress and returns when it reports ready. If it fails, whatever
// it created is removed.
func startDaemon(out io.Writer, name, file string, threads int, timeout time.Duration, srv serving, partArgs []string, exitWith *os.File) error {
	store := netns.DefaultStore()
	if l, err := store.Load(name); err == nil {
		if l.Running() {
			return fmt.Errorf("up: lab %s already runs (pid %d); rocelab down %s stops it", name, l.Owner.PID, name)
		}
		return fmt.Errorf("up: lab %s has leftovers of a crashed run; rocelab clean removes them", name)
	}
	if err := store.MakeDir(name); err != nil {
		return err
	}
	d, err := startLabProcess(store, name, file, threads, srv, partArgs, exitWith)
	if err != nil {
		return err
	}
	defer d.progress.Close()
	err = d.waitReady(out, name, timeout)
	if err == nil {
		d.cmd.Process.Release() // it outlives us: `rocelab down` stops it
		return printNextSteps(out, store, name)
	}
	return d.remove(store, name, err)
}

// daemon is a lab process that up started and waits for.
type daemon struct {
	cmd      *exec.Cmd
	progress *os.File // its progress lines; up's acknowledgement of "ready" goes back
	logPath  string
	start    time.Time
}

// startLabProcess starts `rocelab lab-process` in a session of its own, its output in
// the lab's log. It hands on exitWith, the pidfd of --exit-with's process, if not nil.
func startLabProcess(store netns.Store, name, file string, threads int, srv serving, partArgs []string, exitWith *os.File) (*daemon, error) {
	logPath := filepath.Join(store.Dir(name), labLog)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// One socket pair carries the lab process's progress to us and our acknowledgement
	// of "ready" back: a lab process that hears no acknowledgement knows that up died.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	pr, pw := os.NewFile(uintptr(pair[0]), "lab-process"), os.NewFile(uintptr(pair[1]), "up")
	defer pw.Close()
	self, err := os.Executable()
	if err != nil {
		pr.Close()
		return nil, err
	}
	abs, _ := filepath.Abs(file)
	captureDir, err := filepath.Abs(srv.captureDir)
	if err != nil {
		pr.Close()
		return nil, err
	}
	c := exec.Command(self, "lab-process", "--name", name, "-f", abs, "--ready-fd", "3", "--threads", strconv.Itoa(threads),
		"--metrics", srv.metrics, "--web", srv.web, "--capture-dir", captureDir)
	c.Args = append(c.Args, partArgs...)
	c.Stdout, c.Stderr, c.ExtraFiles = logf, logf, []*os.File{pw}
	if exitWith != nil {
		c.Args = append(c.Args, "--exit-with-fd", "4")
		c.ExtraFiles = append(c.ExtraFiles, exitWith)
	}
	c.Env = append(os.Environ(), netns.StateRootEnv+"="+store.Root)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	d := &daemon{cmd: c, progress: pr, logPath: logPath, start: time.Now()}
	if err := c.Start(); err != nil {
		pr.Close()
		return nil, err
	}
	return d, nil
}

// waitReady relays the lab process's progress until it reports ready (and hears our
// acknowledgement), fails, exits, or timeout passes. Until the lab is ready, up owns
// it: Ctrl-C, a kill or the timeout stops it. (A SIGKILL of up cannot be caught; the
// lab process notices that up is gone when it next reports and removes the lab
// itself, see runLabProcess.)
func (d *daemon) waitReady(out io.Writer, name string, timeout time.Duration) error {
	pid := d.cmd.Process.Pid
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(d.progress); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var err error
	for {
		select {
		case line, ok := <-lines:
			switch {
			case !ok:
				if err == nil {
					err = fmt.Errorf("the lab process exited before the lab was ready; its log:\n%s", tail(d.logPath, 20))
				}
				return err
			case line == readyPrefix:
				fmt.Fprintf(out, "lab %s ready in %v (lab process pid %d, log %s)\n", name, time.Since(d.start).Round(time.Millisecond), pid, d.logPath)
				if _, err := fmt.Fprintln(d.progress, readyAck); err != nil {
					return fmt.Errorf("the lab process went away as it became ready: %w", err)
				}
				return nil
			case strings.HasPrefix(line, progressPrefix):
				fmt.Fprintln(out, "  "+strings.TrimPrefix(line, progressPrefix))
			case strings.HasPrefix(line, errorPrefix):
				err = errors.New(strings.TrimPrefix(line, errorPrefix))
			}
		case s := <-sigs:
			syscall.Kill(pid, syscall.SIGTERM)
			return fmt.Errorf("interrupted (%v) before the lab was ready", s)
		case <-deadline.C:
			syscall.Kill(pid, syscall.SIGTERM)
			return fmt.Errorf("not ready after %v (--timeout); its log:\n%s", timeout, tail(d.logPath, 20))
		}
	}
}

// remove removes what a failed start created, once the process has exited (it may be
// recording or creating things until then); a SIGTERM it ignores while it builds
// turns into a SIGKILL. It returns the start's error with any of the removal's.
func (d *daemon) remove(store netns.Store, name string, err error) error {
	exited := make(chan struct{})
	go func() { d.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	_, derr := (&netns.Cleaner{Store: store}).Down(name)
	if errors.Is(derr, os.ErrNotExist) { // it recorded nothing: only up's log is there
		derr = os.RemoveAll(store.Dir(name))
	}
	return fmt.Errorf("up: lab %s: %w", name, errors.Join(err, derr))
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func printNextSteps(out io.Writer, store netns.Store, name string) error {
	l, err := store.Load(name)
	if err != nil {
		return err
	}
	for _, h := range l.Hosts {
		fmt.Fprintf(out, "  %-6s %-16s %-22s %s\n", h.Name, h.IPv4.Addr(), h.IPv6.Addr(), h.Netns)
	}
	first := "h1"
	if len(l.Hosts) > 0 {
		first = l.Hosts[0].Name
	}
	fmt.Fprintf(out, "next: rocelab status · rocelab exec %s -- CMD · rocelab capture s1:p0 | wireshark -k -i - · rocelab down %s\n", first, name)
	return nil
}

// newLabProcessCmd is the lab process itself, started by up (hidden).
func newLabProcessCmd() *cobra.Command {
	var file, name string
	var srv serving
	var part partFlags
	var readyFD, exitWithFD, threads int
	cmd := &cobra.Command{
		Use:    "lab-process",
		Short:  "Run a lab (started by rocelab up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ready, exitWith *os.File
			if readyFD > 0 {
				ready = os.NewFile(uintptr(readyFD), "ready")
			}
			if exitWithFD > 0 {
				exitWith = os.NewFile(uintptr(exitWithFD), "exit-with")
			}
			enc := zap.NewProductionEncoderConfig()
			enc.EncodeTime = zapcore.ISO8601TimeEncoder
			log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(os.Stderr), zapcore.InfoLevel))
			return runLabProcess(name, file, threads, srv, part, ready, exitWith, log, io.Discard)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file")
	cmd.Flags().StringVar(&name, "name", "", "lab name")
	cmd.Flags().IntVar(&readyFD, "ready-fd", 0, "fd to report progress and readiness on")
	cmd.Flags().IntVar(&exitWithFD, "exit-with-fd", 0, "pidfd of the process whose exit takes the lab down")
	cmd.Flags().StringVar(&srv.metrics, "metrics", "", "serve Prometheus metrics at this address")
	cmd.Flags().StringVar(&srv.web, "web", "", "serve the live view at this address")
	cmd.Flags().StringVar(&srv.captureDir, "capture-dir", defaultCaptureDir, "where the live view's captures go")
	cmd.Flags().IntVar(&threads, "threads", defaultThreads, threadsHelp)
	part.bind(cmd.Flags())
	return cmd
}

// runLabProcess brings the lab up and runs it until SIGTERM or SIGINT, then closes it
// without removing it: removal is down's job, which sent the signal (or clean's, after
// a crash). If the process of the pidfd exitWith exits first, the lab goes down as if
// up had gone away before it was ready.
func runLabProcess(name, file string, threads int, srv serving, part partFlags, ready, exitWith *os.File, log *zap.Logger, out io.Writer) error {
	watchedExit := exitOf(exitWith)
	abandoned := false // up went away before the lab was ready
	report := func(prefix, s string) {
		if ready != nil {
			if _, err := fmt.Fprintln(ready, prefix+s); err != nil {
				abandoned = true
			}
		}
		if prefix == progressPrefix {
			fmt.Fprintln(out, "  "+s)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	t, err := topo.Load(file)
	if err != nil {
		report(errorPrefix, err.Error())
		return err
	}
	cfg := lab.Config{Name: name, Topology: t, TopologyFile: file, Store: netns.DefaultStore(), Log: log,
		Threads: threads, Progress: func(s string) { report(progressPrefix, s) }, Services: verbsServices,
		// Another part's down asks this one to go: its own down, this part only (the
		// asking part is removing itself and told the others).
		OnPeerDown: func() {
			if err := removeDetached(name, "--this-part"); err != nil {
				log.Error("could not go down as another part asked", zap.Error(err))
			}
		}}
	if err := part.apply(&cfg); err != nil {
		report(errorPrefix, err.Error())
		return err
	}
	cfg.RemoteExec = remoteExecCommand(name)
	l, err := lab.Up(cfg)
	if err != nil {
		report(errorPrefix, err.Error())
		log.Error("lab up failed", zap.Error(err))
		return err
	}
	if err := recordPart(netns.DefaultStore(), name, part); err != nil {
		report(errorPrefix, err.Error())
		return errors.Join(err, l.Close())
	}
	if err := srv.start(l, name, func(s string) { report(progressPrefix, s) }); err != nil {
		report(errorPrefix, err.Error())
		return errors.Join(err, l.Close())
	}
	select {
	case sig := <-sigs: // up was interrupted or timed out while we built
		log.Info("stopped before ready", zap.String("signal", sig.String()))
		abandoned = true
	case <-watchedExit:
		log.Info("the --exit-with process exited before the lab was ready")
		abandoned = true
	default:
		report(readyPrefix, "")
	}
	if ready != nil {
		// up acknowledges "ready"; without it (up died: EOF) nobody knows the lab runs.
		if ack, err := bufio.NewReader(ready).ReadString('\n'); err != nil || ack != readyAck+"\n" {
			abandoned = true
		}
		ready.Close()
	}
	if abandoned {
		log.Error("up went away before the lab was ready: removing the lab")
		return errors.Join(l.Close(), removeDetached(name, "--this-part"))
	}
	fmt.Fprintf(out, "lab %s running; Ctrl-C stops it (then rocelab down %s removes it)\n", name, name)
	select {
	case sig := <-sigs:
		log.Info("stopping", zap.String("signal", sig.String()))
		return l.Close()
	case <-watchedExit:
		log.Info("the --exit-with process exited: removing the lab")
		if ready == nil { // in the foreground, up removes the lab once this returns
			return l.Close()
		}
		return errors.Join(l.Close(), removeDetached(name, "--this-part"))
	}
}

// readyAck is up's answer to the lab process's ready line.
const readyAck = "ok"

// removeDetached starts `rocelab down NAME [ARGS]` in a session of its own, for a lab
// process whose up went away or that another part of the lab asked to go: down stops
// this process and removes the lab, as it would have if up had been told the lab
// failed.
func removeDetached(name string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c := exec.Command(self, append([]string{"down", name}, args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return err
	}
	return c.Process.Release()
}

// defaultThreads is up's --threads default: lab.DefaultThreads.
const defaultThreads = 0

const threadsHelp = "event-loop threads the lab's switches and soft-RNICs share (0: one per 4 CPUs, at least 1; fewer threads, fewer cross-thread wake-ups per frame)"
