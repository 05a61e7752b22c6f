// Command importcheck fails when a package of the module imports against the layering
// docs/architecture.md describes ("Layers and import rules"). `make lint` runs it:
//
//	go run ./tools/importcheck
//
// It reads `go list -json ./...` (run in the current directory, or the file -in names)
// and prints one line per offending import, "importer -> imported: rule", then exits 1.
// The rules are the tables below; a package the tables do not place is itself an error,
// so a new top-level folder must be given its layer here and in the document.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// layers lists the module's folders from the lowest layer up. A package belongs to the
// layer of the longest folder it lies in (fabric/link is in layer 1, fabric/topo in 2).
// No package imports one in a higher layer.
var layers = [][]string{
	{"roce", "hpcc", "internal/clock", "wireshark"}, // wire formats, CC algorithms, the clock; wireshark is a leaf (embedded Lua)
	{"qp", "fabric/link"},                           // transport engines, links
	{"rnic", "fabric"},                              // the NIC and the switch: peers
	{"network"},                                     // a topology built into nodes on a clock, no kernel
	{"netns", "k8s"},                                // namespaces and TAPs; the Kubernetes objects that run a lab's parts
	{"lab", "experiment"},                           // the lab runtime, virtual-time studies
	{"web"},                                         // the web view: a live lab's or a finished run's
	{"apps"},                                        // the sample apps' code
	{"conformance"},                                 // conformance and interop suites
	{"cmd", "tools"},                                // mains
}

// peers are folder pairs that must not import each other's way, though the layers allow
// it; peerExceptions are the imports they let through.
var peers = []struct{ importer, imported, why string }{
	{"rnic", "fabric", "the NIC and the switch are peers: rnic imports only fabric/link of fabric"},
	{"fabric", "rnic", "the NIC and the switch are peers: fabric never imports rnic"},
	{"roce", "hpcc", "roce imports hpcc only in roce/telemetry, for the hop record"},
	{"hpcc", "roce", "hpcc is pure congestion control and never imports roce"},
	{"k8s", "netns", "k8s only writes objects from a topology: it never touches namespaces"},
	{"netns", "k8s", "the runtime never reads Kubernetes objects: the pods run plain rocelab up"},
	{"experiment", "lab", "virtual time needs no kernel: experiment builds networks with network, not the lab runtime"},
	{"experiment", "netns", "virtual time needs no kernel: experiment never touches namespaces"},
	{"lab", "experiment", "the lab runtime and the virtual-time studies are peers: what reads both (web, cmd) sits above them"},
	{"rnic/verbs", "rnic", "the verbs client links no device: it shares only rnic/ibv and rnic/service/wire with it"},
	{"rnic/service/wire", "rnic", "the service's protocol links no device: it shares only rnic/ibv with it"},
	{"rnic/ibv", "rnic", "rnic/ibv is the leaf the device and its clients share"},
}

var peerExceptions = []struct{ importer, imported string }{
	{"rnic", "fabric/link"},    // a NIC port is a link endpoint
	{"roce/telemetry", "hpcc"}, // the telemetry codecs carry hpcc.Hop
	{"rnic/verbs", "rnic/ibv"}, // the client: the verbs API's types
	{"rnic/verbs", "rnic/service/wire"},
	{"rnic/service/wire", "rnic/ibv"},
}

// appsAPI is what the sample apps program against: the verbs client and the API types
// it shares with the device. Packages under apps/ (test helpers
// excepted) import only apps/..., these, and what these import.
var appsAPI = []string{"rnic/verbs", "rnic/ibv"}

// testHelpers are imported only by tests (go list's Imports leaves test imports out).
var testHelpers = []string{"apps/apptest", "lab/labtest", "lab/tuntest"}

// sampleApps are the binaries users run against the verbs service; they stay small and
// must not link these modules (the data path and the apps need none of them).
var (
	sampleApps = []string{
		"cmd/rc_pingpong", "cmd/uc_pingpong", "cmd/ud_pingpong", "cmd/srq_pingpong",
		"cmd/write_bw", "cmd/read_bw", "cmd/send_bw", "cmd/atomic_bw",
		"cmd/write_lat", "cmd/read_lat", "cmd/send_lat", "cmd/cmatose",
	}
	notInSampleApps = []string{
		"github.com/gopacket/gopacket", "github.com/vishvananda/netlink",
		"github.com/vishvananda/netns", "go.uber.org/zap",
	}
)

// Package is the part of `go list -json` output the rules read.
type Package struct {
	ImportPath string
	Module     *struct{ Path string }
	Imports    []string
	Deps       []string
}

// Violation is one import against one rule.
type Violation struct {
	Importer, Imported, Rule string
}

// String returns the line importcheck prints: "importer -> imported: rule".
func (v Violation) String() string {
	return fmt.Sprintf("%s -> %s: %s", v.Importer, v.Imported, v.Rule)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run checks the listing and returns the exit status: 0 clean, 1 violations, 2 no
// listing.
func run(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("importcheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	in := flags.String("in", "", "read `go list -json` output from this file instead of running go list ./...")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	listing, err := readListing(*in)
	if err != nil {
		fmt.Fprintln(stderr, "importcheck:", err)
		return 2
	}
	pkgs, err := decode(bytes.NewReader(listing))
	if err != nil {
		fmt.Fprintln(stderr, "importcheck:", err)
		return 2
	}
	violations := check(pkgs)
	for _, v := range violations {
		fmt.Fprintln(stderr, v)
	}
	if len(violations) > 0 {
		fmt.Fprintf(stderr, "importcheck: %d import(s) against the layering of docs/architecture.md\n", len(violations))
		return 1
	}
	return 0
}

func readListing(file string) ([]byte, error) {
	if file != "" {
		return os.ReadFile(file)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	return out, nil
}

// decode reads the stream of JSON objects `go list -json` prints.
func decode(r io.Reader) ([]Package, error) {
	var pkgs []Package
	dec := json.NewDecoder(r)
	for {
		var p Package
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// check applies every rule to the module's packages; the module is the one the listed
// packages belong to.
func check(pkgs []Package) []Violation {
	if len(pkgs) == 0 || pkgs[0].Module == nil {
		return []Violation{{Rule: "go list listed no package of a module"}}
	}
	mod := pkgs[0].Module.Path
	rel := func(path string) (string, bool) {
		if path == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(path, mod+"/")
		return r, ok
	}
	byPath := map[string]Package{}
	for _, p := range pkgs {
		if r, ok := rel(p.ImportPath); ok {
			byPath[r] = p
		}
	}
	allowedInApps := appsAllowed(byPath, rel)

	var vs []Violation
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fromLayer := layerOf(from)
		if fromLayer < 0 {
			vs = append(vs, Violation{from, "", "this package has no layer: give its folder one in tools/importcheck and docs/architecture.md"})
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			toLayer := layerOf(to)
			switch {
			case toLayer > fromLayer:
				vs = append(vs, Violation{from, to, fmt.Sprintf("imports upward, layer %d (%s) -> layer %d (%s)",
					fromLayer, strings.Join(layers[fromLayer], ", "), toLayer, strings.Join(layers[toLayer], ", "))})
			case slices.Contains(testHelpers, to):
				vs = append(vs, Violation{from, to, "a test helper is imported only by tests"})
			}
			if why := peerRule(from, to); why != "" {
				vs = append(vs, Violation{from, to, why})
			}
			if within(from, "apps") && !slices.Contains(testHelpers, from) && !within(to, "apps") && !allowedInApps[to] {
				vs = append(vs, Violation{from, to, "the sample apps import only rnic/verbs, rnic/ibv and what those import"})
			}
		}
		if slices.Contains(sampleApps, from) {
			for _, banned := range notInSampleApps {
				if i := slices.IndexFunc(p.Deps, func(dep string) bool { return within(dep, banned) }); i >= 0 {
					dep := p.Deps[i]
					vs = append(vs, Violation{from, dep, "a sample app links " + banned + " (through " + linkedThrough(p, dep, byPath, rel) + ")"})
				}
			}
		}
	}
	return vs
}

// within reports whether path is folder or lies under it.
func within(path, folder string) bool {
	return path == folder || strings.HasPrefix(path, folder+"/")
}

// layerOf returns the layer of a module-relative package path, -1 when none places it.
func layerOf(path string) int {
	layer, longest := -1, -1
	for i, folders := range layers {
		for _, f := range folders {
			if within(path, f) && len(f) > longest {
				layer, longest = i, len(f)
			}
		}
	}
	return layer
}

// peerRule returns why from may not import to, or "".
func peerRule(from, to string) string {
	for _, ex := range peerExceptions {
		if within(from, ex.importer) && within(to, ex.imported) {
			return ""
		}
	}
	for _, r := range peers {
		if within(from, r.importer) && within(to, r.imported) {
			return r.why
		}
	}
	return ""
}

// appsAllowed is appsAPI and every module package it imports, directly or not.
func appsAllowed(byPath map[string]Package, rel func(string) (string, bool)) map[string]bool {
	allowed := map[string]bool{}
	for _, api := range appsAPI {
		allowed[api] = true
		for _, dep := range byPath[api].Deps {
			if r, ok := rel(dep); ok {
				allowed[r] = true
			}
		}
	}
	return allowed
}

// linkedThrough names the module package p imports directly that brings dep in, so the
// message points at the import to remove.
func linkedThrough(p Package, dep string, byPath map[string]Package, rel func(string) (string, bool)) string {
	for _, imp := range p.Imports {
		if imp == dep {
			return "a direct import"
		}
		if r, ok := rel(imp); ok && slices.Contains(byPath[r].Deps, dep) {
			return r
		}
	}
	return "an import outside the module"
}
