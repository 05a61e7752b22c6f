package main

import (
	"bufio"
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/hpcc"
	"github.com/rocelab/rocelab/hpcc/replay"
)

func init() {
	hpccCmd := &cobra.Command{
		Use:   "hpcc",
		Short: "HPCC++ congestion-control tools",
	}
	hpccCmd.AddCommand(newHPCCReplayCmd())
	rootCmd.AddCommand(hpccCmd)
}

// hpccReplayFlags are the flags of `rocelab hpcc replay`, in the units the contract
// in docs/hpcc.md names.
type hpccReplayFlags struct {
	mode     string
	baseRTT  time.Duration
	eta      float64
	maxStage int
	wai      float64
	flows    int
	winit    float64
	wmin     float64
	lineRate float64
}

func newHPCCReplayCmd() *cobra.Command {
	var f hpccReplayFlags
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Run the HPCC++ draft algorithm over a telemetry trace (JSON lines on stdin)",
		Long: `replay reads one JSON object per line on stdin and writes the HPCC++ state after
each one as a JSON line on stdout.

Sender mode (the draft's NewAck):  {"seq": N, "snd_nxt": N, "hops": [HOP, ...]}
Receiver mode (Rx-HPCC, NewINT):   {"now_ns": N, "hops": [HOP, ...]}
HOP: {"ts_ns": N, "qlen": N, "tx_bytes": N, "bw_bps": N}

Output: {"u", "w", "wc", "rate_bps", "inc_stage", "update_wc"} plus "send_ack" in
receiver mode. Windows are bytes, rate_bps = w·8/T. See docs/hpcc.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := f.params(cmd)
			if err != nil {
				return err
			}
			r, err := replay.New(f.mode, p)
			if err != nil {
				return err
			}
			return runReplay(cmd, r)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "mode", replay.ModeSender, "sender (per-ACK NewAck) or receiver (Rx-HPCC NewINT)")
	fl.DurationVar(&f.baseRTT, "base-rtt", 5*time.Microsecond, "base RTT T")
	fl.Float64Var(&f.eta, "eta", hpcc.DefaultEta, "target utilization, in (0, 1]")
	fl.IntVar(&f.maxStage, "max-stage", hpcc.DefaultMaxStage, "additive-increase stages before multiplicative increase")
	fl.Float64Var(&f.wai, "wai", 0, "additive increase W_ai in bytes (default winit·(1−eta)/flows, the draft's rule of thumb)")
	fl.IntVar(&f.flows, "flows", 1, "expected flows N at the bottleneck; only used to derive --wai when it is not given")
	fl.Float64Var(&f.winit, "winit", 0, "initial and maximum window in bytes (default line rate × base RTT)")
	fl.Float64Var(&f.wmin, "wmin", hpcc.DefaultWMin, "minimum window in bytes")
	fl.Float64Var(&f.lineRate, "line-rate", 100e9, "line rate in bit/s")
	return cmd
}

// params turns the flags into hpcc.Params, rejecting values that have a default
// meaning at zero in Params but were given explicitly.
func (f *hpccReplayFlags) params(cmd *cobra.Command) (hpcc.Params, error) {
	changed := cmd.Flags().Changed
	if changed("winit") && !(f.winit > 0) {
		return hpcc.Params{}, fmt.Errorf("--winit must be a positive number of bytes, got %v", f.winit)
	}
	if changed("wai") && !(f.wai >= 0) {
		return hpcc.Params{}, fmt.Errorf("--wai must be a non-negative number of bytes, got %v", f.wai)
	}
	if !changed("wai") && f.flows < 1 {
		return hpcc.Params{}, fmt.Errorf("--flows must be at least 1, got %d", f.flows)
	}
	p := hpcc.Params{
		BaseRTT:  f.baseRTT,
		LineRate: f.lineRate,
		Eta:      f.eta,
		MaxStage: f.maxStage,
		WAI:      f.wai,
		WInit:    f.winit,
		WMin:     f.wmin,
	}
	if !changed("wai") {
		p.Flows = f.flows
	}
	return p, nil
}

// runReplay streams stdin to stdout line by line, flushing each answer so that a
// caller driving the command interactively sees it at once. Blank lines are skipped.
func runReplay(cmd *cobra.Command, r *replay.Replayer) error {
	in := bufio.NewScanner(cmd.InOrStdin())
	in.Buffer(make([]byte, 64*1024), 16<<20)
	out := bufio.NewWriter(cmd.OutOrStdout())
	for n := 1; in.Scan(); n++ {
		line := bytes.TrimSpace(in.Bytes())
		if len(line) == 0 {
			continue
		}
		res, err := r.Step(line)
		if err != nil {
			return fmt.Errorf("hpcc replay: stdin line %d: %w", n, err)
		}
		out.Write(res)
		out.WriteByte('\n')
		if err := out.Flush(); err != nil {
			return fmt.Errorf("hpcc replay: writing stdout: %w", err)
		}
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("hpcc replay: reading stdin: %w", err)
	}
	return nil
}
