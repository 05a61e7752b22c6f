package topo

// Machine is one of the machines a lab is split across. Each runs one part of the lab:
// the hosts and switches placed on it, and its ends of the links that cross to another
// part, which become tunnels.
type Machine struct {
	// Name is a DNS label (lowercase letters, digits and '-', at most 63), so that it
	// can name the part's pod and its DNS record.
	Name string
	// Address is where the other parts reach this one: an IP address or a DNS name.
	// Empty when it is only known when the part starts.
	Address string
	Line    int
}

// isDNSLabel reports whether s is an RFC 1123 DNS label as Kubernetes names a node:
// 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or a
// digit. (Written out: the regular expression's bounded repetition compiled to a
// program that took a third of the CLI's start-up, at every start.)
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validatePlacement checks the machines and the nodes' placements. Without machines, no
// node may name one.
func (t *Topology) validatePlacement() error {
	declared := map[string]int{}
	for _, m := range t.Machines {
		if !isDNSLabel(m.Name) {
			return errorf(m.Line, "machine %q: want a DNS label (lowercase letters, digits and '-', at most 63)", m.Name)
		}
		if prev, dup := declared[m.Name]; dup {
			return errorf(m.Line, "machine %q: name already used on line %d", m.Name, prev)
		}
		declared[m.Name] = m.Line
	}
	check := func(kind, name, machine string, line int) error {
		if machine == "" {
			return nil
		}
		if _, ok := declared[machine]; !ok {
			return errorf(line, "%s %q: machine %q is not among the topology's machines", kind, name, machine)
		}
		return nil
	}
	for _, h := range t.Hosts {
		if err := check("host", h.Name, h.Machine, h.Line); err != nil {
			return err
		}
	}
	for _, s := range t.Switches {
		if err := check("switch", s.Name, s.Machine, s.Line); err != nil {
			return err
		}
	}
	return nil
}

// Placement returns the machine each node (host or switch) runs on. A node without a
// machine goes with its nearest placed neighbour (the first reached, in declaration
// order, on a tie); if no node is placed, all go to the first machine. Without machines,
// every node maps to "": the whole lab is one part.
func (t *Topology) Placement() map[string]string {
	g := t.graph()
	at := make([]string, len(g.names))
	var queue []int
	for i, h := range t.Hosts {
		if at[i] = h.Machine; h.Machine != "" {
			queue = append(queue, i)
		}
	}
	for i, s := range t.Switches {
		j := len(t.Hosts) + i
		if at[j] = s.Machine; s.Machine != "" {
			queue = append(queue, j)
		}
	}
	if len(queue) == 0 && len(t.Machines) > 0 {
		at[0] = t.Machines[0].Name
		queue = append(queue, 0)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range g.edges[u] {
			if at[e.to] == "" {
				at[e.to] = at[u]
				queue = append(queue, e.to)
			}
		}
	}
	place := make(map[string]string, len(g.names))
	for i, name := range g.names {
		place[name] = at[i]
	}
	return place
}

// Tunnels returns the indices in Links of the links whose ends run on two machines.
func (t *Topology) Tunnels() []int {
	place := t.Placement()
	var idx []int
	for i, l := range t.Links {
		if place[l.Endpoints[0]] != place[l.Endpoints[1]] {
			idx = append(idx, i)
		}
	}
	return idx
}

// VNI returns the VXLAN network identifier of the link at index i of Links: one per
// link, so that a tunnel's frames never mix with another's (MaxLinks fits in 24 bits).
func VNI(i int) uint32 { return uint32(i) + 1 }
