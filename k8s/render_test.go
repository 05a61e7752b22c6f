package k8s

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rocelab/rocelab/fabric/topo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const twoMachines = "../topologies/two-machines.yaml"

func testOptions() Options {
	return Options{Lab: "demo", Namespace: "rdma", Image: "rocelab:test", Secret: []byte("0123456789abcdef")}
}

// decoded is the rendered file read back the way the API server would: every document
// strictly into its typed object, so an unknown or misspelt field fails.
type decoded struct {
	secrets    []corev1.Secret
	configMaps []corev1.ConfigMap
	services   []corev1.Service
	pods       []corev1.Pod
}

func decodeStrict(t *testing.T, doc []byte) decoded {
	t.Helper()
	var d decoded
	for i, part := range bytes.Split(doc, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(part, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if tm.APIVersion != "v1" {
			t.Fatalf("document %d: apiVersion %q, want v1", i, tm.APIVersion)
		}
		var err error
		switch tm.Kind {
		case "Secret":
			var o corev1.Secret
			err = yaml.UnmarshalStrict(part, &o)
			d.secrets = append(d.secrets, o)
		case "ConfigMap":
			var o corev1.ConfigMap
			err = yaml.UnmarshalStrict(part, &o)
			d.configMaps = append(d.configMaps, o)
		case "Service":
			var o corev1.Service
			err = yaml.UnmarshalStrict(part, &o)
			d.services = append(d.services, o)
		case "Pod":
			var o corev1.Pod
			err = yaml.UnmarshalStrict(part, &o)
			d.pods = append(d.pods, o)
		default:
			t.Fatalf("document %d: unexpected kind %q", i, tm.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s): strict decoding: %v", i, tm.Kind, err)
		}
	}
	return d
}

func TestStrictDecodingCatchesUnknownFields(t *testing.T) {
	// The check below is only worth something if strict decoding does reject.
	var p corev1.Pod
	if err := yaml.UnmarshalStrict([]byte("kind: Pod\nspec:\n  hostnam: x\n"), &p); err == nil {
		t.Fatal("a misspelt field decoded without error")
	}
}

func TestRenderTwoMachines(t *testing.T) {
	tp, err := topo.Load(twoMachines)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(tp, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := objs.YAML()
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/two-machines.yaml"
	if *update {
		if err := os.WriteFile(golden, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestRenderTwoMachines -update ./k8s/ writes it)", err)
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("rendering differs from %s (rerun with -update if the change is meant)", golden)
	}

	d := decodeStrict(t, doc)
	if len(d.secrets) != 1 || len(d.configMaps) != 1 || len(d.services) != 1 {
		t.Fatalf("%d secrets, %d config maps, %d services: want one of each", len(d.secrets), len(d.configMaps), len(d.services))
	}
	for _, m := range []metav1.ObjectMeta{d.secrets[0].ObjectMeta, d.configMaps[0].ObjectMeta, d.services[0].ObjectMeta} {
		if m.Namespace != "rdma" || m.Labels[NameLabel] != "rocelab" || m.Labels[LabLabel] != "demo" {
			t.Errorf("%s: namespace %q labels %v", m.Name, m.Namespace, m.Labels)
		}
	}

	// The ConfigMap's topology is the same lab, each machine reached at its part's name.
	cm := d.configMaps[0]
	inCM, err := topo.Parse([]byte(cm.Data[TopologyKey]))
	if err != nil {
		t.Fatalf("the ConfigMap's topology: %v", err)
	}
	if !reflect.DeepEqual(inCM.Placement(), tp.Placement()) {
		t.Errorf("placement in the ConfigMap %v, want %v", inCM.Placement(), tp.Placement())
	}
	if !slices.Equal(inCM.Tunnels(), tp.Tunnels()) {
		t.Errorf("tunnels in the ConfigMap %v, want %v", inCM.Tunnels(), tp.Tunnels())
	}
	for _, m := range inCM.Machines {
		if want := m.Name + "." + "demo" + ".rdma.svc"; m.Address != "demo-"+want {
			t.Errorf("machine %s: address %q, want %q", m.Name, m.Address, "demo-"+want)
		}
	}

	svc := d.services[0]
	if svc.Name != "demo" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s: clusterIP %q publishNotReadyAddresses %v: want headless, publishing parts not yet ready", svc.Name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	ports := map[corev1.Protocol]int32{}
	for _, p := range svc.Spec.Ports {
		ports[p.Protocol] = p.Port
	}
	if ports[corev1.ProtocolUDP] != 4789 || ports[corev1.ProtocolTCP] != 4790 || len(svc.Spec.Ports) != 2 {
		t.Errorf("service ports %+v: want 4789/UDP and 4790/TCP", svc.Spec.Ports)
	}

	secret := d.secrets[0]
	if string(secret.Data[SecretKey]) != "0123456789abcdef" {
		t.Errorf("secret data %q", secret.Data)
	}

	if len(d.pods) != len(tp.Machines) {
		t.Fatalf("%d pods for %d machines", len(d.pods), len(tp.Machines))
	}
	for i, pod := range d.pods {
		machine := tp.Machines[i].Name
		checkPod(t, pod, machine, cm.Name, secret.Name)
		if !labelsSelect(svc.Spec.Selector, pod.Labels) {
			t.Errorf("pod %s: labels %v not selected by the service's %v", pod.Name, pod.Labels, svc.Spec.Selector)
		}
	}
}

func labelsSelect(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func checkPod(t *testing.T, pod corev1.Pod, machine, configMap, secret string) {
	t.Helper()
	if pod.Name != "demo-"+machine || pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != "demo" {
		t.Errorf("pod %s: hostname %q subdomain %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels[MachineLabel] != machine || pod.Labels[LabLabel] != "demo" || pod.Labels[NameLabel] != "rocelab" {
		t.Errorf("pod %s: labels %v", pod.Name, pod.Labels)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("pod %s: termination grace period %v: want time for the part's teardown", pod.Name, g)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("pod %s: %d containers", pod.Name, len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "--machine "+machine+" ") || !strings.HasSuffix(args, "--foreground") {
		t.Errorf("pod %s: args %q do not run machine %s in the foreground", pod.Name, args, machine)
	}

	caps := c.SecurityContext.Capabilities.Add
	for _, want := range []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"} {
		if !slices.Contains(caps, want) {
			t.Errorf("pod %s: capabilities %v lack %s", pod.Name, caps, want)
		}
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || strings.Join(c.ReadinessProbe.Exec.Command, " ") != "rocelab status --lab demo" {
		t.Errorf("pod %s: readiness probe %+v", pod.Name, c.ReadinessProbe)
	}

	// Every file the command names is mounted from the volume that should hold it.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	flagValue := func(name string) string {
		i := slices.Index(c.Args, name)
		if i < 0 || i+1 >= len(c.Args) {
			t.Fatalf("pod %s: args %q lack %s", pod.Name, c.Args, name)
		}
		return c.Args[i+1]
	}
	if v := vols["secret"]; v.Secret == nil || v.Secret.SecretName != secret || flagValue("--secret-file") != mounts["secret"]+"/"+SecretKey {
		t.Errorf("pod %s: --secret-file %s is not the secret %s mounted at %s", pod.Name, flagValue("--secret-file"), secret, mounts["secret"])
	}
	if v := vols["topology"]; v.ConfigMap == nil || v.ConfigMap.Name != configMap || flagValue("-f") != mounts["topology"]+"/"+TopologyKey {
		t.Errorf("pod %s: -f %s is not the config map %s mounted at %s", pod.Name, flagValue("-f"), configMap, mounts["topology"])
	}
	if v := vols["tun"]; v.HostPath == nil || v.HostPath.Path != "/dev/net/tun" || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathCharDev || mounts["tun"] != "/dev/net/tun" {
		t.Errorf("pod %s: /dev/net/tun volume %+v mounted at %q", pod.Name, v.HostPath, mounts["tun"])
	}
	if v := vols["run"]; v.EmptyDir == nil || mounts["run"] != "/run" {
		t.Errorf("pod %s: /run is not a writable volume of the pod's own", pod.Name)
	}

	anti := pod.Spec.Affinity.PodAntiAffinity
	if len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("pod %s: anti-affinity %+v", pod.Name, anti)
	}
	term := anti.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != HostnameNode || term.LabelSelector.MatchLabels[LabLabel] != "demo" || !labelsSelect(term.LabelSelector.MatchLabels, pod.Labels) {
		t.Errorf("pod %s: anti-affinity term %+v does not keep the lab's pods on distinct nodes", pod.Name, term)
	}
}

func TestRenderPlacementOptions(t *testing.T) {
	tp, err := topo.Load(twoMachines)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.NodeFor = map[string]string{"b": "worker2"}
	o.Spread = SpreadPreferred
	objs, err := Render(tp, o)
	if err != nil {
		t.Fatal(err)
	}
	a, b := objs.Pods[0], objs.Pods[1]
	if a.Spec.NodeSelector != nil || b.Spec.NodeSelector[HostnameNode] != "worker2" {
		t.Errorf("node selectors %v, %v: want only b on worker2", a.Spec.NodeSelector, b.Spec.NodeSelector)
	}
	anti := b.Spec.Affinity.PodAntiAffinity
	if len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(anti.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("spread preferred: anti-affinity %+v", anti)
	}

	// Without a given secret, each rendering draws its own.
	o = testOptions()
	o.Secret = nil
	s1, err := Render(tp, o)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Render(tp, o)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := s1.Secret.Data[SecretKey], s2.Secret.Data[SecretKey]
	if len(k1) != 64 || bytes.Equal(k1, k2) {
		t.Errorf("random secrets %q and %q: want two distinct 32-byte hex keys", k1, k2)
	}
}

func TestRenderErrors(t *testing.T) {
	tp, err := topo.Load(twoMachines)
	if err != nil {
		t.Fatal(err)
	}
	single, err := topo.Parse([]byte("hosts:\n  - {name: h1, ipv4: 10.0.0.1}\n  - {name: h2, ipv4: 10.0.0.2}\nswitches:\n  - {name: s1}\nlinks:\n  - {endpoints: [h1, s1], rate: 10G}\n  - {endpoints: [h2, s1], rate: 10G}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    *topo.Topology
		edit func(*Options)
		want string
	}{
		{"no machines", single, func(*Options) {}, "places no node on a machine"},
		{"lab not a label", tp, func(o *Options) { o.Lab = "Demo_1" }, `lab name "Demo_1"`},
		{"pod name too long", tp, func(o *Options) { o.Lab = strings.Repeat("x", 62) }, "choose a shorter lab name"},
		{"namespace", tp, func(o *Options) { o.Namespace = "" }, `namespace ""`},
		{"no image", tp, func(o *Options) { o.Image = "" }, "no image"},
		{"unknown machine", tp, func(o *Options) { o.NodeFor = map[string]string{"c": "n1"} }, `machine "c": the topology has no such machine`},
		{"bad node", tp, func(o *Options) { o.NodeFor = map[string]string{"a": "Node 1"} }, `node name "Node 1"`},
		{"shared node", tp, func(o *Options) { o.NodeFor = map[string]string{"a": "n1", "b": "n1"} }, `both on node "n1"`},
		{"spread", tp, func(o *Options) { o.Spread = "sometimes" }, `spread "sometimes"`},
	} {
		o := testOptions()
		c.edit(&o)
		_, err := Render(c.t, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
