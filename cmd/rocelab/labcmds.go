package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/rnic/service"
)

func init() {
	rootCmd.AddCommand(newStatusCmd(), newExecCmd(), newRshCmd(), newCaptureCmd(), newDownCmd())
}

// pickLab returns the lab a command acts on: the one named, else the only running one.
func pickLab(store netns.Store, name string) (string, error) {
	if name != "" {
		if err := netns.ValidName(name); err != nil {
			return "", fmt.Errorf("lab %w", err)
		}
		return name, nil
	}
	running, err := store.Running()
	if err != nil {
		return "", err
	}
	switch len(running) {
	case 0:
		return "", errors.New("no lab is running (start one with rocelab up -f TOPOLOGY.yaml)")
	case 1:
		return running[0].Name, nil
	}
	var names []string
	for _, l := range running {
		names = append(names, l.Name)
	}
	return "", fmt.Errorf("%d labs run (%s): pick one with --lab", len(running), strings.Join(names, ", "))
}

func newStatusCmd() *cobra.Command {
	var labName string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--lab LAB] [--json]",
		Short: "Show labs: hosts, addresses, RNICs, switch ports and live counters",
		Long: `status describes the running lab (or the one --lab names): its hosts with their
namespace, TAP, addresses and MAC, each soft-RNIC's counters, and each switch port's
peer, rate and counters (frames, bytes, drops, ECN marks, telemetry stamps, queue).
Without --lab and with several labs, it shows every lab. A lab whose process is gone is
shown from its state file, marked crashed (rocelab clean removes it).

docs/observability.md explains every counter (and why an idle lab counts none
dropped).

--json prints one JSON object per lab ({"name", "hosts": [{"name", "netns", "ipv4",
"ipv6", "mac", "rnic": {"tx_frames", ...}}], "switches": [{"name", "ports": [{"port",
"peer", "rate", "stats": {"tx_frames", ..., "queues": [...]}}]}]}); several labs print a
JSON array. Keys are snake_case; docs/architecture.md lists them all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store := netns.DefaultStore()
			var recs []*netns.Lab
			if labName != "" {
				l, err := store.Load(labName)
				if err != nil {
					return fmt.Errorf("status: lab %s: %w", labName, err)
				}
				recs = append(recs, l)
			} else {
				all, unreadable, err := store.List()
				if err != nil {
					return err
				}
				for _, e := range unreadable {
					fmt.Fprintln(cmd.ErrOrStderr(), "rocelab: status:", e)
				}
				recs = all
			}
			var sts []lab.Status
			for _, r := range recs {
				st := lab.StatusFromRecord(store, r)
				if r.Running() {
					reply, err := lab.Query(store, r.Name, lab.Request{Op: "status"})
					if err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "rocelab: status: %v (showing the state file)\n", err)
					} else {
						st = *reply.Status
					}
				}
				sts = append(sts, st)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if len(sts) == 1 {
					return enc.Encode(sts[0])
				}
				if sts == nil {
					sts = []lab.Status{}
				}
				return enc.Encode(sts)
			}
			if len(sts) == 0 {
				fmt.Fprintln(out, "no labs (start one with rocelab up -f TOPOLOGY.yaml)")
			}
			for i, st := range sts {
				if i > 0 {
					fmt.Fprintln(out)
				}
				printStatus(out, st)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab to show (default: all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printStatus(out io.Writer, st lab.Status) {
	state := "running"
	if !st.Running {
		state = "CRASHED (rocelab clean removes it)"
	}
	fmt.Fprintf(out, "lab %s: %s, pid %d", st.Name, state, st.Pid)
	if st.Uptime != "" {
		fmt.Fprintf(out, ", up %s", st.Uptime)
	}
	if st.Topology != "" {
		fmt.Fprintf(out, ", %s (%s telemetry, %s)", st.Topology, st.Telemetry, st.CongestionControl)
	}
	fmt.Fprintf(out, "\nstate: %s\n\n", st.Dir)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "HOST\tNETNS\tIPV4\tIPV6\tMAC\tRNIC TX\tRNIC RX\tLOOPED\tKERNEL FRAMES\tDROPPED\tVERBS CONNS")
	for _, h := range st.Hosts {
		tx, rx, looped, kern, drop, conns := "-", "-", "-", "-", "-", "-"
		if v := h.Verbs; v != nil {
			conns = fmt.Sprintf("%d", v.Conns)
			if refused := v.Rejected + v.OverLimit + v.TimedOut; refused > 0 {
				conns += fmt.Sprintf(" (%d refused)", refused)
			}
		}
		if r := h.RNIC; r != nil {
			tx, rx = fmt.Sprintf("%d", r.TxFrames), fmt.Sprintf("%d", r.RxFrames)
			looped = fmt.Sprintf("%d", r.LoopbackFrames) // of TX and RX: QP to QP of this RNIC
			kern = fmt.Sprintf("%d", r.HostFrames)
			drop = fmt.Sprintf("%d", r.HostDropped+r.RxMalformed+r.RxBadICRC+r.RxUnknownQP+r.Panics)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Netns, h.IPv4, h.IPv6, h.MAC, tx, rx, looped, kern, drop, conns)
	}
	w.Flush()
	printMcastGroups(out, st)
	printBudgets(out, st)
	if len(st.Switches) == 0 {
		return
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PORT\tPEER\tRATE\tTX FRAMES\tTX BYTES\tRX FRAMES\tDROPS\tSTAMP ERRORS\tECN\tSTAMPED\tPAUSES\tQUEUE\tLINK FAULTS")
	for _, s := range st.Switches {
		for _, p := range s.Ports {
			ps := p.Stats
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.Port, p.Peer, p.Rate, ps.TxFrames, ps.TxBytes,
				ps.RxFrames, ps.Drops, ps.StampErrors, ps.ECNMarks, ps.Stamped, ps.PauseSent+ps.PauseRcvd, ps.QLen, p.Link.Faults())
		}
	}
	w.Flush()
	printCaptures(out, st)
	printLoops(out, st)
	printParts(out, st)
}

// printMcastGroups lists each host's multicast groups with the QPs attached to them.
func printMcastGroups(out io.Writer, st lab.Status) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	header := false
	for _, h := range st.Hosts {
		for _, g := range h.McastGroups {
			if !header {
				fmt.Fprintln(w, "\nHOST\tMULTICAST GROUP\tQPS")
				header = true
			}
			qps := make([]string, len(g.QPs))
			for i, q := range g.QPs {
				qps[i] = fmt.Sprintf("%d", q)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", h.Name, g.GID, strings.Join(qps, " "))
		}
	}
	w.Flush()
}

// printLoops shows how late each of the lab's event loops ran its timers, and how far
// each may fall behind and still run its events at their own times (MAX LAG): when
// the machine cannot keep up beyond that, its figures measure the CPU, and this is
// where it shows.
func printLoops(out io.Writer, st lab.Status) {
	if len(st.Loops) == 0 {
		return
	}
	bound := func(us float64) string {
		if us >= lab.LateOverUS {
			return fmt.Sprintf(">= %g µs", us)
		}
		return fmt.Sprintf("< %g µs", us)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LOOP\tTIMERS\tLATE P50\tLATE P99\tMAX LAG")
	for _, l := range st.Loops {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%g µs\n", l.Loop, l.Timers, bound(l.LateP50US), bound(l.LateP99US), l.MaxLagUS)
	}
	w.Flush()
}

// printCaptures lists the running and last captures of the lab's ports.
func printCaptures(out io.Writer, st lab.Status) {
	type row struct {
		port string
		c    *lab.CaptureStatus
	}
	var rows []row
	for _, h := range st.Hosts {
		if h.Capture != nil {
			rows = append(rows, row{h.Name + ":p0", h.Capture})
		}
	}
	for _, s := range st.Switches {
		for _, p := range s.Ports {
			if p.Capture != nil {
				rows = append(rows, row{p.Port, p.Capture})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CAPTURE	STATE	FRAMES	DROPPED	SNAPLEN")
	for _, r := range rows {
		state, snap := "ended", "-"
		if r.c.Running {
			state = "running"
		}
		if r.c.Snaplen > 0 {
			snap = fmt.Sprintf("%d", r.c.Snaplen)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.port, state, r.c.Frames, r.c.Dropped, snap)
	}
	w.Flush()
}

func newExecCmd() *cobra.Command {
	var labName string
	var detach bool
	cmd := &cobra.Command{
		Use:   "exec [--lab LAB] [-d] HOST -- CMD [ARG...]",
		Short: "Run a command inside a host's namespace",
		Long: `exec runs CMD inside HOST's network namespace with standard input, output and
error attached, and exits with its status. The command sees the host's TAP netdev as
its NIC and reaches its soft-RNIC's verbs service. It runs in the host's own mount and
UTS namespaces too, entered through util-linux's nsenter: the hostname is HOST, /sys
lists the host's netdevs and its RDMA device (/sys/class/infiniband/rocelab0,
/dev/infiniband/uverbs0, as rxe's), and /etc/hosts names every host of the lab
(docs/libibverbs.md, "Where programs look for the device"). Its environment carries
ROCELAB_LAB, ROCELAB_HOST, ROCELAB_NETNS, ROCELAB_IPV4, ROCELAB_IPV6 and
ROCELAB_STATE_DIR, and PATH starts with the directory of the rocelab binary, where
the sample apps are built. When that directory has lib/libibverbs.so.1 (make build puts
rocelab's libibverbs and librdmacm there), LD_LIBRARY_PATH starts with it: unmodified
libibverbs and librdmacm programs (ibv_devinfo, ibv_rc_pingpong, perftest's ib_write_bw,
rping, ...) then run on the host's soft-RNIC (docs/libibverbs.md, docs/rdmacm.md). The process is recorded with the lab, so down
and clean stop it.

-d (detach) is for servers: exec returns as soon as CMD listens on a TCP port (or
exits, with its status), leaving it running with its output on the terminal, so the
client that follows finds it ready. A server started with & instead may not listen
yet when its client connects ("connection refused"), as with the real tools.`,
		Example: `  sudo rocelab exec h1 -- ping -c 3 10.0.0.2
  sudo rocelab exec -d h1 -- write_bw -x 1
  sudo rocelab exec h2 -- write_bw -x 1 10.0.0.1
  sudo rocelab exec h2 -- ip addr
  sudo rocelab exec h1 -- ibv_devinfo -v
  sudo rocelab exec --lab ls h3 -- sh`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("exec: want HOST -- CMD [ARG...]")
			}
			return execInHost(cmd, "exec", labName, args[0], args[1:], detach)
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab (default: the only running one)")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return once CMD listens on a TCP port, leaving it running")
	return cmd
}

// execInHost runs argv in host of the lab named labName (the only running one when
// ""), with its output on cmd's and the environment `rocelab exec --help` describes, and
// exits with its status; with detach it returns once argv listens on a TCP port.
func execInHost(cmd *cobra.Command, verb, labName, host string, argv []string, detach bool) error {
	store := netns.DefaultStore()
	name, err := pickLab(store, labName)
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	// The sample apps sit next to the rocelab binary: put that directory first,
	// and its lib/ (rocelab's libibverbs.so.1 and librdmacm.so.1) before the
	// system's libraries.
	path, libPath := os.Getenv("PATH"), os.Getenv("LD_LIBRARY_PATH")
	if self, err := os.Executable(); err == nil {
		path = prependPath(filepath.Dir(self), path)
		if lib := filepath.Join(filepath.Dir(self), "lib"); fileExists(filepath.Join(lib, "libibverbs.so.1")) {
			libPath = prependPath(lib, libPath)
		}
	}
	if rec, err := store.Load(name); err == nil && rec.Host(host) == nil {
		code, err := execRemote(cmd, store, name, host, argv, detach)
		switch {
		case errors.Is(err, errNotRemote): // not another part's: the error below names it
		case err != nil:
			return fmt.Errorf("%s: %w", verb, err)
		default:
			os.Exit(code)
		}
	}
	c := exec.Command(argv[0], argv[1:]...)
	if p, ok := lookPathIn(argv[0], path); ok {
		c.Path, c.Err = p, nil
	}
	c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	if detach {
		c.Stdin = nil // a detached server reads nothing from the terminal
	}
	c.Env = append(os.Environ(), "PATH="+path)
	if libPath != "" {
		c.Env = append(c.Env, "LD_LIBRARY_PATH="+libPath)
	}
	if err := store.Exec(name, host, c); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	signal.Ignore(syscall.SIGINT) // the child gets Ctrl-C; we wait for it
	if detach {
		err = waitListening(c)
	} else {
		err = c.Wait()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exitStatus(exit))
	}
	return err
}

// newRshCmd is `rocelab rsh`, the remote-shell agent MPI launchers call as they call
// ssh: HOST, then the command as words that a shell joins and runs.
func newRshCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rsh HOST COMMAND...",
		Short: "Run a shell command in a host, as ssh does: MPI's remote-shell agent",
		Long: `rsh runs COMMAND (its words joined by spaces, as ssh joins them) with /bin/sh -c
in HOST of the lab that $ROCELAB_LAB names (set in every process rocelab exec
starts), or of the only running lab, with rocelab exec's environment. It is what
an MPI launcher calls to start its daemons on other hosts, in place of ssh; run
from inside a host (rocelab exec), it reaches the others. Open MPI, from h1:

  rocelab exec h1 -- mpirun --allow-run-as-root --mca plm_rsh_agent "rocelab rsh" \
      -H h1,h2,h3,h4 -np 4 --mca pml ucx ./a.out

(docs/libibverbs.md, "Open MPI").`,
		DisableFlagParsing: true, // the command's flags are the command's
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			if len(args) < 2 {
				return errors.New("rsh: want HOST and a COMMAND")
			}
			return execInHost(cmd, "rsh", os.Getenv(service.EnvLab), args[0],
				[]string{"/bin/sh", "-c", strings.Join(args[1:], " ")}, false)
		},
	}
}

// listenPoll is how often exec -d looks for its server's listening socket: nothing
// signals it, and a server takes milliseconds to get there.
const listenPoll = 5 * time.Millisecond

// waitListening returns nil once the started command c listens on a TCP port, or
// c's exit error if it exits first.
func waitListening(c *exec.Cmd) error {
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	tick := time.NewTicker(listenPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if err == nil {
				err = fmt.Errorf("exec -d: %s exited without listening", c.Path)
			}
			return err
		case <-tick.C:
			ok, err := netns.ListensTCP(c.Process.Pid)
			if ok {
				return nil
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("exec -d: %w", err)
			}
		}
	}
}

// prependPath puts dir in front of the list path.
func prependPath(dir, path string) string {
	if path == "" {
		return dir
	}
	return dir + string(os.PathListSeparator) + path
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// exitStatus is the status a shell gives a command that ended as exit says: its exit
// code, or 128+N for a command killed by signal N.
func exitStatus(exit *exec.ExitError) int {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

// lookPathIn finds an executable named name (without a slash) in the directories of
// path, as the shell would.
func lookPathIn(name, path string) (string, bool) {
	if strings.Contains(name, "/") {
		return "", false
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// captureHelp is capture's --help text.
const captureHelp = `capture records every frame crossing a port of the running lab, both directions,
telemetry included, as pcapng: to standard output (so that | wireshark -k -i - shows it
live) or with -w to a file. Ports are named NODE:pN (s1:p0 is switch s1's first port in
the topology file's link order; rocelab status lists them with their peers); a host has
one port, h1:p0. The capture runs until Ctrl-C, --duration, or the reader goes away.
Timestamps are the lab's model times (real time since the lab started, plus its start).

A capture never slows the lab: if the reader (the disk, Wireshark, a core) falls
behind by 64 MiB, frames are left out of the file and counted. When the capture ends
it prints how many frames it wrote and how many it dropped (to standard error), and
the file ends with a pcapng Interface Statistics Block saying the same (isb_ifrecv:
frames that crossed the port, isb_ifdrop: frames the file lacks; Wireshark shows them
under Statistics > Capture File Properties). rocelab status shows the figures of each
port's running or last capture. --snaplen N keeps only each frame's first N bytes
(the headers: 128 holds Ethernet, IP, UDP, BTH, RETH and telemetry), which a slow
reader keeps up with more easily.`

func newCaptureCmd() *cobra.Command {
	var labName, file string
	var duration time.Duration
	var snaplen int
	cmd := &cobra.Command{
		Use:   "capture [--lab LAB] NODE:PORT [-w FILE] [--snaplen N] [--duration D]",
		Short: "Capture a switch or host port as pcapng, live",
		Long:  captureHelp,
		Example: `  sudo rocelab capture s1:p1 | wireshark -k -i -
  sudo rocelab capture s1:p0 -w out/s1p0.pcapng --duration 5s
  sudo rocelab capture s1:p0 -w out/s1p0.pcapng --snaplen 128
  rocelab decode out/s1p0.pcapng`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if snaplen < 0 {
				return fmt.Errorf("capture: --snaplen %d: want 0 (whole frames) or more", snaplen)
			}
			if cmd.Flags().Changed("duration") && duration <= 0 {
				return fmt.Errorf("capture: --duration %v: want a positive duration such as 5s", duration)
			}
			store := netns.DefaultStore()
			name, err := pickLab(store, labName)
			if err != nil {
				return fmt.Errorf("capture: %w", err)
			}
			// A port of another part of a lab over several machines: through that part.
			if err := captureRemote(cmd, store, name, args[0], file, snaplen, duration); !errors.Is(err, errNotRemote) {
				return err
			}
			req := lab.Request{Op: "capture", Port: args[0], Snaplen: snaplen}
			if file != "" {
				// The lab process writes the file itself: the frames then cross no
				// socket and no second process.
				if req.File, err = filepath.Abs(file); err != nil {
					return err
				}
			}
			conn, err := lab.StartCapture(store, name, req)
			if err != nil {
				return fmt.Errorf("capture: %w", err)
			}
			defer conn.Close()
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
			if duration > 0 {
				time.AfterFunc(duration, func() { stop <- syscall.SIGINT })
			}
			go func() {
				<-stop
				// Ending our side asks the lab to finish the file and send its
				// figures; a second signal gives up on them.
				conn.Stop()
				<-stop
				conn.Close()
			}()
			figures, n, err := conn.Copy(cmd.OutOrStdout())
			if err != nil {
				if errors.Is(err, syscall.EPIPE) {
					return nil // the reader (Wireshark) went away: that ends a capture too
				}
				return fmt.Errorf("capture %s: %w", args[0], err)
			}
			msg := fmt.Sprintf("captured %d frames of %s to standard output (%d bytes), dropped %d", figures.Frames, args[0], n, figures.Dropped)
			if file != "" {
				msg = fmt.Sprintf("captured %d frames of %s to %s, dropped %d", figures.Frames, args[0], file, figures.Dropped)
			}
			if figures.Dropped > 0 {
				msg += fmt.Sprintf(": the capture lost %d of %d frames because the reader (disk, pipe or CPU) did not keep up; --snaplen 128 keeps headers only",
					figures.Dropped, figures.Frames+figures.Dropped)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab (default: the only running one)")
	cmd.Flags().StringVarP(&file, "write", "w", "", "write pcapng to FILE instead of standard output")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	cmd.Flags().IntVar(&snaplen, "snaplen", 0, "keep only each frame's first N bytes (0: whole frames)")
	return cmd
}

func newDownCmd() *cobra.Command {
	var labName string
	var verbose, thisPart bool
	cmd := &cobra.Command{
		Use:   "down [LAB]",
		Short: "Stop a lab and remove exactly what up created",
		Long: `down stops the lab process and every process started in the lab (SIGTERM, then
SIGKILL), deletes the lab's namespaces (their TAPs go with them), sockets and state
directory. It removes only what the lab's state file records: namespaces of other labs
or of anyone else are never touched. Without LAB it takes the only running lab.

In a lab over several machines, down first asks the other parts to remove themselves
(through the parts' authenticated control channel) and names any it could not reach;
--this-part removes this machine's part only (the others see it gone, as a cable pull).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				labName = args[0]
			}
			store := netns.DefaultStore()
			name, err := pickLab(store, labName)
			if err != nil {
				return fmt.Errorf("down: %w", err)
			}
			rec, err := store.Load(name)
			if err != nil {
				return fmt.Errorf("down: lab %s: %w", name, err)
			}
			if !thisPart && rec.Running() {
				downOtherParts(cmd.OutOrStdout(), store, name)
			}
			rep, err := (&netns.Cleaner{Store: store, Log: stderrLogger(cmd.ErrOrStderr(), verbose)}).Down(name)
			for _, r := range rep.Removed {
				if verbose {
					fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
				}
			}
			if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s down (%d objects removed)\n", name, len(rep.Removed))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab (same as the LAB argument)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list what is removed")
	cmd.Flags().BoolVar(&thisPart, "this-part", false, "in a lab over several machines, remove this machine's part only")
	return cmd
}
