// Package k8s renders the Kubernetes objects that run a lab split across machines
// (docs/kubernetes.md): a ConfigMap with the topology, a Secret with the lab secret, a
// headless Service by which the parts find each other, and one Pod per machine that runs
// that machine's part with `rocelab up --machine M --foreground`.
//
// It only writes objects; kubectl applies them. It imports fabric/topo and the typed
// Kubernetes API, nothing of the runtime.
package k8s

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/rocelab/rocelab/fabric/topo"
)

// The labels every object carries; the anti-affinity selects a lab's pods by LabLabel.
const (
	NameLabel    = "app.kubernetes.io/name"
	LabLabel     = "rocelab.dev/lab"
	MachineLabel = "rocelab.dev/machine"
	appName      = "rocelab"
)

// Where the part's container finds its inputs, and the runtime's ports.
const (
	TopologyDir  = "/etc/rocelab/topology"
	TopologyKey  = "topology.yaml"
	SecretDir    = "/etc/rocelab/secret"
	SecretKey    = "lab-secret"
	VXLANPort    = 4789
	ControlPort  = 4790
	HostnameNode = "kubernetes.io/hostname"
)

// Spread says how a lab's pods avoid sharing a node.
type Spread string

const (
	// SpreadRequired never schedules two parts of a lab on one node: each part gets
	// the CPUs of a node of its own, which is why a lab is split at all.
	SpreadRequired Spread = "required"
	// SpreadPreferred lets parts share a node when there are fewer nodes than parts
	// (a one-node test cluster).
	SpreadPreferred Spread = "preferred"
)

// Options are what the topology does not say.
type Options struct {
	Lab       string            // lab name: a DNS label; names the objects and the Service
	Namespace string            // the Kubernetes namespace; part of each part's DNS name
	Image     string            // an image with rocelab (and its bin/lib) on PATH
	NodeFor   map[string]string // machine → node name (kubernetes.io/hostname) to pin it to
	Spread    Spread            // default SpreadRequired
	// Secret is the lab secret's file content; nil draws 32 random bytes (hex).
	Secret []byte
}

// GracePeriod is how long the kubelet waits after SIGTERM before killing a part: time
// for the part's own teardown (rocelab down's work: each host's namespace and TAP) with
// room for large parts. Nothing the part makes outlives the pod's namespaces even if it
// is killed (docs/kubernetes.md), so the grace period buys an orderly stop, not cleanup.
const GracePeriod = 60

// Objects are a lab's objects in the order kubectl must create them: what the pods
// mount first, then the Service, then the pods.
type Objects struct {
	Secret    *corev1.Secret
	ConfigMap *corev1.ConfigMap
	Service   *corev1.Service
	Pods      []*corev1.Pod
}

// PodName is the name (and hostname) of machine's part.
func PodName(lab, machine string) string { return lab + "-" + machine }

// PartAddress is the stable DNS name of machine's part: the pod's hostname under the
// headless Service named after the lab. It ends in ".svc" so that it resolves whatever
// the cluster's domain (the pod's resolv.conf search list appends it).
func PartAddress(lab, namespace, machine string) string {
	return PodName(lab, machine) + "." + lab + "." + namespace + ".svc"
}

// Render builds the objects that run t as the lab o.Lab on a cluster.
func Render(t *topo.Topology, o Options) (*Objects, error) {
	if err := o.check(t); err != nil {
		return nil, err
	}
	secret := o.Secret
	if secret == nil {
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return nil, fmt.Errorf("k8s: lab secret: %w", err)
		}
		secret = []byte(hex.EncodeToString(key[:]))
	}

	// The ConfigMap's topology names each part by its DNS name, so that every part and
	// every rocelab command in a pod reaches the others by the same addresses.
	placed := *t
	placed.Machines = slices.Clone(t.Machines)
	for i := range placed.Machines {
		placed.Machines[i].Address = PartAddress(o.Lab, o.Namespace, placed.Machines[i].Name)
	}

	objs := &Objects{
		Secret: &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: o.meta(o.Lab+"-secret", ""),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{SecretKey: secret},
		},
		ConfigMap: &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: o.meta(o.Lab+"-topology", ""),
			Data:       map[string]string{TopologyKey: string(placed.YAML())},
		},
		Service: o.service(),
	}
	for _, m := range t.Machines {
		objs.Pods = append(objs.Pods, o.pod(t, m.Name))
	}
	return objs, nil
}

func (o *Options) check(t *topo.Topology) error {
	if len(t.Machines) == 0 {
		return fmt.Errorf("k8s: the topology places no node on a machine: give it machines (docs/multi-machine.md) to split it into parts")
	}
	if errs := validation.IsDNS1123Label(o.Lab); len(errs) > 0 {
		return fmt.Errorf("k8s: lab name %q: %s", o.Lab, errs[0])
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("k8s: namespace %q: %s", o.Namespace, errs[0])
	}
	if o.Image == "" {
		return fmt.Errorf("k8s: no image: name one that has rocelab on its PATH")
	}
	for _, m := range t.Machines {
		// The pod's hostname is a DNS label of its own.
		if errs := validation.IsDNS1123Label(PodName(o.Lab, m.Name)); len(errs) > 0 {
			return fmt.Errorf("k8s: pod name %q (lab %q, machine %q): %s: choose a shorter lab name", PodName(o.Lab, m.Name), o.Lab, m.Name, errs[0])
		}
	}
	for _, m := range slices.Sorted(maps.Keys(o.NodeFor)) {
		if !slices.ContainsFunc(t.Machines, func(x topo.Machine) bool { return x.Name == m }) {
			return fmt.Errorf("k8s: node for machine %q: the topology has no such machine", m)
		}
		if errs := validation.IsDNS1123Subdomain(o.NodeFor[m]); len(errs) > 0 {
			return fmt.Errorf("k8s: node for machine %q: node name %q: %s", m, o.NodeFor[m], errs[0])
		}
	}
	if o.Spread != SpreadPreferred {
		byNode := map[string]string{}
		for _, m := range slices.Sorted(maps.Keys(o.NodeFor)) {
			if prev, ok := byNode[o.NodeFor[m]]; ok {
				return fmt.Errorf("k8s: machines %q and %q both on node %q: a lab's parts never share a node unless spread is %q", prev, m, o.NodeFor[m], SpreadPreferred)
			}
			byNode[o.NodeFor[m]] = m
		}
	}
	switch o.Spread {
	case "":
		o.Spread = SpreadRequired
	case SpreadRequired, SpreadPreferred:
	default:
		return fmt.Errorf("k8s: spread %q: want %q or %q", o.Spread, SpreadRequired, SpreadPreferred)
	}
	return nil
}

func (o *Options) labels(machine string) map[string]string {
	l := map[string]string{NameLabel: appName, LabLabel: o.Lab}
	if machine != "" {
		l[MachineLabel] = machine
	}
	return l
}

func (o *Options) meta(name, machine string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: o.labels(machine)}
}

func (o *Options) ports() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "vxlan", Protocol: corev1.ProtocolUDP, Port: VXLANPort, TargetPort: intstr.FromInt32(VXLANPort)},
		{Name: "control", Protocol: corev1.ProtocolTCP, Port: ControlPort, TargetPort: intstr.FromInt32(ControlPort)},
	}
}

// service is headless (each part's own address, no virtual IP: VXLAN goes pod to pod)
// and publishes parts before they are ready: a part becomes ready only once its peers
// answer, so DNS records that waited for readiness would never appear.
func (o *Options) service() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: o.meta(o.Lab, ""),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 o.labels(""),
			Ports:                    o.ports(),
			PublishNotReadyAddresses: true,
		},
	}
}

// upArgs is the part's command line: the runtime's contract (docs/multi-machine.md).
func (o *Options) upArgs(t *topo.Topology, machine string) []string {
	args := []string{"up",
		"-f", TopologyDir + "/" + TopologyKey,
		"--name", o.Lab,
		"--machine", machine,
	}
	for _, m := range t.Machines {
		if m.Name != machine {
			args = append(args, "--peer", m.Name+"="+PartAddress(o.Lab, o.Namespace, m.Name))
		}
	}
	return append(args, "--secret-file", SecretDir+"/"+SecretKey, "--foreground")
}

func (o *Options) pod(t *topo.Topology, machine string) *corev1.Pod {
	name := PodName(o.Lab, machine)
	grace := int64(GracePeriod)
	root := int64(0)
	owner := int32(0o400)
	charDev := corev1.HostPathCharDev
	cp := o.ports()
	ports := make([]corev1.ContainerPort, len(cp))
	for i, p := range cp {
		ports[i] = corev1.ContainerPort{Name: p.Name, Protocol: p.Protocol, ContainerPort: p.Port}
	}
	spec := corev1.PodSpec{
		Hostname:  name,
		Subdomain: o.Lab,
		// A part that dies stays dead: its peers have seen its links go down, as a
		// pulled cable, and a part restarted into a running lab would rejoin QPs that
		// already failed. Deleting and applying the lab again restarts it whole.
		RestartPolicy:                 corev1.RestartPolicyNever,
		TerminationGracePeriodSeconds: &grace,
		Affinity:                      o.affinity(),
		Containers: []corev1.Container{{
			Name:    "part",
			Image:   o.Image,
			Command: []string{"rocelab"},
			Args:    o.upArgs(t, machine),
			Ports:   ports,
			SecurityContext: &corev1.SecurityContext{
				RunAsUser: &root,
				Capabilities: &corev1.Capabilities{
					// NET_ADMIN: TAPs, addresses, routes, the VXLAN socket's options;
					// SYS_ADMIN: the hosts' network and mount namespaces and their
					// views under /run; NET_RAW: ping and captures in the hosts
					// (some runtimes drop it by default).
					Add: []corev1.Capability{"NET_ADMIN", "SYS_ADMIN", "NET_RAW"},
				},
				// The runtimes' default AppArmor profile denies mount(2), which the
				// hosts' namespaces need; seccomp stays the runtime's default, which
				// allows mount, unshare and setns to a holder of CAP_SYS_ADMIN.
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
				SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"rocelab", "status", "--lab", o.Lab},
				}},
				PeriodSeconds: 2,
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "topology", MountPath: TopologyDir, ReadOnly: true},
				{Name: "secret", MountPath: SecretDir, ReadOnly: true},
				{Name: "tun", MountPath: "/dev/net/tun"},
				{Name: "run", MountPath: "/run"},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "topology", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: o.Lab + "-topology"},
			}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: o.Lab + "-secret", DefaultMode: &owner,
			}}},
			// The node's tun device: the container runtimes' default device rules
			// already allow it (c 10:200), so no device plugin is needed.
			{Name: "tun", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/dev/net/tun", Type: &charDev,
			}}},
			// The lab's state and the hosts' namespace mounts live in the pod, not on
			// the node: they go with it.
			{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory,
			}}},
		},
	}
	if node, ok := o.NodeFor[machine]; ok {
		spec.NodeSelector = map[string]string{HostnameNode: node}
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: o.meta(name, machine),
		Spec:       spec,
	}
}

// affinity keeps a lab's parts off each other's nodes.
func (o *Options) affinity() *corev1.Affinity {
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabLabel: o.Lab}},
		TopologyKey:   HostnameNode,
	}
	anti := &corev1.PodAntiAffinity{}
	if o.Spread == SpreadPreferred {
		anti.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}
	} else {
		anti.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{term}
	}
	return &corev1.Affinity{PodAntiAffinity: anti}
}

// All returns the objects in creation order.
func (objs *Objects) All() []any {
	all := []any{objs.Secret, objs.ConfigMap, objs.Service}
	for _, p := range objs.Pods {
		all = append(all, p)
	}
	return all
}

// YAML writes the objects as one multi-document YAML file, in creation order.
func (objs *Objects) YAML() ([]byte, error) {
	var b bytes.Buffer
	for i, obj := range objs.All() {
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("k8s: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(doc)
	}
	return b.Bytes(), nil
}
