package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/k8s"
)

func init() {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Run a lab split across machines on Kubernetes",
		Long: `k8s writes the Kubernetes objects that run a lab whose topology places its nodes on
machines: one pod per machine runs that machine's part (docs/kubernetes.md).`,
	}
	cmd.AddCommand(newK8sRenderCmd())
	rootCmd.AddCommand(cmd)
}

// k8sRenderHelp is k8s render's --help text.
const k8sRenderHelp = `render writes, as one multi-document YAML file, the objects that run the topology's
lab on a Kubernetes cluster, one part per machine (the topology's machines:):

  Secret     LAB-secret    a random lab secret, mounted as each part's --secret-file
  ConfigMap  LAB-topology  the topology, each machine's address set to its part's DNS name
  Service    LAB           headless, UDP 4789 (VXLAN) and TCP 4790 (control); it publishes
                           parts before they are ready, since a part waits for its peers
  Pod        LAB-MACHINE   rocelab up --machine MACHINE --foreground, reachable by the
                           others at LAB-MACHINE.LAB.NS.svc; NET_ADMIN, SYS_ADMIN,
                           /dev/net/tun; ready once rocelab status --lab LAB answers

The pods of one lab never share a node (pod anti-affinity on kubernetes.io/hostname;
--spread preferred lets them on a cluster with fewer nodes than parts), and
--node-for pins a machine's part to a node. Rendering draws a new secret each time:
render once and keep the file, so that kubectl delete -f removes what apply made.

-o DIR writes DIR/LAB.yaml; -o - (the default) writes to standard output.`

func newK8sRenderCmd() *cobra.Command {
	var file, out, spread string
	var nodeFor []string
	o := k8s.Options{}
	cmd := &cobra.Command{
		Use:   "render -f TOPOLOGY.yaml [--name LAB] [--namespace NS] [--image IMG] [--node-for MACHINE=NODE]... [-o DIR|-]",
		Short: "Write the objects that run a lab's parts as pods: kubectl apply starts it, kubectl delete removes it",
		Long:  k8sRenderHelp,
		Example: `  rocelab k8s render -f topologies/two-machines.yaml --name demo -o .
  kubectl apply -f demo.yaml
  kubectl wait --for=condition=Ready pod -l rocelab.dev/lab=demo
  kubectl exec demo-b -- rocelab exec h4 -- ib_write_bw -x 1 &
  kubectl exec -it demo-a -- rocelab exec h1 -- ib_write_bw -x 1 10.0.0.4
  kubectl delete -f demo.yaml

  rocelab k8s render -f lab.yaml --namespace rdma --image registry.example/rocelab:1 \
      --node-for a=worker1 --node-for b=worker2 -o -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("k8s render: -f TOPOLOGY.yaml is required (its machines: are the parts)")
			}
			t, err := topo.Load(file)
			if err != nil {
				return err
			}
			if o.Lab == "" {
				o.Lab = defaultLabName(file)
			}
			o.Spread = k8s.Spread(spread)
			o.NodeFor = map[string]string{}
			for _, nf := range nodeFor {
				machine, node, ok := strings.Cut(nf, "=")
				if !ok || machine == "" || node == "" {
					return fmt.Errorf("k8s render: --node-for %q: want MACHINE=NODE", nf)
				}
				if prev, dup := o.NodeFor[machine]; dup {
					return fmt.Errorf("k8s render: --node-for %q: machine %q already on node %q", nf, machine, prev)
				}
				o.NodeFor[machine] = node
			}
			objs, err := k8s.Render(t, o)
			if err != nil {
				return err
			}
			doc, err := objs.YAML()
			if err != nil {
				return err
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(doc)
				return err
			}
			path := filepath.Join(out, o.Lab+".yaml")
			if err := os.WriteFile(path, doc, 0o600); err != nil {
				return fmt.Errorf("k8s render: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: kubectl apply -f %s starts lab %s, kubectl delete -f %s removes it\n", path, path, o.Lab, path)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology file (YAML) with machines")
	cmd.Flags().StringVar(&o.Lab, "name", "", "lab name, a DNS label (default: the topology file's base name)")
	cmd.Flags().StringVar(&o.Namespace, "namespace", "default", "Kubernetes namespace of the objects")
	cmd.Flags().StringVar(&o.Image, "image", "rocelab:latest", "container image with rocelab on its PATH (docs/kubernetes.md)")
	cmd.Flags().StringArrayVar(&nodeFor, "node-for", nil, "MACHINE=NODE: run MACHINE's part on the node of that kubernetes.io/hostname (repeatable)")
	cmd.Flags().StringVar(&spread, "spread", string(k8s.SpreadRequired), "required: never two parts on one node; preferred: avoid it when the cluster can")
	cmd.Flags().StringVarP(&out, "output", "o", "-", "directory to write LAB.yaml in, or - for standard output")
	return cmd
}
