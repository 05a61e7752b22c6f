package main

import (
	"fmt"
	"net"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/web"
)

func init() { rootCmd.AddCommand(newWebCmd()) }

// defaultCaptureDir is where captures started from the web view go.
const defaultCaptureDir = "out"

// serveWeb serves the live view of lab at http://addr/ in the background and returns
// the page's URL, with the token that captures need (web.Server.Token).
func serveWeb(addr string, store netns.Store, name, captureDir string) (string, error) {
	s, err := web.New(store, name, captureDir)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("web: %w", err)
	}
	go http.Serve(ln, web.Guard(ln.Addr().String(), s.Handler()))
	return "http://" + ln.Addr().String() + "/?token=" + s.Token(), nil
}

// serveReplay serves the replay of the experiment output directory dir at http://addr/
// in the background and returns the address it listens on and the frames it has.
func serveReplay(addr, dir string) (string, int, error) {
	r, err := web.LoadReplay(dir)
	if err != nil {
		return "", 0, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("web: %w", err)
	}
	go http.Serve(ln, web.Guard(ln.Addr().String(), r.Handler()))
	return ln.Addr().String(), r.Frames(), nil
}

func newWebCmd() *cobra.Command {
	var labName, listen, captureDir, expDir string
	cmd := &cobra.Command{
		Use:   "web [--lab LAB | --experiment DIR] --listen ADDR [--capture-dir DIR]",
		Short: "Serve a live web view of a running lab, or replay a finished experiment",
		Long: `web serves a page at http://ADDR/ that shows the running lab (the one --lab names,
or the only one) live: the topology as a graph whose links show their utilization and
queue depth, each switch port's rate, queue, drops and ECN marks, the flows (QPs) of a
selected host with their paced rate, HPCC++'s window W and U, and a button per port
that starts and stops a capture (written to --capture-dir as PORT-TIME.pcapng). The
page follows the lab through server-sent events, twice a second; it is plain JS and
SVG embedded in the binary (no CDN). rocelab up --web ADDR serves the same from the lab
process. It answers only its own page: a request whose Host is not ADDR (or a
localhost name, for a loopback ADDR) or that another site's page sent gets 403, and
captures need the token of the URL it prints (http://ADDR/?token=...), which the page
keeps; a capture stops by itself after 10 minutes or 1 GiB. See docs/observability.md.

With --experiment DIR it serves the same page for a finished virtual-time experiment
(the --out directory of rocelab experiment incast|fairness|mix) instead of a lab: the
run's topology, and its links' utilization and queue depth and each flow's paced rate,
window, bytes in flight and HPCC++'s U, replayed sample by sample over the run's
simulated time (one sample every quarter of the base RTT), with play/pause, a time
slider and a speed. It needs no root and no lab. The directory must come from a rocelab
that writes topology.yaml and links.csv.`,
		Example: `  sudo rocelab web --listen 127.0.0.1:8080     # then open http://127.0.0.1:8080/
  rocelab experiment incast --senders 4 --flow-size 100KB --out out/incast4
  rocelab web --experiment out/incast4 --listen 127.0.0.1:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return fmt.Errorf("web: --listen ADDR (host:port) is required")
			}
			if expDir != "" {
				if labName != "" {
					return fmt.Errorf("web: --lab and --experiment: give one (a running lab, or a finished experiment's directory)")
				}
				addr, n, err := serveReplay(listen, expDir)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "experiment %s: replay of %d samples at http://%s/ (Ctrl-C stops)\n", expDir, n, addr)
				select {} // until Ctrl-C
			}
			store := netns.DefaultStore()
			name, err := pickLab(store, labName)
			if err != nil {
				return fmt.Errorf("web: %w", err)
			}
			url, err := serveWeb(listen, store, name, captureDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "lab %s: live view at %s (Ctrl-C stops)\n", name, url)
			select {} // until Ctrl-C
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "the lab (default: the only running one)")
	cmd.Flags().StringVar(&expDir, "experiment", "", "replay the finished experiment whose --out directory this is, instead of a lab")
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve the page on (host:port)")
	cmd.Flags().StringVar(&captureDir, "capture-dir", defaultCaptureDir, "where captures started from the page are written")
	return cmd
}
