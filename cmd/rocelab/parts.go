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
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/lab/tunnel"
	"github.com/rocelab/rocelab/netns"
)

// partFlags are up's settings for one part of a lab over several machines
// (docs/multi-machine.md): which machine this is, where the others are, the lab secret
// the parts authenticate each other with, and the underlay address to bind.
type partFlags struct {
	machine    string
	peers      map[string]string
	secretFile string
	listen     string
}

// bind registers the flags on up (and, hidden, on the lab process).
func (p *partFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&p.machine, "machine", "", "run this machine's part of a topology placed on machines (its hosts and switches; links to other machines become VXLAN tunnels)")
	fs.StringToStringVar(&p.peers, "peer", nil, "MACHINE=ADDR: reach that machine's part at ADDR instead of the topology's address (repeatable)")
	fs.StringVar(&p.secretFile, "secret-file", "", "file holding the lab secret every part shares (mode 0600); parts refuse peers without it")
	fs.StringVar(&p.listen, "listen", "", "underlay IP address the part binds VXLAN (UDP 4789) and control (TCP 4790) to (default: all)")
}

// args are the flags that pass the settings on to the lab process: the secret stays
// in its file, off the process list.
func (p partFlags) args() ([]string, error) {
	if p.machine == "" {
		if p.secretFile != "" || len(p.peers) > 0 || p.listen != "" {
			return nil, fmt.Errorf("up: --secret-file, --peer and --listen are for a part of a lab over several machines: give --machine too")
		}
		return nil, nil
	}
	if p.secretFile == "" {
		return nil, fmt.Errorf("up: --machine %s: a lab over several machines needs --secret-file (the same lab secret on every machine, e.g. head -c 32 /dev/urandom | base64 > lab.secret)", p.machine)
	}
	secret, err := filepath.Abs(p.secretFile)
	if err != nil {
		return nil, err
	}
	args := []string{"--machine", p.machine, "--secret-file", secret, "--listen", p.listen}
	names := make([]string, 0, len(p.peers))
	for name := range p.peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args = append(args, "--peer", name+"="+p.peers[name])
	}
	return args, nil
}

// apply puts the settings into cfg, reading the secret.
func (p partFlags) apply(cfg *lab.Config) error {
	if p.machine == "" {
		return nil
	}
	secret, err := readSecret(p.secretFile)
	if err != nil {
		return err
	}
	cfg.Machine, cfg.Peers, cfg.Secret, cfg.Listen = p.machine, p.peers, secret, p.listen
	return nil
}

// minSecret is the shortest lab secret accepted: the parts' HMAC keys derive from it.
const minSecret = 16

// readSecret reads a lab secret file, refusing one that others may read (as ssh
// refuses a private key) or one too short to authenticate anything.
func readSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--secret-file: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("--secret-file %s: readable by group or others (mode %04o): chmod 600 it", path, m)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--secret-file: %w", err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < minSecret {
		return nil, fmt.Errorf("--secret-file %s: %d bytes, want at least %d (e.g. head -c 32 /dev/urandom | base64)", path, len(b), minSecret)
	}
	return b, nil
}

// downOtherParts asks a running lab to remove its other parts (op down-parts) and says
// which it told and which it could not reach.
func downOtherParts(out io.Writer, store netns.Store, name string) {
	reply, err := lab.Query(store, name, lab.Request{Op: "down-parts"})
	if err != nil {
		fmt.Fprintf(out, "lab %s: could not ask the other parts to go down: %v\n", name, err)
		return
	}
	if len(reply.Told) > 0 {
		fmt.Fprintf(out, "lab %s: parts on %s told to go down\n", name, strings.Join(reply.Told, ", "))
	}
	if len(reply.Unreachable) > 0 {
		fmt.Fprintf(out, "lab %s: parts on %s unreachable: run rocelab down %s (or rocelab clean) there\n",
			name, strings.Join(reply.Unreachable, ", "), name)
	}
}

// printParts shows, for a part of a lab over several machines, the other parts as it
// sees them, its tunnels, and then each other part's own status.
func printParts(out io.Writer, st lab.Status) {
	ps := st.Parts
	if ps == nil {
		return
	}
	fmt.Fprintf(out, "\nthis part: machine %s\n", ps.Machine)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PART\tADDRESS\tSTATE\tSINCE\tRTT\tMIN RTT\tUNDERLAY ONE-WAY\tCLOCK OFFSET\tERROR")
	for _, p := range ps.Peers {
		since := "-"
		if !p.Since.IsZero() {
			since = p.Since.Format("15:04:05.000")
		}
		state := p.State
		if state == "gone" {
			state = "GONE"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.0f µs\t%.0f µs\t%.0f µs\t%.0f µs\t%s\n", p.Machine, p.Address, state, since,
			p.RTTUS, p.MinRTTUS, p.OneWayUS, p.ClockOffsetUS, p.Error)
	}
	w.Flush()
	if len(ps.Tunnels) > 0 {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "TUNNEL\tVNI\tTO\tDECLARED DELAY\tSENT\tSEND ERRORS\tRECEIVED\tUNDERLAY LOST\tREORDERED\tLATE\tMEAN LATE")
		for _, t := range ps.Tunnels {
			fmt.Fprintf(w, "%s\t%d\t%s\t%g µs\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f µs\n", t.Port, t.VNI, t.Peer, t.DeclaredDelayUS,
				t.Sent, t.SendErrors, t.Received, t.UnderlayLost, t.UnderlayReorder, t.Late, t.MeanLateUS)
		}
		w.Flush()
	}
	if refused := ps.Malformed + ps.UnknownVNI + ps.UnknownSource + ps.RefusedConns; refused > 0 {
		fmt.Fprintf(out, "underlay refused: %d malformed, %d unknown VNI, %d unknown source datagrams; %d control connections\n",
			ps.Malformed, ps.UnknownVNI, ps.UnknownSource, ps.RefusedConns)
	}
	for _, r := range ps.Remote {
		machine := "?"
		if r.Parts != nil {
			machine = r.Parts.Machine
		}
		fmt.Fprintf(out, "\n--- part on machine %s (read through the parts' control channel) ---\n", machine)
		r.Parts = nil // its view of the parts is this one's, turned round
		printStatus(out, r)
	}
}

// partFile, in a part's state directory, tells the CLI on its machine which machine it
// is and where the lab secret is, for exec in a host of another part.
const partFile = "part.json"

type partRecord struct {
	Machine    string `json:"machine"`
	SecretFile string `json:"secret_file"`
}

// recordPart writes the part's record into the lab's state directory.
func recordPart(store netns.Store, name string, p partFlags) error {
	if p.machine == "" {
		return nil
	}
	secret, err := filepath.Abs(p.secretFile)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(partRecord{Machine: p.machine, SecretFile: secret})
	return os.WriteFile(filepath.Join(store.Dir(name), partFile), b, 0o600)
}

// errNotRemote says a node is in no other part of the lab.
var errNotRemote = errors.New("not a node of another part")

// remotePart is the part of a lab over several machines that runs node (a host or a
// switch), as this machine's part sees it: errNotRemote when the lab is not split or
// this part runs node.
type remotePart struct {
	self, machine, addr string // this part's machine, node's machine and its address
	secret              []byte
}

func findRemotePart(store netns.Store, name, node string) (remotePart, error) {
	b, err := os.ReadFile(filepath.Join(store.Dir(name), partFile))
	if err != nil {
		return remotePart{}, errNotRemote // not a part of a lab over several machines
	}
	var rec partRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return remotePart{}, fmt.Errorf("lab %s: %s: %w", name, partFile, err)
	}
	reply, err := lab.Query(store, name, lab.Request{Op: "status"})
	if err != nil {
		return remotePart{}, err
	}
	ps := reply.Status.Parts
	if ps == nil {
		return remotePart{}, errNotRemote
	}
	rp := remotePart{self: rec.Machine}
	for _, r := range ps.Remote {
		if r.Parts == nil {
			continue
		}
		for _, h := range r.Hosts {
			if h.Name == node {
				rp.machine = r.Parts.Machine
			}
		}
		for _, s := range r.Switches {
			if s.Name == node {
				rp.machine = r.Parts.Machine
			}
		}
	}
	for _, p := range ps.Peers {
		if p.Machine == rp.machine {
			rp.addr = p.Address
		}
	}
	if rp.machine == "" || rp.addr == "" {
		return remotePart{}, errNotRemote
	}
	if rp.secret, err = readSecret(rec.SecretFile); err != nil {
		return remotePart{}, err
	}
	return rp, nil
}

// run runs req on the part, relaying the streams and forwarding SIGINT, SIGTERM,
// SIGHUP and SIGQUIT; it returns the exit status.
func (rp remotePart) run(cmd *cobra.Command, name string, req tunnel.ExecRequest, stdout io.Writer) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, tunnel.ForwardedSignals...)
	defer signal.Stop(sigs)
	return tunnel.RemoteExec(rp.addr, rp.secret, name, rp.self, rp.machine, req, cmd.InOrStdin(), stdout, cmd.ErrOrStderr(), sigs)
}

// execRemote runs argv in host of lab name when another part of a lab over several
// machines runs that host: through that part, with the streams relayed and Ctrl-C
// forwarded. It returns errNotRemote when no other part has the host.
func execRemote(cmd *cobra.Command, store netns.Store, name, host string, argv []string, detach bool) (int, error) {
	rp, err := findRemotePart(store, name, host)
	if err != nil {
		return 0, err
	}
	if detach {
		return 0, fmt.Errorf("host %s runs on machine %s: -d starts servers on this machine's hosts only; run exec -d there, or this exec with & here", host, rp.machine)
	}
	return rp.run(cmd, name, tunnel.ExecRequest{Host: host, Argv: argv}, cmd.OutOrStdout())
}

// captureRemote captures port through the part that runs its node when another part of
// a lab over several machines does (errNotRemote otherwise): that part's rocelab
// capture writes the pcapng to this one's standard output or file.
func captureRemote(cmd *cobra.Command, store netns.Store, name, port, file string, snaplen int, duration time.Duration) error {
	node, _, _ := strings.Cut(port, ":")
	rp, err := findRemotePart(store, name, node)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if file != "" {
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
	}
	argv := []string{"capture", "--lab", name, port, "--snaplen", strconv.Itoa(snaplen)}
	if duration > 0 {
		argv = append(argv, "--duration", duration.String())
	}
	code, err := rp.run(cmd, name, tunnel.ExecRequest{Rocelab: true, Argv: argv}, out)
	if err == nil && code != 0 {
		err = fmt.Errorf("capture %s on machine %s: exit status %d", port, rp.machine, code)
	}
	return err
}

// remoteExecCommand is what a part runs for another machine's part: `rocelab exec HOST`
// (this binary's exec in the host, with the part's state directory from the
// environment), or `rocelab capture` of one of its ports.
func remoteExecCommand(name string) func(req tunnel.ExecRequest) (*exec.Cmd, error) {
	return func(req tunnel.ExecRequest) (*exec.Cmd, error) {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		if req.Rocelab {
			if len(req.Argv) == 0 || req.Argv[0] != "capture" {
				return nil, fmt.Errorf("a part runs rocelab capture for another machine, not %q", req.Argv)
			}
			return exec.Command(self, req.Argv...), nil
		}
		return exec.Command(self, append([]string{"exec", "--lab", name, req.Host, "--"}, req.Argv...)...), nil
	}
}
