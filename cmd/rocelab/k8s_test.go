package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/k8s"
)

// renderedPods runs rocelab k8s render on the two-machine topology and reads back, with
// strict decoding, its pods and the topology its ConfigMap holds.
func renderedPods(t *testing.T, args ...string) ([]corev1.Pod, *topo.Topology) {
	t.Helper()
	out := execute(t, newK8sRenderCmd(), "", append([]string{"-f", "../../topologies/two-machines.yaml"}, args...)...)
	var pods []corev1.Pod
	var tp *topo.Topology
	for _, doc := range strings.Split(out, "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatal(err)
		}
		switch tm.Kind {
		case "Pod":
			var p corev1.Pod
			if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
				t.Fatal(err)
			}
			pods = append(pods, p)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			var err error
			if tp, err = topo.Parse([]byte(cm.Data[k8s.TopologyKey])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(pods) != 2 || tp == nil {
		t.Fatalf("%d pods, topology %v: want two pods and a topology", len(pods), tp != nil)
	}
	return pods, tp
}

// parseAgainst finds the command a rendered command line names in rocelab's real
// command tree and parses its flags with that command's flag set (on a fresh copy, so
// the tree keeps its defaults): a flag or argument the runtime does not accept fails.
func parseAgainst(t *testing.T, pod string, argv []string, fresh func() *cobra.Command) *cobra.Command {
	t.Helper()
	if len(argv) == 0 || argv[0] != "rocelab" {
		t.Fatalf("pod %s: command %q does not run rocelab", pod, argv)
	}
	found, _, err := rootCmd.Find(argv[1:])
	if err != nil {
		t.Fatalf("pod %s: %q: %v", pod, argv, err)
	}
	cmd := fresh()
	if found.Name() != cmd.Name() {
		t.Fatalf("pod %s: %q runs rocelab %s, want %s", pod, argv, found.Name(), cmd.Name())
	}
	if err := cmd.ParseFlags(argv[2:]); err != nil {
		t.Fatalf("pod %s: %q: rocelab %s rejects it: %v", pod, argv, cmd.Name(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Fatalf("pod %s: %q: %v", pod, argv, err)
	}
	return cmd
}

// TestK8sPodsRunRealUp checks each rendered pod's command line against rocelab up's
// own flag set, the way the multi-machine tests start parts: --machine, --peer and
// --secret-file are the runtime's (docs/multi-machine.md), so this fails on a tree
// whose rocelab up lacks them.
func TestK8sPodsRunRealUp(t *testing.T) {
	pods, tp := renderedPods(t, "--name", "demo", "--namespace", "rdma", "--node-for", "a=worker1")
	machines := map[string]string{}
	for _, m := range tp.Machines {
		machines[m.Name] = m.Address
	}
	for _, pod := range pods {
		c := pod.Spec.Containers[0]
		if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
			t.Errorf("pod %s: env %v %v: the part is configured by its flags only", pod.Name, c.Env, c.EnvFrom)
		}
		up := parseAgainst(t, pod.Name, append(slices.Clone(c.Command), c.Args...), newUpCmd)
		fl := up.Flags()
		get := func(name string) string {
			v, err := fl.GetString(name)
			if err != nil {
				t.Fatalf("pod %s: rocelab up --%s: %v", pod.Name, name, err)
			}
			return v
		}
		machine := pod.Labels[k8s.MachineLabel]
		if get("name") != "demo" || get("machine") != machine {
			t.Errorf("pod %s: --name %q --machine %q, want demo and %q", pod.Name, get("name"), get("machine"), machine)
		}
		if fg, err := fl.GetBool("foreground"); err != nil || !fg {
			t.Errorf("pod %s: not --foreground (%v): the pod's process must be the part", pod.Name, err)
		}
		mounted := func(path string) bool {
			return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Dir(path) == m.MountPath })
		}
		if f := get("file"); !mounted(f) || !mounted(get("secret-file")) {
			t.Errorf("pod %s: -f %s or --secret-file %s is not in a mounted volume", pod.Name, f, get("secret-file"))
		}
		// Every other machine is a peer, at the address the ConfigMap gives it.
		peerMap, err := fl.GetStringToString("peer")
		if err != nil {
			t.Fatalf("pod %s: rocelab up --peer: %v", pod.Name, err)
		}
		var peers []string
		for name, addr := range peerMap {
			peers = append(peers, name+"="+addr)
		}
		var want []string
		for name, addr := range machines {
			if name != machine {
				want = append(want, name+"="+addr)
			}
		}
		slices.Sort(peers)
		slices.Sort(want)
		if !slices.Equal(peers, want) {
			t.Errorf("pod %s: peers %q, want %q", pod.Name, peers, want)
		}

		// The readiness probe is a real rocelab status command line too.
		probe := parseAgainst(t, pod.Name, c.ReadinessProbe.Exec.Command, newStatusCmd)
		if lab, _ := probe.Flags().GetString("lab"); lab != "demo" {
			t.Errorf("pod %s: readiness probe asks for lab %q", pod.Name, lab)
		}
	}
	if pods[0].Spec.NodeSelector["kubernetes.io/hostname"] != "worker1" || pods[1].Spec.NodeSelector != nil {
		t.Errorf("--node-for a=worker1: node selectors %v and %v", pods[0].Spec.NodeSelector, pods[1].Spec.NodeSelector)
	}
}

func TestK8sRenderToDirectory(t *testing.T) {
	dir := t.TempDir()
	out := execute(t, newK8sRenderCmd(), "", "-f", "../../topologies/two-machines.yaml", "-o", dir)
	path := filepath.Join(dir, "two-machines.yaml")
	if !strings.Contains(out, "kubectl apply -f "+path) {
		t.Errorf("output %q does not say how to apply %s", out, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v: it holds the lab secret, want 0600", path, fi.Mode().Perm())
	}
	doc, _ := os.ReadFile(path)
	if !bytes.Contains(doc, []byte("name: two-machines-a\n")) {
		t.Errorf("%s: no pod two-machines-a (the lab is named after the file)", path)
	}
}

func TestK8sRenderUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-f TOPOLOGY.yaml is required"},
		{[]string{"-f", "../../topologies/two-machines.yaml", "--node-for", "a"}, "want MACHINE=NODE"},
		{[]string{"-f", "../../topologies/two-machines.yaml", "--node-for", "a=n1", "--node-for", "a=n2"}, `machine "a" already on node "n1"`},
		{[]string{"-f", "../../topologies/two-hosts.yaml"}, "places no node on a machine"},
		{[]string{"-f", "../../topologies/two-machines.yaml", "--name", "UPPER"}, `lab name "UPPER"`},
	} {
		cmd := newK8sRenderCmd()
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}
