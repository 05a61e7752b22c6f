package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/lab"
	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/web"
)

func init() { rootCmd.AddCommand(newMetricsCmd()) }

// serveMetrics serves source's metrics at http://addr/metrics in the background and
// returns the address it listens on (addr with port 0 picks one). With profiles, the
// calling process also serves Go's profiles at /debug/pprof/ (the lab process does:
// its loop thread is what a profile of the data path wants to see).
func serveMetrics(addr string, source func() (lab.Status, error), profiles bool) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", lab.NewMetrics(source).Handler())
	if profiles {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	go http.Serve(ln, web.Guard(ln.Addr().String(), mux))
	return ln.Addr().String(), nil
}

func newMetricsCmd() *cobra.Command {
	var labName, listen string
	cmd := &cobra.Command{
		Use:   "metrics [--lab LAB] --listen ADDR",
		Short: "Serve a running lab's counters to Prometheus",
		Long: `metrics serves the counters of a running lab (the one --lab names, or the only
one) at http://ADDR/metrics in Prometheus's text format until Ctrl-C: per switch port
frames, bytes, drops, ECN marks, PFC pauses and queue depth; per host soft-RNIC
counters; per QP paced rate, window, inflight bytes and HPCC++'s U. Each scrape reads
the lab's status through its control socket. rocelab up --metrics ADDR serves the same
from the lab process itself. docs/observability.md lists the metrics and shows how to
point Prometheus and Grafana at a lab.`,
		Example: `  sudo rocelab metrics --listen 127.0.0.1:9464
  curl -s http://127.0.0.1:9464/metrics | grep rocelab_port_tx_bytes_total`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return fmt.Errorf("metrics: --listen ADDR (host:port) is required")
			}
			store := netns.DefaultStore()
			name, err := pickLab(store, labName)
			if err != nil {
				return fmt.Errorf("metrics: %w", err)
			}
			source := func() (lab.Status, error) {
				reply, err := lab.Query(store, name, lab.Request{Op: "status"})
				if err != nil {
					return lab.Status{}, err
				}
				return reply.Status.WholeLab(), nil
			}
			addr, err := serveMetrics(listen, source, false)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "lab %s: Prometheus metrics at http://%s/metrics (Ctrl-C stops)\n", name, addr)
			select {} // until Ctrl-C
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab (default: the only running one)")
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve /metrics on (host:port)")
	return cmd
}
