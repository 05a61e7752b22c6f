package topo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Load reads and validates the topology file at path; errors start with the path and
// name the line.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse decodes and validates a topology from YAML.
func Parse(data []byte) (*Topology, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errorf(0, "empty topology")
		}
		return nil, err // yaml's syntax errors already name the line
	}
	if len(doc.Content) != 1 {
		return nil, errorf(doc.Line, "empty topology")
	}
	t := &Topology{Telemetry: "none", CongestionControl: "none", HPCCMode: "probe", Retry: "ibta"}
	err := mapping(doc.Content[0], "topology", map[string]func(*yaml.Node) error{
		"telemetry": func(n *yaml.Node) error {
			return oneOf(n, &t.Telemetry, "telemetry format", TelemetryFormats)
		},
		"congestion_control": func(n *yaml.Node) error {
			return oneOf(n, &t.CongestionControl, "congestion control", CongestionControls)
		},
		"hpcc_mode": func(n *yaml.Node) error {
			return oneOf(n, &t.HPCCMode, "HPCC mode", HPCCModes)
		},
		"retry": func(n *yaml.Node) error {
			return oneOf(n, &t.Retry, "retry reading", RetryReadings)
		},
		"machines": func(n *yaml.Node) error {
			return sequence(n, "machines", func(n *yaml.Node) error {
				m := Machine{Line: n.Line}
				err := mapping(n, "machine", map[string]func(*yaml.Node) error{
					"name":    value(&m.Name, str),
					"address": value(&m.Address, str),
				})
				t.Machines = append(t.Machines, m)
				return err
			})
		},
		"hosts": func(n *yaml.Node) error {
			return sequence(n, "hosts", func(n *yaml.Node) error {
				h, err := parseHost(n)
				t.Hosts = append(t.Hosts, h)
				return err
			})
		},
		"switches": func(n *yaml.Node) error {
			return sequence(n, "switches", func(n *yaml.Node) error {
				s, err := parseSwitch(n)
				t.Switches = append(t.Switches, s)
				return err
			})
		},
		"links": func(n *yaml.Node) error {
			return sequence(n, "links", func(n *yaml.Node) error {
				l, err := parseLink(n)
				t.Links = append(t.Links, l)
				return err
			})
		},
	})
	if err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// mapping calls the handler of each key of n and rejects unknown keys.
func mapping(n *yaml.Node, what string, handlers map[string]func(*yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return errorf(n.Line, "%s: want a mapping", what)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		h, ok := handlers[k.Value]
		if !ok {
			known := make([]string, 0, len(handlers))
			for name := range handlers {
				known = append(known, name)
			}
			slices.Sort(known)
			return errorf(k.Line, "%s: unknown field %q (known: %v)", what, k.Value, known)
		}
		if seen[k.Value] {
			return errorf(k.Line, "%s: %q given twice", what, k.Value)
		}
		seen[k.Value] = true
		if err := h(v); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return err
			}
			return errorf(v.Line, "%s.%s: %v", what, k.Value, err)
		}
	}
	return nil
}

func sequence(n *yaml.Node, what string, each func(*yaml.Node) error) error {
	if n.Kind != yaml.SequenceNode {
		return errorf(n.Line, "%s: want a list", what)
	}
	for _, item := range n.Content {
		if err := each(item); err != nil {
			return err
		}
	}
	return nil
}

func scalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", errors.New("want a single value")
	}
	return n.Value, nil
}

func oneOf(n *yaml.Node, dst *string, what string, allowed []string) error {
	v, err := scalar(n)
	if err != nil {
		return err
	}
	if !slices.Contains(allowed, v) {
		return errorf(n.Line, "unknown %s %q (want one of %v)", what, v, allowed)
	}
	*dst = v
	return nil
}

// value returns a handler that parses a scalar with parse into dst.
func value[T any](dst *T, parse func(string) (T, error)) func(*yaml.Node) error {
	return func(n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		v, err := parse(s)
		if err != nil {
			return err
		}
		*dst = v
		return nil
	}
}

func str(s string) (string, error) { return s, nil }

func prob(s string) (float64, error) {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || !(p >= 0 && p <= 1) { // NaN fails both

		return 0, fmt.Errorf("probability %q: want a number in [0, 1]", s)
	}
	return p, nil
}

func parseHost(n *yaml.Node) (Host, error) {
	h := Host{Line: n.Line}
	err := mapping(n, "host", map[string]func(*yaml.Node) error{
		"name": value(&h.Name, str),
		"ipv4": value(&h.IPv4, func(s string) (netip.Addr, error) {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() {
				return a, fmt.Errorf("%q is not an IPv4 address", s)
			}
			return a, nil
		}),
		"ipv6": value(&h.IPv6, func(s string) (netip.Addr, error) {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is6() || a.Is4In6() {
				return a, fmt.Errorf("%q is not an IPv6 address", s)
			}
			return a, nil
		}),
		"mac": value(&h.MAC, func(s string) (net.HardwareAddr, error) {
			m, err := net.ParseMAC(s)
			if err != nil || len(m) != 6 || m[0]&1 != 0 {
				return nil, fmt.Errorf("%q is not a unicast Ethernet address", s)
			}
			return m, nil
		}),
		"external": value(&h.External, func(s string) (string, error) {
			if s != ExternalKernel && s != ExternalBridge {
				return "", fmt.Errorf("external %q: want kernel or bridge", s)
			}
			return s, nil
		}),
		"bridge":  value(&h.Bridge, str),
		"machine": value(&h.Machine, str),
	})
	return h, err
}

func parseSwitch(n *yaml.Node) (Switch, error) {
	s := Switch{Line: n.Line}
	err := mapping(n, "switch", map[string]func(*yaml.Node) error{
		"name":    value(&s.Name, str),
		"buffer":  value(&s.Buffer, ParseBytes),
		"machine": value(&s.Machine, str),
		"ecn": func(n *yaml.Node) error {
			s.ECN = &ECN{}
			return mapping(n, "ecn", map[string]func(*yaml.Node) error{
				"kmin": value(&s.ECN.KMin, ParseBytes),
				"kmax": value(&s.ECN.KMax, ParseBytes),
				"pmax": value(&s.ECN.PMax, prob),
			})
		},
		"pfc": func(n *yaml.Node) error {
			s.PFC = &PFC{}
			return mapping(n, "pfc", map[string]func(*yaml.Node) error{
				"xoff":     value(&s.PFC.XOff, ParseBytes),
				"xon":      value(&s.PFC.XOn, ParseBytes),
				"headroom": value(&s.PFC.Headroom, ParseBytes),
				"priorities": func(n *yaml.Node) error {
					return sequence(n, "pfc.priorities", func(n *yaml.Node) error {
						p, err := strconv.ParseUint(n.Value, 10, 8)
						if err != nil || p > 7 {
							return errorf(n.Line, "pfc priority %q: want 0 to 7", n.Value)
						}
						s.PFC.Priorities = append(s.PFC.Priorities, uint8(p))
						return nil
					})
				},
			})
		},
	})
	return s, err
}

func parseLink(n *yaml.Node) (Link, error) {
	l := Link{Line: n.Line}
	f := &l.Faults
	err := mapping(n, "link", map[string]func(*yaml.Node) error{
		"endpoints": func(n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode || len(n.Content) != 2 {
				return errorf(n.Line, "link endpoints: want a list of two node names")
			}
			l.Endpoints = [2]string{n.Content[0].Value, n.Content[1].Value}
			return nil
		},
		"rate":   value(&l.Rate, ParseRate),
		"delay":  value(&l.Delay, ParseDuration),
		"mtu":    value(&l.MTU, strconv.Atoi),
		"buffer": value(&l.Buffer, ParseBytes),
		"faults": func(n *yaml.Node) error {
			return mapping(n, "faults", map[string]func(*yaml.Node) error{
				"loss":          value(&f.Loss, prob),
				"duplicate":     value(&f.Duplicate, prob),
				"corrupt":       value(&f.Corrupt, prob),
				"reorder":       value(&f.Reorder, prob),
				"reorder_delay": value(&f.ReorderDelay, ParseDuration),
				"jitter":        value(&f.Jitter, ParseDuration),
				"jitter_prob":   value(&f.JitterProb, prob),
				"flap": func(n *yaml.Node) error {
					return mapping(n, "flap", map[string]func(*yaml.Node) error{
						"start":  value(&f.Flap.Start, ParseDuration),
						"period": value(&f.Flap.Period, ParseDuration),
						"down":   value(&f.Flap.Down, ParseDuration),
					})
				},
			})
		},
	})
	return l, err
}
