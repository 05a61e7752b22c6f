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

func newUpCmd() *cobra.Command {
	var file, name, metrics, webAddr, captureDir string
	var threads int
	var foreground, verbose bool
	cmd := &cobra.Command{
		Use:   "up -f TOPOLOGY.yaml [--name LAB] [--metrics ADDR] [--web ADDR]",
		Short: "Start a lab: namespaces, TAPs, the Go fabric and a soft-RNIC per host",
		Long: `up builds the topology as a lab: one network namespace per host with a TAP netdev
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
the same for a lab already running.`,
		Example: `  sudo rocelab up -f topologies/two-hosts.yaml
  sudo rocelab up -f topologies/leaf-spine.yaml --name ls
  sudo rocelab status
  sudo rocelab exec h1 -- ping -c 3 10.0.0.2
  sudo rocelab down`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("up: -f TOPOLOGY.yaml is required (see topologies/)")
			}
			if name == "" {
				name = defaultLabName(file)
			}
			if err := netns.ValidName(name); err != nil {
				return fmt.Errorf("up: lab %w (choose one with --name)", err)
			}
			if _, err := topo.Load(file); err != nil {
				return err
			}
			if err := needRootFor("rocelab up"); err != nil {
				return err
			}
			if foreground {
				log := stderrLogger(cmd.ErrOrStderr(), verbose)
				err := runLabProcess(name, file, threads, serving{metrics, webAddr, captureDir}, nil, log, cmd.OutOrStdout())
				_, derr := (&netns.Cleaner{Store: netns.DefaultStore(), Log: log}).Down(name)
				if errors.Is(derr, os.ErrNotExist) {
					derr = nil
				}
				return errors.Join(err, derr)
			}
			return startDaemon(cmd.OutOrStdout(), name, file, threads, serving{metrics, webAddr, captureDir})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file (YAML)")
	cmd.Flags().StringVar(&name, "name", "", "lab name (default: the topology file's base name)")
	cmd.Flags().BoolVar(&foreground, "foreground", false, "run the lab in this terminal until Ctrl-C, then remove it")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "with --foreground, log each step")
	cmd.Flags().IntVar(&threads, "threads", defaultThreads, threadsHelp)
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port)")
	cmd.Flags().StringVar(&webAddr, "web", "", "serve a live view of the lab at http://ADDR/ (host:port)")
	cmd.Flags().StringVar(&captureDir, "capture-dir", defaultCaptureDir, "with --web, where captures started from the page are written")
	return cmd
}

// startDaemon starts the lab process detached (its own session, output to the lab's
// log), relays its progress and returns when it reports ready. If it fails, whatever
// it created is removed.
// serving is what the lab process serves besides its control socket.
type serving struct {
	metrics    string // Prometheus address, "" for none
	web        string // live view address, "" for none
	captureDir string // where the live view's captures go
}

func startDaemon(out io.Writer, name, file string, threads int, srv serving) error {
	store := netns.DefaultStore()
	if l, err := store.Load(name); err == nil {
		if l.Running() {
			return fmt.Errorf("up: lab %s already runs (pid %d); rocelab down %s stops it", name, l.Owner.PID, name)
		}
		return fmt.Errorf("up: lab %s has leftovers of a crashed run; rocelab clean removes them", name)
	}
	if err := os.MkdirAll(store.Dir(name), 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(store.Dir(name), labLog)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(file)
	captureDir, err := filepath.Abs(srv.captureDir)
	if err != nil {
		return err
	}
	c := exec.Command(self, "lab-process", "--name", name, "-f", abs, "--ready-fd", "3", "--threads", strconv.Itoa(threads),
		"--metrics", srv.metrics, "--web", srv.web, "--capture-dir", captureDir)
	c.Stdout, c.Stderr, c.ExtraFiles = logf, logf, []*os.File{pw}
	c.Env = append(os.Environ(), netns.StateRootEnv+"="+store.Root)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := c.Start(); err != nil {
		pw.Close()
		return err
	}
	pw.Close()
	pid := c.Process.Pid
	c.Process.Release() // it outlives us: `rocelab down` stops it
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == readyPrefix:
			fmt.Fprintf(out, "lab %s ready in %v (lab process pid %d, log %s)\n", name, time.Since(start).Round(time.Millisecond), pid, logPath)
			return printNextSteps(out, store, name)
		case strings.HasPrefix(line, progressPrefix):
			fmt.Fprintln(out, "  "+strings.TrimPrefix(line, progressPrefix))
		case strings.HasPrefix(line, errorPrefix):
			err = errors.New(strings.TrimPrefix(line, errorPrefix))
		}
	}
	if err == nil {
		err = fmt.Errorf("the lab process exited before the lab was ready; its log:\n%s", tail(logPath, 20))
	}
	// Remove what the failed start created; the process has exited or is exiting.
	if _, derr := (&netns.Cleaner{Store: store}).Down(name); derr != nil && !errors.Is(derr, os.ErrNotExist) {
		err = errors.Join(err, derr)
	}
	return fmt.Errorf("up: lab %s: %w", name, err)
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
	var readyFD, threads int
	cmd := &cobra.Command{
		Use:    "lab-process",
		Short:  "Run a lab (started by rocelab up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ready *os.File
			if readyFD > 0 {
				ready = os.NewFile(uintptr(readyFD), "ready")
			}
			enc := zap.NewProductionEncoderConfig()
			enc.EncodeTime = zapcore.ISO8601TimeEncoder
			log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(os.Stderr), zapcore.InfoLevel))
			return runLabProcess(name, file, threads, srv, ready, log, io.Discard)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file")
	cmd.Flags().StringVar(&name, "name", "", "lab name")
	cmd.Flags().IntVar(&readyFD, "ready-fd", 0, "fd to report progress and readiness on")
	cmd.Flags().StringVar(&srv.metrics, "metrics", "", "serve Prometheus metrics at this address")
	cmd.Flags().StringVar(&srv.web, "web", "", "serve the live view at this address")
	cmd.Flags().StringVar(&srv.captureDir, "capture-dir", defaultCaptureDir, "where the live view's captures go")
	cmd.Flags().IntVar(&threads, "threads", defaultThreads, threadsHelp)
	return cmd
}

// runLabProcess brings the lab up and runs it until SIGTERM or SIGINT, then closes it
// without removing it: removal is down's job, which sent the signal (or clean's, after
// a crash).
func runLabProcess(name, file string, threads int, srv serving, ready *os.File, log *zap.Logger, out io.Writer) error {
	report := func(prefix, s string) {
		if ready != nil {
			fmt.Fprintln(ready, prefix+s)
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
	l, err := lab.Up(lab.Config{Name: name, Topology: t, TopologyFile: file, Store: netns.DefaultStore(), Log: log,
		Threads: threads, Progress: func(s string) { report(progressPrefix, s) }, Services: verbsServices})
	if err != nil {
		report(errorPrefix, err.Error())
		log.Error("lab up failed", zap.Error(err))
		return err
	}
	if srv.metrics != "" {
		addr, err := serveMetrics(srv.metrics, func() (lab.Status, error) { return l.Status(), nil })
		if err != nil {
			report(errorPrefix, err.Error())
			return errors.Join(err, l.Close())
		}
		report(progressPrefix, "Prometheus metrics at http://"+addr+"/metrics")
	}
	if srv.web != "" {
		addr, err := serveWeb(srv.web, netns.DefaultStore(), name, srv.captureDir)
		if err != nil {
			report(errorPrefix, err.Error())
			return errors.Join(err, l.Close())
		}
		report(progressPrefix, "live view at http://"+addr+"/")
	}
	report(readyPrefix, "")
	if ready != nil {
		ready.Close()
	}
	fmt.Fprintf(out, "lab %s running; Ctrl-C stops it (then rocelab down %s removes it)\n", name, name)
	sig := <-sigs
	log.Info("stopping", zap.String("signal", sig.String()))
	return l.Close()
}

// defaultThreads is up's --threads default: lab.DefaultThreads.
const defaultThreads = 0

const threadsHelp = "event-loop threads the lab's switches and soft-RNICs share (0: one per 4 CPUs, at least 1; fewer threads, fewer cross-thread wake-ups per frame)"
