package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/roce/decode"
)

func init() { rootCmd.AddCommand(newDecodeCmd()) }

func newDecodeCmd() *cobra.Command {
	var summary bool
	cmd := &cobra.Command{
		Use:   "decode FILE",
		Short: "Decode a pcap or pcapng capture: one JSON object per frame with RoCEv2 and telemetry fields",
		Long: `decode reads a pcap or pcapng capture (Ethernet) and prints one JSON object per frame on
stdout: frame (1-based), roce, ip, udp, bth, reth, aeth, atomic_eth, atomic_ack_eth, immdt,
ieth, deth, payload_len, icrc, icrc_ok, telemetry, and error for a frame that claims to be
RoCEv2 but does not parse. Keys are present only where the frame has that header. FILE "-"
reads standard input.

With --summary it prints a table instead: opcode counts, ICRC failures and errors.`,
		Example: `  rocelab decode capture.pcapng | jq 'select(.bth.opcode_name == "RC_ACKNOWLEDGE")'
  rocelab decode --summary write_bw.pcap`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
			var s decode.Summary
			enc := json.NewEncoder(cmd.OutOrStdout())
			err := decode.ReadFrames(in, func(i int, frame []byte, _ gopacket.CaptureInfo) error {
				r := d.Decode(i, frame)
				if summary {
					s.Add(&r)
					return nil
				}
				return enc.Encode(&r)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if summary {
				return s.Print(cmd.OutOrStdout())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&summary, "summary", false, "print a table of opcode counts, ICRC failures and errors instead of JSON")
	return cmd
}
