package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/experiment"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

func init() { rootCmd.AddCommand(newExperimentCmd()) }

// Flags that only some scenarios read; giving one to another scenario is an error.
var (
	starFlags = []string{"senders", "flow-size", "stagger"}
	mixFlags  = []string{"topology", "leaves", "spines", "hosts-per-leaf", "k", "pods", "tors", "aggs", "cores", "hosts-per-tor",
		"oversubscription", "fabric-rate", "cdf", "load", "duration", "flows"}
)

// newExperimentCmd returns a fresh `experiment` command (tests run several).
func newExperimentCmd() *cobra.Command {
	def := experiment.Defaults()
	mixDef := experiment.MixDefaults()
	var (
		flowSize, linkRate, fabricRate, linkDelay, baseRTT, stagger, sample string
		duration, limit                                                     string
		mtu                                                                 int
		cc, mode, format, out                                               string
		asJSON                                                              bool
		cfg                                                                 = def
	)
	cfg.Mix = mixDef.Mix
	cmd := &cobra.Command{
		Use:   "experiment incast|fairness|mix",
		Short: "Run a congestion-control experiment in virtual time: CSV, plots, summary",
		Long: `Runs soft-RNICs and switches in virtual time and writes, into --out: queue.csv,
rates.csv, flows.csv and queue/rates/fct plots (PNG and SVG). The same flags and seed
give byte-identical files; wall-clock figures appear only in the summary. --json prints
the metrics and flow records on stdout instead of the summary.

Scenarios:
  incast    --senders hosts each WRITE --flow-size to one receiver through one switch.
  fairness  --senders long flows to one receiver through one switch, joining every
            --stagger and leaving in reverse order.
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
            p50/p95/p99 slowdown per 5% of the flows by size.

Simulated packets carry headers, lengths and PSNs but no payload bytes, and no ICRC
is computed: the results are the same, faster and in far less memory. --verify moves
real data and checks every byte of every flow at its receiver.

Sizes, rates and durations take units: 500KB, 1MiB, 100G, 25Gbps, 1us, 5ms.`,
		Example: `  rocelab experiment incast --senders 16 --cc hpcc --telemetry int --out out/incast
  rocelab experiment fairness --senders 2 --flow-size 16MB --mtu 4096 --stagger 200us
  rocelab experiment mix --topology leaf-spine --load 0.5 --cdf websearch --cc hpcc --out out/mix
  rocelab experiment mix --topology fat-tree --k 4 --cdf fbhadoop --load 0.3 --cc dcqcn --json
  rocelab experiment mix --topology fat-tree-3tier --link-rate 100G --load 0.3 --duration 5ms --out out/fat3
  rocelab experiment mix --cdf my_cdf.txt --flows 200 --duration 0 --link-rate 25G --fabric-rate 100G`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("experiment: want one scenario (incast, fairness or mix), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Scenario = args[0]
			flags := cmd.Flags()
			other := mixFlags
			if cfg.Scenario == "mix" {
				other = starFlags
			}
			for _, name := range other {
				if flags.Changed(name) {
					return fmt.Errorf("experiment: --%s does not apply to the %s scenario", name, cfg.Scenario)
				}
			}
			// The configuration reads a zero eta or N as "the default"; given on the
			// command line, zero is a mistake.
			if flags.Changed("eta") && !(cfg.Eta > 0) {
				return fmt.Errorf("experiment: --eta %v: want a target utilization in (0, 1]", cfg.Eta)
			}
			if flags.Changed("every-n") && cfg.EveryN < 1 { // likewise
				return fmt.Errorf("experiment: --every-n %d: want at least 1", cfg.EveryN)
			}
			var err error
			if cfg.FlowSize, err = topo.ParseBytes(flowSize); err != nil {
				return fmt.Errorf("--flow-size: %w", err)
			}
			if cfg.LinkRate, err = topo.ParseRate(linkRate); err != nil {
				return fmt.Errorf("--link-rate: %w", err)
			}
			if fabricRate != "" && flags.Changed("oversubscription") {
				return fmt.Errorf("experiment: give --fabric-rate or --oversubscription, not both")
			}
			if fabricRate != "" {
				if cfg.FabricRate, err = topo.ParseRate(fabricRate); err != nil {
					return fmt.Errorf("--fabric-rate: %w", err)
				}
			}
			if cfg.Scenario == "mix" {
				cfg.Sample, cfg.Limit = mixDef.Sample, mixDef.Limit
				if flags.Changed("flows") && !flags.Changed("duration") {
					duration = "0" // --flows alone: no arrival window
				}
			}
			for _, d := range []struct {
				name, s string
				dst     *time.Duration
			}{{"link-delay", linkDelay, &cfg.LinkDelay}, {"base-rtt", baseRTT, &cfg.BaseRTT}, {"stagger", stagger, &cfg.Stagger},
				{"sample", sample, &cfg.Sample}, {"duration", duration, &cfg.Duration}, {"limit", limit, &cfg.Limit}} {
				if d.s == "" {
					continue
				}
				if *d.dst, err = topo.ParseDuration(d.s); err != nil {
					return fmt.Errorf("--%s: %w", d.name, err)
				}
			}
			cfg.MTU = roce.MTU(mtu)
			switch cc {
			case "hpcc":
				cfg.CC = rnic.Mode(mode)
				switch cfg.CC {
				case rnic.ModeHPCC, rnic.ModeHPCCProbe, rnic.ModeRxHPCC, rnic.ModeHPCCEveryN:
				default:
					return fmt.Errorf("--mode %q: want per-ack, probe, rx or every-n", mode)
				}
			case "dcqcn":
				cfg.CC = rnic.ModeDCQCN
			case "none":
				cfg.CC = rnic.ModeNone
			default:
				return fmt.Errorf("--cc %q: want hpcc, dcqcn or none", cc)
			}
			switch format {
			case "int", string(telemetry.FormatINTMD):
				cfg.Telemetry = telemetry.FormatINTMD
			case "ioam", "ifa", "hpcc":
				cfg.Telemetry = telemetry.Format(format)
			default:
				return fmt.Errorf("--telemetry %q: want int, ioam, ifa or hpcc", format)
			}
			start := time.Now()
			pr := newProgress(cmd.ErrOrStderr())
			if pr != nil {
				cfg.Progress = pr.update
			}
			res, err := experiment.Run(cfg)
			if pr != nil {
				pr.clear()
			}
			if err != nil {
				return err
			}
			if err := res.WriteFiles(out); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(experiment.JSON{Metrics: res.Metrics, Flows: res.Flows, Errors: res.Errors}); err != nil {
					return err
				}
			} else {
				res.WriteSummary(w)
				fmt.Fprintf(w, "  wall clock        %v; files in %s\n", time.Since(start).Round(time.Millisecond), out)
			}
			if len(res.Errors) > 0 {
				return fmt.Errorf("experiment: %d errors", len(res.Errors))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Senders, "senders", def.Senders, "senders (flows) of incast and fairness")
	f.StringVar(&flowSize, "flow-size", "500KB", "bytes per flow of incast and fairness (500KB, 1MiB)")
	f.StringVar(&linkRate, "link-rate", "100G", "line rate of every link; of host links in mix (100G, 25Gbps)")
	f.StringVar(&fabricRate, "fabric-rate", "", "mix: line rate of switch-to-switch links (default --link-rate; fat-tree-3tier: from --oversubscription)")
	f.StringVar(&linkDelay, "link-delay", "1us", "one-way delay of every link")
	f.IntVar(&mtu, "mtu", int(def.MTU), "path MTU: 256, 512, 1024, 2048 or 4096")
	f.StringVar(&cc, "cc", "hpcc", "congestion control: hpcc, dcqcn or none")
	f.StringVar(&mode, "mode", string(rnic.ModeHPCC), "HPCC mode: per-ack, probe, rx or every-n")
	f.IntVar(&cfg.EveryN, "every-n", 4, "N of --mode every-n")
	f.StringVar(&format, "telemetry", "int", "telemetry format: int, ioam, ifa or hpcc")
	f.Float64Var(&cfg.Eta, "eta", 0.95, "HPCC target utilization")
	f.IntVar(&cfg.MaxStage, "max-stage", def.MaxStage, "HPCC additive-increase stages")
	f.Float64Var(&cfg.WAI, "wai", 0, "HPCC additive increase in bytes (0: rule of thumb; mix: for hosts-1 flows)")
	f.StringVar(&baseRTT, "base-rtt", "", "HPCC base RTT (default: from the topology; mix: the longest path's)")
	f.StringVar(&stagger, "stagger", "100us", "time between flow starts (fairness)")
	f.StringVar(&sample, "sample", "", "time-series sampling interval (default 100ns; mix 1us)")
	f.StringVar(&limit, "limit", "", "stop the run at this virtual time if flows are unfinished (default 100ms; mix 1s)")
	f.StringVar(&cfg.Topology, "topology", mixDef.Topology, "mix: leaf-spine, fat-tree or fat-tree-3tier (the HPCC paper's 320 hosts)")
	f.IntVar(&cfg.Leaves, "leaves", mixDef.Leaves, "mix: leaf switches of the leaf-spine")
	f.IntVar(&cfg.Spines, "spines", mixDef.Spines, "mix: spine switches of the leaf-spine")
	f.IntVar(&cfg.HostsPerLeaf, "hosts-per-leaf", mixDef.HostsPerLeaf, "mix: hosts on each leaf")
	f.IntVar(&cfg.K, "k", mixDef.K, "mix: k of the fat-tree (even; k³/4 hosts)")
	f.IntVar(&cfg.ThreeTier.Pods, "pods", mixDef.ThreeTier.Pods, "mix fat-tree-3tier: pods (ToRs and aggregation switches divide among them)")
	f.IntVar(&cfg.ThreeTier.ToRs, "tors", mixDef.ThreeTier.ToRs, "mix fat-tree-3tier: ToR switches")
	f.IntVar(&cfg.ThreeTier.Aggs, "aggs", mixDef.ThreeTier.Aggs, "mix fat-tree-3tier: aggregation switches")
	f.IntVar(&cfg.ThreeTier.Cores, "cores", mixDef.ThreeTier.Cores, "mix fat-tree-3tier: core switches")
	f.IntVar(&cfg.ThreeTier.HostsPerToR, "hosts-per-tor", mixDef.ThreeTier.HostsPerToR, "mix fat-tree-3tier: hosts on each ToR")
	f.Float64Var(&cfg.Oversubscription, "oversubscription", mixDef.Oversubscription,
		"mix fat-tree-3tier: a ToR's host capacity over its uplink capacity; sets the fabric rate")
	f.StringVar(&cfg.CDF, "cdf", mixDef.CDF, "mix: flow sizes: "+strings.Join(experiment.CDFNames, ", ")+" or a CDF file")
	f.Float64Var(&cfg.Load, "load", mixDef.Load, "mix: offered load, a fraction of each host link's rate")
	f.StringVar(&duration, "duration", mixDef.Duration.String(), "mix: arrival window (0: none, with --flows)")
	f.IntVar(&cfg.Flows, "flows", 0, "mix: stop the arrivals after this many flows (0: --duration decides)")
	f.BoolVar(&cfg.Verify, "verify", false, "move real payload bytes (with ICRCs) and check every flow's data at its receiver")
	f.Uint64Var(&cfg.Seed, "seed", def.Seed, "random seed")
	f.StringVar(&out, "out", "experiment-out", "output directory")
	f.BoolVar(&asJSON, "json", false, "print one JSON object on stdout")
	return cmd
}
