package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUpwardImportFails runs the checker as `make lint` does, on a go list listing of a
// tiny module in which fabric imports lab, a layer above it.
func TestUpwardImportFails(t *testing.T) {
	var stderr bytes.Buffer
	status := run([]string{"-in", "testdata/upward.json"}, &stderr)
	if status != 1 {
		t.Fatalf("exit status %d, want 1; output:\n%s", status, &stderr)
	}
	want := "fabric -> lab: imports upward, layer 2 (rnic, fabric) -> layer 5 (lab, experiment)"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("output does not name the import %q:\n%s", want, &stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 2 {
		t.Fatalf("want exactly one violation (the other imports point down):\n%s", &stderr)
	}
}

// pkg is one package of a fixture module, importing imports (module-relative paths, or
// paths with a dot outside the module).
func pkg(path string, imports ...string) Package {
	return Package{ImportPath: mod(path), Module: &struct{ Path string }{"example.com/m"}, Imports: modAll(imports)}
}

func mod(path string) string {
	if strings.Contains(path, ".") { // outside the module
		return path
	}
	return "example.com/m/" + path
}

func modAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = mod(p)
	}
	return out
}

func messages(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.String())
	}
	return out
}

func TestRules(t *testing.T) {
	verbs := pkg("rnic/verbs", "rnic/ibv", "rnic/service/wire", "qp")
	verbs.Deps = modAll([]string{"rnic/ibv", "rnic/service/wire", "qp", "roce", "internal/clock"})
	base := []Package{
		pkg("roce"), pkg("hpcc"), pkg("internal/clock"), pkg("qp", "roce"), pkg("fabric/link", "internal/clock"),
		pkg("rnic/ibv", "roce"), pkg("rnic/service/wire", "rnic/ibv"),
		pkg("rnic", "qp", "fabric/link", "internal/clock", "rnic/ibv"), verbs, pkg("rnic/service", "rnic", "rnic/service/wire"),
		pkg("fabric", "fabric/link", "hpcc"), pkg("fabric/topo", "fabric/link"), pkg("netns", "rnic/service"),
		pkg("network", "fabric", "rnic"), pkg("lab", "network", "netns"), pkg("experiment", "network", "fabric/topo"),
		pkg("apps/apptest", "fabric", "rnic/service"),
		pkg("conformance", "roce"), pkg("tools/benchreport", "golang.org/x/sys/unix"),
	}
	for _, tc := range []struct {
		name string
		add  Package
		want string // the one violation, "" for none
	}{
		{"downward imports pass", pkg("cmd/rocelab", "lab", "experiment", "conformance", "golang.org/x/sys/unix"), ""},
		{"upward", pkg("qp/x", "rnic"), "qp/x -> rnic: imports upward, layer 1 (qp, fabric/link) -> layer 2 (rnic, fabric)"},
		{"upward from a top-level package", pkg("roce/telemetry/x", "fabric/link"), "roce/telemetry/x -> fabric/link: imports upward"},
		{"rnic imports fabric/link", pkg("rnic/y", "fabric/link"), ""},
		{"rnic imports fabric", pkg("rnic/y", "fabric/topo"), "rnic/y -> fabric/topo: the NIC and the switch are peers"},
		{"fabric imports rnic", pkg("fabric/z", "rnic"), "fabric/z -> rnic: the NIC and the switch are peers"},
		{"roce/telemetry imports hpcc", pkg("roce/telemetry", "hpcc", "roce"), ""},
		{"roce imports hpcc", pkg("roce/decode", "hpcc"), "roce/decode -> hpcc: roce imports hpcc only in roce/telemetry"},
		{"hpcc imports roce", pkg("hpcc/replay", "roce"), "hpcc/replay -> roce: hpcc is pure"},
		{"apps import the verbs and what it imports", pkg("apps/perftest", "rnic/verbs", "rnic/ibv", "qp", "apps/getopt"), ""},
		{"apps import the device", pkg("apps/perftest", "rnic/verbs", "rnic"), "apps/perftest -> rnic: the sample apps import only rnic/verbs, rnic/ibv"},
		{"the verbs client imports the device", pkg("rnic/verbs/x", "rnic"), "rnic/verbs/x -> rnic: the verbs client links no device"},
		{"the service's protocol imports the service", pkg("rnic/service/wire", "rnic/service"), "rnic/service/wire -> rnic/service: the service's protocol links no device"},
		{"apps import netns", pkg("apps/perftest", "rnic/verbs", "netns"), "apps/perftest -> netns: the sample apps import only rnic/verbs, rnic/ibv"},
		{"apps import the switch", pkg("apps/device", "fabric"), "apps/device -> fabric: the sample apps import only"},
		{"a test helper in production code", pkg("conformance/interop", "apps/apptest"), "conformance/interop -> apps/apptest: a test helper is imported only by tests"},
		{"a package without a layer", pkg("misc/util"), "misc/util -> : this package has no layer"},
		{"network imports netns", pkg("network/x", "netns"), "network/x -> netns: imports upward, layer 3 (network) -> layer 4 (netns, k8s)"},
		{"experiment imports the lab runtime", pkg("experiment/x", "lab"), "experiment/x -> lab: virtual time needs no kernel"},
		{"experiment imports netns", pkg("experiment/y", "netns"), "experiment/y -> netns: virtual time needs no kernel"},
		{"the lab imports experiment", pkg("lab/web", "experiment"), "lab/web -> experiment: the lab runtime and the virtual-time studies are peers"},
		{"the web view reads both", pkg("web", "lab", "experiment"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := messages(check(append(base[:len(base):len(base)], tc.add)))
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("want no violation, got %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Fatalf("got %q, want one violation starting %q", got, tc.want)
			}
		})
	}
}

func TestSampleAppLinks(t *testing.T) {
	perftest := pkg("apps/perftest", "rnic/verbs")
	perftest.Deps = []string{mod("rnic/verbs"), mod("roce"), "github.com/gopacket/gopacket", "github.com/gopacket/gopacket/layers"}
	app := pkg("cmd/write_bw", "apps/perftest")
	app.Deps = append([]string{mod("apps/perftest")}, perftest.Deps...)
	rocelab := pkg("cmd/rocelab", "apps/perftest")
	rocelab.Deps = append(app.Deps, "go.uber.org/zap") // the CLI may link anything
	got := messages(check([]Package{pkg("roce"), pkg("rnic/verbs", "roce"), perftest, app, rocelab}))
	want := "cmd/write_bw -> github.com/gopacket/gopacket: a sample app links github.com/gopacket/gopacket (through apps/perftest)"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want [%q]", got, want)
	}
}
