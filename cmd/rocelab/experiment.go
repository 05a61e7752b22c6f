package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/experiment"
	"github.com/rocelab/rocelab/roce"
	"github.com/rocelab/rocelab/roce/telemetry"
)

func init() {
	def := experiment.Defaults()
	var (
		flowSize, linkRate, linkDelay, baseRTT, stagger, sample string
		mtu                                                     int
		cc, mode, format, out                                   string
		asJSON                                                  bool
		cfg                                                     = def
	)
	cmd := &cobra.Command{
		Use:   "experiment incast|fairness",
		Short: "Run a congestion-control experiment in virtual time: CSV, plots, summary",
		Long: `Runs soft-RNICs and a switch in virtual time and writes, into --out: queue.csv,
rates.csv, flows.csv and queue/rates/fct plots (PNG and SVG). The same flags and seed
give byte-identical files. --json prints the metrics and flow records on stdout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Scenario = args[0]
			var err error
			if cfg.FlowSize, err = topo.ParseBytes(flowSize); err != nil {
				return err
			}
			if cfg.LinkRate, err = topo.ParseRate(linkRate); err != nil {
				return err
			}
			for _, d := range []struct {
				s   string
				dst *time.Duration
			}{{linkDelay, &cfg.LinkDelay}, {baseRTT, &cfg.BaseRTT}, {stagger, &cfg.Stagger}, {sample, &cfg.Sample}} {
				if d.s == "" {
					continue
				}
				if *d.dst, err = topo.ParseDuration(d.s); err != nil {
					return err
				}
			}
			cfg.MTU = roce.MTU(mtu)
			switch cc {
			case "hpcc":
				cfg.CC = rnic.Mode(mode)
			case "dcqcn":
				cfg.CC = rnic.ModeDCQCN
			case "none":
				cfg.CC = rnic.ModeNone
			default:
				return fmt.Errorf("--cc %q: want hpcc, dcqcn or none", cc)
			}
			cfg.Telemetry = telemetry.Format(format)
			if format == "int" {
				cfg.Telemetry = telemetry.FormatINTMD
			}
			start := time.Now()
			res, err := experiment.Run(cfg)
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
	f.IntVar(&cfg.Senders, "senders", def.Senders, "senders (flows)")
	f.StringVar(&flowSize, "flow-size", "500KB", "bytes per flow (500KB, 1MiB)")
	f.StringVar(&linkRate, "link-rate", "100G", "line rate of every link (100G, 25Gbps)")
	f.StringVar(&linkDelay, "link-delay", "1us", "one-way delay of every link")
	f.IntVar(&mtu, "mtu", int(def.MTU), "path MTU: 256, 512, 1024, 2048 or 4096")
	f.StringVar(&cc, "cc", "hpcc", "congestion control: hpcc, dcqcn or none")
	f.StringVar(&mode, "mode", string(rnic.ModeHPCC), "HPCC mode: per-ack, probe, rx or every-n")
	f.IntVar(&cfg.EveryN, "every-n", 4, "N of --mode every-n")
	f.StringVar(&format, "telemetry", "int", "telemetry format: int, ioam, ifa or hpcc")
	f.Float64Var(&cfg.Eta, "eta", 0.95, "HPCC target utilization")
	f.IntVar(&cfg.MaxStage, "max-stage", def.MaxStage, "HPCC additive-increase stages")
	f.Float64Var(&cfg.WAI, "wai", 0, "HPCC additive increase in bytes (0: rule of thumb)")
	f.StringVar(&baseRTT, "base-rtt", "", "HPCC base RTT (default: from the topology)")
	f.StringVar(&stagger, "stagger", "100us", "time between flow starts (fairness)")
	f.StringVar(&sample, "sample", "100ns", "time-series sampling interval")
	f.Uint64Var(&cfg.Seed, "seed", def.Seed, "random seed")
	f.StringVar(&out, "out", "experiment-out", "output directory")
	f.BoolVar(&asJSON, "json", false, "print one JSON object on stdout")
	rootCmd.AddCommand(cmd)
}
