package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

func init() { rootCmd.AddCommand(newExperimentCmd()) }

// Flags that only some scenarios read; giving one to another scenario is an error.
var (
	starFlags = []string{"senders", "flow-size", "stagger"}
	mixFlags  = []string{"topology", "leaves", "spines", "hosts-per-leaf", "k", "pods", "tors", "aggs", "cores", "hosts-per-tor",
		"oversubscription", "fabric-rate", "cdf", "load", "duration", "flows", "threads"}
	// What a flow file replaces.
	arrivalFlags = []string{"cdf", "load", "duration"}
)

// experimentFlags are the `experiment` command's flags (and `experiment sweep`'s,
// which parses them once per run).
type experimentFlags struct {
	mtu                            int
	cc, mode, format, out, labName string
	asJSON, realTime, plots        bool
	cfg                            experiment.Config
}

// runFunc runs an experiment: in virtual time, in real time or in a lab.
type runFunc func(experiment.Config) (*experiment.Result, error)

func newExperimentFlags() *experimentFlags {
	e := &experimentFlags{cfg: experiment.Defaults()}
	e.cfg.Mix = experiment.MixDefaults().Mix
	return e
}

// experimentLong is `experiment`'s help.
const experimentLong = `Runs soft-RNICs and switches in virtual time and writes, into --out: queue.csv,
rates.csv, links.csv, flows.csv, summary.json, topology.yaml and, with --plots,
queue/rates/fct plots (PNG and SVG). The same flags and seed give byte-identical
files; wall-clock figures appear only in the summary. --json prints the metrics and
flow records on stdout instead of the summary, and writes files only if --out (or
--plots) is given. 'experiment sweep' runs seeds or a grid of parameters on all cores.
Unfinished flows are reported as such; every windowed figure names its window; the
bottleneck's wire rate (headers and telemetry included) and the goodput (payload
delivered) are given apart.

Scenarios:
  incast    --senders hosts each WRITE --flow-size to one receiver through one switch.
  fairness  --senders long flows to one receiver through one switch, joining every
            --stagger and leaving in reverse order.
            Both run a star: --topology-file FILE takes it from a lab's topology (one
            switch, one link per host, all alike, in the hosts' order): its links,
            congestion control, telemetry, HPCC base RTT (as the lab derives it;
            --base-rtt overrides), buffer and RED marking, its first
            --senders hosts (default all but the last) sending to its last. The
            same file in a lab, 'experiment incast --lab', is its real-time twin.
  mix       the HPCC paper's workload: each host of a leaf-spine, a k-ary fat-tree or the
            paper's three-tier fat tree (fat-tree-3tier: 20 ToRs × 16 hosts, 20
            aggregation and 16 core switches in 5 pods, fabric links at --link-rate ×
            16 / 4 / --oversubscription, i.e. 400G) starts flows as a Poisson
            process at --load of its link, sizes drawn from --cdf
            (websearch, fbhadoop or a file of "size_bytes cumulative_percent" lines),
            destinations uniformly among the other hosts, for --duration or --flows.
            Each flow is an RDMA WRITE on its own RC QP pair.
            Slowdown = FCT / ideal FCT, ideal = the path's base RTT + the flow's wire
            bytes at line rate, clamped at 1. The queue series and metrics are those of
            the switch egress port with the largest peak queue; ports.csv and
            port_queues.csv cover every port; fct_buckets.csv and the fct plot give
            p50/p95/p99 slowdown per 5% of the flows by size. --flows FILE replays a
            flow file and --topology-file FILE reads a topology, in the HPCC
            simulator's formats (or rocelab's YAML).

--preset ns3 takes the HPCC simulator's settings (HPCC parameters and base RTT, 8-byte
hops, 1000-byte payload, 48-byte headers in the ideal FCT, RED marking); flags given
explicitly win. See docs/hpcc.md. 'experiment flows' writes a flow file, 'experiment
compare' puts two runs side by side.

Simulated packets carry headers, lengths and PSNs but no payload bytes, and no ICRC
is computed: the results are the same, faster and in far less memory. --verify moves
real data and checks every byte of every flow at its receiver. On a terminal, a run
longer than a few seconds shows its progress on stderr.

Sizes, rates and durations take units: 500KB, 1MiB, 100G, 25Gbps, 1us, 5ms.`

// experimentExamples are `experiment`'s examples.
const experimentExamples = `  rocelab experiment incast --senders 16 --cc hpcc --telemetry int --out out/incast
  rocelab experiment fairness --senders 2 --flow-size 16MB --mtu 4096 --stagger 200us
  rocelab experiment mix --topology leaf-spine --load 0.5 --cdf websearch --cc hpcc --out out/mix
  rocelab experiment mix --topology fat-tree --k 4 --cdf fbhadoop --load 0.3 --cc dcqcn --json
  rocelab experiment mix --topology fat-tree-3tier --link-rate 100G --load 0.3 --duration 5ms --out out/fat3
  rocelab experiment mix --cdf my_cdf.txt --flows 200 --duration 0 --link-rate 25G --fabric-rate 100G
  rocelab experiment incast --topology-file topologies/incast-1g.yaml --flow-size 4MiB --out out/twin-virtual
  rocelab experiment incast --preset ns3 --cc dcqcn --ecn 400KB,1600KB,0.2
  rocelab experiment mix --preset ns3 --flows flows.txt --topology-file fat.txt --out out/ns3`

// newExperimentCmd returns a fresh `experiment` command (tests run several).
func newExperimentCmd() *cobra.Command {
	e := newExperimentFlags()
	cmd := &cobra.Command{
		Use:     "experiment incast|fairness|mix",
		Short:   "Run a congestion-control experiment in virtual time: CSV, plots, summary",
		Long:    experimentLong,
		Example: experimentExamples,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("experiment: want one scenario (incast, fairness or mix), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags()
			cfg, run, err := e.config(flags, args[0])
			if err != nil {
				return err
			}
			files := outputs{plots: e.plots}
			if !e.asJSON || flags.Changed("out") || e.plots {
				files.dir = e.out
			} else {
				cfg.FiguresOnly = true // no files: no series that only they read
			}
			return runAndReport(cmd.OutOrStdout(), newProgress(cmd.ErrOrStderr()), run, cfg, files, e.asJSON)
		},
	}
	e.bind(cmd.Flags())
	cmd.AddCommand(newFlowsCmd(), newCompareCmd(), newSweepCmd())
	return cmd
}

// bind defines the flags on f.
func (e *experimentFlags) bind(f *pflag.FlagSet) {
	def := experiment.Defaults()
	f.IntVar(&e.cfg.Senders, "senders", def.Senders, "senders (flows) of incast and fairness")
	f.Var(bytesValue{&e.cfg.FlowSize}, "flow-size", "bytes per flow of incast and fairness (500KB, 1MiB)")
	f.Var(rateValue{&e.cfg.LinkRate}, "link-rate", "line rate of every link; of host links in mix (100G, 25Gbps)")
	f.Var(rateValue{&e.cfg.FabricRate}, "fabric-rate", "mix: line rate of switch-to-switch links (default --link-rate; fat-tree-3tier: from --oversubscription)")
	f.Var(durationValue{&e.cfg.LinkDelay}, "link-delay", "one-way delay of every link")
	f.IntVar(&e.mtu, "mtu", int(def.MTU), "path MTU: 256, 512, 1024, 2048 or 4096")
	f.StringVar(&e.cc, "cc", "hpcc", "congestion control: hpcc, dcqcn or none")
	f.StringVar(&e.mode, "mode", string(rnic.ModeHPCC), "HPCC mode: per-ack, probe, rx or every-n")
	f.IntVar(&e.cfg.EveryN, "every-n", 4, "N of --mode every-n")
	f.StringVar(&e.format, "telemetry", "int", "telemetry format: int, ioam, ifa or hpcc")
	f.Float64Var(&e.cfg.Eta, "eta", 0.95, "HPCC target utilization")
	f.IntVar(&e.cfg.MaxStage, "max-stage", def.MaxStage, "HPCC additive-increase stages")
	f.Float64Var(&e.cfg.WAI, "wai", 0, "HPCC additive increase in bytes (0: rule of thumb; mix: for hosts-1 flows)")
	f.Var(durationValue{&e.cfg.BaseRTT}, "base-rtt", "HPCC base RTT (default: from the topology; mix: the longest path's)")
	f.Var(durationValue{&e.cfg.Stagger}, "stagger", "time between flow starts (fairness)")
	f.Var(durationValue{&e.cfg.Sample}, "sample", "time-series sampling interval (mix default 1µs)")
	f.Var(durationValue{&e.cfg.Limit}, "limit", "stop the run at this virtual time if flows are unfinished (mix default 1s)")
	f.StringVar(&e.cfg.Topology, "topology", e.cfg.Topology, "mix: leaf-spine, fat-tree or fat-tree-3tier (the HPCC paper's 320 hosts)")
	f.IntVar(&e.cfg.Leaves, "leaves", e.cfg.Leaves, "mix: leaf switches of the leaf-spine")
	f.IntVar(&e.cfg.Spines, "spines", e.cfg.Spines, "mix: spine switches of the leaf-spine")
	f.IntVar(&e.cfg.HostsPerLeaf, "hosts-per-leaf", e.cfg.HostsPerLeaf, "mix: hosts on each leaf")
	f.IntVar(&e.cfg.K, "k", e.cfg.K, "mix: k of the fat-tree (even; k³/4 hosts)")
	f.IntVar(&e.cfg.ThreeTier.Pods, "pods", e.cfg.ThreeTier.Pods, "mix fat-tree-3tier: pods (ToRs and aggregation switches divide among them)")
	f.IntVar(&e.cfg.ThreeTier.ToRs, "tors", e.cfg.ThreeTier.ToRs, "mix fat-tree-3tier: ToR switches")
	f.IntVar(&e.cfg.ThreeTier.Aggs, "aggs", e.cfg.ThreeTier.Aggs, "mix fat-tree-3tier: aggregation switches")
	f.IntVar(&e.cfg.ThreeTier.Cores, "cores", e.cfg.ThreeTier.Cores, "mix fat-tree-3tier: core switches")
	f.IntVar(&e.cfg.ThreeTier.HostsPerToR, "hosts-per-tor", e.cfg.ThreeTier.HostsPerToR, "mix fat-tree-3tier: hosts on each ToR")
	f.Float64Var(&e.cfg.Oversubscription, "oversubscription", e.cfg.Oversubscription,
		"mix fat-tree-3tier: a ToR's host capacity over its uplink capacity; sets the fabric rate")
	f.StringVar(&e.cfg.CDF, "cdf", e.cfg.CDF, "mix: flow sizes: "+strings.Join(experiment.CDFNames, ", ")+" or a CDF file")
	f.Float64Var(&e.cfg.Load, "load", e.cfg.Load, "mix: offered load, a fraction of each host link's rate")
	f.Var(durationValue{&e.cfg.Duration}, "duration", "mix: arrival window (0: none, with --flows)")
	f.Var(flowsValue{&e.cfg.Flows, &e.cfg.FlowFile}, "flows", "mix: stop the arrivals after N flows (0: --duration decides), or replay a flow file in the HPCC simulator's format")
	f.StringVar(&e.cfg.TopologyFile, "topology-file", "", "the network from a file: mix: rocelab YAML or the HPCC simulator's topology format; incast, fairness: a star in rocelab YAML, as a lab runs it")
	f.IntVar(&e.cfg.Threads, "threads", e.cfg.Threads, "mix: threads of the parallel driver, the network partitioned by pod (by ToR under 8 pods); the output is the same on any number of threads (more than one only with idle cores: the threads spin between windows; 0: the sequential driver, whose output differs in the order of simultaneous events)")
	f.StringVar(&e.cfg.Preset, "preset", "", "ns3: the HPCC simulator's parameters, payload, headers and marking (docs/hpcc.md)")
	f.IntVar(&e.cfg.Payload, "payload", 0, "payload bytes of a full data packet, at most --mtu (0: the MTU; ns3: 1000)")
	f.IntVar(&e.cfg.HeaderOverhead, "header-overhead", 0, "header bytes per packet the ideal FCT counts (0: the frames' own; ns3: 48)")
	f.Var(ecnValue{&e.cfg.ECN}, "ecn", "DCQCN's RED marking K_min,K_max,P_max (not given: 100KB,400KB,0.2 per 25 Gb/s of --link-rate, the default shown at 100G)")
	f.BoolVar(&e.cfg.Verify, "verify", false, "move real payload bytes (with ICRCs) and check every flow's data at its receiver")
	f.Uint64Var(&e.cfg.Seed, "seed", def.Seed, "random seed")
	f.StringVar(&e.out, "out", "experiment-out", "output directory (with --json: only if given)")
	f.BoolVar(&e.asJSON, "json", false, "print one JSON object on stdout; files only with --out or --plots")
	f.BoolVar(&e.plots, "plots", false, "draw the queue, rates and FCT plots (PNG and SVG) into --out: three times the CPU of a 500 KB incast's simulation")
	f.StringVar(&e.labName, "lab", "", "incast: run in this running lab (rocelab up) with real write_bw processes, its first --senders hosts (default all but the last) into its last; sampled through its control socket every --sample (default 1ms)")
	f.BoolVar(&e.realTime, "realtime", false, "incast, fairness: run in real time, as a lab runs (the twin of the virtual-time run; figures depend on the machine's load)")
}

// config is the configuration of the scenario under the flags parsed into e (flags
// tells which were given), and the function that runs it.
func (e *experimentFlags) config(flags *pflag.FlagSet, scenario string) (experiment.Config, runFunc, error) {
	e.cfg.Scenario = scenario
	if err := checkScenarioFlags(flags, e.cfg.Scenario); err != nil {
		return e.cfg, nil, err
	}
	if err := checkFileFlags(flags, &e.cfg); err != nil {
		return e.cfg, nil, err
	}
	if err := checkGivenZeros(flags, &e.cfg); err != nil {
		return e.cfg, nil, err
	}
	if flags.Changed("fabric-rate") && flags.Changed("oversubscription") {
		return e.cfg, nil, fmt.Errorf("experiment: give --fabric-rate or --oversubscription, not both")
	}
	scenarioDefaults(flags, &e.cfg)
	e.cfg.MTU = roce.MTU(e.mtu)
	var err error
	if e.cfg.CC, err = ccMode(e.cc, e.mode); err != nil {
		return e.cfg, nil, err
	}
	if e.cfg.Telemetry, err = telemetryFormat(e.format); err != nil {
		return e.cfg, nil, err
	}
	if err := applyPreset(flags, &e.cfg); err != nil {
		return e.cfg, nil, err
	}
	if e.cfg.Scenario != "mix" && e.cfg.TopologyFile != "" {
		t, err := topo.Load(e.cfg.TopologyFile)
		if err != nil {
			return e.cfg, nil, fmt.Errorf("experiment: --topology-file: %w", err)
		}
		if err := starFromTopology(t, &e.cfg, flags.Changed("senders"), flags.Changed("base-rtt")); err != nil {
			return e.cfg, nil, fmt.Errorf("experiment: --topology-file %s: %w", e.cfg.TopologyFile, err)
		}
		e.cfg.TopologyFile = "" // read: the star's configuration holds it
	}
	run := experiment.Run
	switch {
	case e.labName != "":
		if e.cfg.Scenario != "incast" || e.realTime {
			return e.cfg, nil, fmt.Errorf("experiment: --lab runs the incast scenario, without --realtime (a lab is real time)")
		}
		store := netns.DefaultStore()
		name, err := pickLab(store, e.labName)
		if err != nil {
			return e.cfg, nil, fmt.Errorf("experiment: %w", err)
		}
		if !flags.Changed("sample") {
			e.cfg.Sample = time.Millisecond
		}
		sendersGiven := flags.Changed("senders")
		run = func(cfg experiment.Config) (*experiment.Result, error) {
			return labIncast(cfg, store, name, sendersGiven)
		}
	case e.realTime:
		if e.cfg.Scenario == "mix" {
			return e.cfg, nil, fmt.Errorf("experiment: --realtime runs incast and fairness, not mix")
		}
		rt := experiment.RealTimeDefaults(e.cfg)
		if !flags.Changed("sample") {
			e.cfg.Sample = rt.Sample
		}
		if !flags.Changed("limit") {
			e.cfg.Limit = rt.Limit
		}
		e.cfg.TxLookahead = rt.TxLookahead
		run = experiment.RunRealTime
	}
	return e.cfg, run, nil
}

// checkScenarioFlags rejects a flag that another scenario reads.
func checkScenarioFlags(flags *pflag.FlagSet, scenario string) error {
	other := mixFlags
	if scenario == "mix" {
		other = starFlags
	}
	for _, name := range other {
		if flags.Changed(name) {
			return fmt.Errorf("experiment: --%s does not apply to the %s scenario", name, scenario)
		}
	}
	return nil
}

// checkGivenZeros rejects a zero eta or N given on the command line: the
// configuration reads zero as "the default", so given, it is a mistake.
func checkGivenZeros(flags *pflag.FlagSet, cfg *experiment.Config) error {
	if flags.Changed("eta") && !(cfg.Eta > 0) {
		return fmt.Errorf("experiment: --eta %v: want a target utilization in (0, 1]", cfg.Eta)
	}
	if flags.Changed("every-n") && cfg.EveryN < 1 {
		return fmt.Errorf("experiment: --every-n %d: want at least 1", cfg.EveryN)
	}
	return nil
}

// checkFileFlags rejects the flags a flow file or a topology file replaces.
func checkFileFlags(flags *pflag.FlagSet, cfg *experiment.Config) error {
	topologyReplaces := []string{"topology", "leaves", "spines", "hosts-per-leaf", "k", "pods", "tors", "aggs",
		"cores", "hosts-per-tor", "oversubscription", "fabric-rate", "link-rate", "link-delay"}
	if cfg.Scenario != "mix" {
		topologyReplaces = slices.Concat(starFileFlags, []string{"ecn", "lab", "realtime"})
	}
	for _, d := range []struct {
		file, what string
		replaced   []string
	}{{cfg.FlowFile, "a flow file (--flows FILE)", arrivalFlags},
		{cfg.TopologyFile, "--topology-file", topologyReplaces}} {
		if d.file == "" {
			continue
		}
		for _, name := range d.replaced {
			if flags.Changed(name) {
				return fmt.Errorf("experiment: --%s does not apply with %s", name, d.what)
			}
		}
	}
	return nil
}

// scenarioDefaults applies the mix scenario's own defaults to the flags not given.
func scenarioDefaults(flags *pflag.FlagSet, cfg *experiment.Config) {
	if cfg.Scenario != "mix" {
		return
	}
	mixDef := experiment.MixDefaults()
	if !flags.Changed("sample") {
		cfg.Sample = mixDef.Sample
	}
	if !flags.Changed("limit") {
		cfg.Limit = mixDef.Limit
	}
	if flags.Changed("flows") && !flags.Changed("duration") {
		cfg.Duration = 0 // --flows alone: no arrival window
	}
}

// applyPreset sets what --preset implies for the flags not given, and RED marking
// scaled with the link rate unless --ecn gives it.
func applyPreset(flags *pflag.FlagSet, cfg *experiment.Config) error {
	if !flags.Changed("ecn") {
		cfg.ECN = fabric.SimECN(cfg.LinkRate)
	}
	switch cfg.Preset {
	case "":
		return nil
	case experiment.PresetNS3:
	default:
		return fmt.Errorf("--preset %q: want %s", cfg.Preset, strings.Join(experiment.Presets, ", "))
	}
	p := experiment.NS3(*cfg)
	for _, d := range []struct {
		flag string
		set  func()
	}{
		{"telemetry", func() { cfg.Telemetry = p.Telemetry }},
		{"payload", func() { cfg.Payload = p.Payload }},
		{"header-overhead", func() { cfg.HeaderOverhead = p.HeaderOverhead }},
		{"max-stage", func() { cfg.MaxStage = p.MaxStage }},
	} {
		if !flags.Changed(d.flag) {
			d.set()
		}
	}
	return nil
}

// ccMode is the congestion control named by --cc and, for hpcc, --mode ("": probe).
func ccMode(cc, mode string) (rnic.Mode, error) {
	m, err := rnic.ParseCC(cc, mode)
	switch {
	case err != nil && cc == rnic.CCHPCC:
		return "", fmt.Errorf("--mode: %w", err)
	case err != nil:
		return "", fmt.Errorf("--cc: %w", err)
	}
	return m, nil
}

// telemetryFormat is the format named by --telemetry; an experiment's HPCC needs one.
func telemetryFormat(name string) (telemetry.Format, error) {
	f, err := telemetry.ParseFormat(name)
	if err == nil && f == "" {
		err = fmt.Errorf("want one of %s", strings.Join(telemetry.FormatNames(), ", "))
	}
	if err != nil {
		return "", fmt.Errorf("--telemetry %q: %w", name, err)
	}
	return f, nil
}

// outputs is what a run writes: its files into dir ("": none) and, with plots, its
// plots too.
type outputs struct {
	dir   string
	plots bool
}

// write writes res's outputs.
func (o outputs) write(res *experiment.Result) error {
	if o.dir == "" {
		return nil
	}
	if err := res.WriteData(o.dir); err != nil {
		return err
	}
	if o.plots {
		return res.WritePlots(o.dir)
	}
	return nil
}

// runAndReport runs cfg with run, showing its progress on pr if not nil, writes its
// outputs and prints the summary (or the JSON object) on w.
func runAndReport(w io.Writer, pr *progress, run func(experiment.Config) (*experiment.Result, error), cfg experiment.Config, out outputs, asJSON bool) error {
	start := time.Now()
	if pr != nil {
		cfg.Progress = pr.update
	}
	res, err := run(cfg)
	if pr != nil {
		pr.clear()
	}
	if err != nil {
		return err
	}
	if err := out.write(res); err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(experiment.JSON{Metrics: res.Metrics, Flows: res.Flows, Errors: res.Errors}); err != nil {
			return err
		}
	} else {
		res.WriteSummary(w)
		what := "files in " + out.dir
		if !out.plots {
			what += " (plots with --plots)"
		}
		fmt.Fprintf(w, "  wall clock        %v; %s\n", time.Since(start).Round(time.Millisecond), what)
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("experiment: %d errors", len(res.Errors))
	}
	return nil
}
