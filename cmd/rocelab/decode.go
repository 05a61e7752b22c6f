package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rocelab/rocelab/roce/decode"
)

func init() { rootCmd.AddCommand(newDecodeCmd()) }

// newDecodeCmd returns the decode command (fresh flags each call, for tests).
func newDecodeCmd() *cobra.Command {
	var summary bool
	var signals decode.Signals
	cmd := &cobra.Command{
		Use:   "decode FILE",
		Short: "Decode a pcap or pcapng capture: one JSON object per frame with RoCEv2 and telemetry fields",
		Long: `decode reads a pcap or pcapng capture and prints one JSON object per frame on stdout:
frame (1-based, as Wireshark numbers them), roce, ip, udp, bth, reth, aeth, atomic_eth,
atomic_ack_eth, immdt, ieth, deth, payload_len, icrc, icrc_ok, telemetry, error for a frame
that claims to be RoCEv2 but does not parse, and note. Keys are present only where the frame
has that header. A packet of a non-Ethernet interface (pcapng) gets frame, link_type and a
note. FILE "-" reads standard input.

Telemetry signalled by a DSCP (INT, the HPCC block) is accepted only when it validates and
leaves a RoCEv2 packet whose ICRC verifies; otherwise the frame decodes without it and the
note says why. --int-dscp, --hpcc-dscp and --ifa-protocol set the signalling values.

A capture that ends inside a packet is reported as tshark reports it: the frames before it
are printed, then decode fails ("cut short in the middle of a packet").

With --summary it prints a table instead: opcode counts, ICRC failures, errors and notes.`,
		Example: `  rocelab decode capture.pcapng | jq 'select(.bth.opcode_name == "RC_ACKNOWLEDGE")'
  rocelab decode --summary write_bw.pcap
  rocelab decode --int-dscp 46 int-lab.pcap`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := signals.Validate(); err != nil {
				return err
			}
			in := os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			var d decode.Decoder
			d.SetSignals(signals)
			var s decode.Summary
			enc := json.NewEncoder(cmd.OutOrStdout())
			err := decode.ReadFrames(in, func(f *decode.Frame) error {
				r := d.DecodeFrame(f)
				if summary {
					s.Add(&r)
					return nil
				}
				return enc.Encode(&r)
			})
			if summary {
				// What was read is reported even when the capture is cut short.
				if perr := s.Print(cmd.OutOrStdout()); err == nil {
					err = perr
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&summary, "summary", false, "print a table of opcode counts, ICRC failures, errors and notes instead of JSON")
	signalFlags(cmd.Flags(), &signals)
	return cmd
}

// signalFlags adds the telemetry signalling flags (--int-dscp, --hpcc-dscp,
// --ifa-protocol) to fs, defaulting to the codecs' values.
func signalFlags(fs *pflag.FlagSet, s *decode.Signals) {
	*s = decode.DefaultSignals()
	fs.Uint8Var(&s.INTDSCP, "int-dscp", s.INTDSCP, "DSCP that signals INT over UDP (0-63)")
	fs.Uint8Var(&s.HPCCDSCP, "hpcc-dscp", s.HPCCDSCP, "DSCP that signals the HPCC hop block (0-63)")
	fs.Uint8Var(&s.IFAProtocol, "ifa-protocol", s.IFAProtocol, "IP protocol number that signals IFA")
}
