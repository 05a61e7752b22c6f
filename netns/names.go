package netns

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Prefix starts the name of every namespace and TAP netdev rocelab creates.
const Prefix = "rl-"

// ifNameMax is the longest interface name Linux accepts (IFNAMSIZ minus the NUL).
const ifNameMax = 15

// nameMax bounds lab and host names: long enough for any topology, short enough that
// "rl-<lab>-<host>" stays a valid file name under /run/netns.
const nameMax = 64

// ValidName reports whether s may name a lab or a host: 1 to 64 letters, digits, '_',
// '.' or '-', not starting with '-' or '.'. The restriction keeps every derived name a
// single, unquoted path element and interface name.
func ValidName(s string) error {
	if s == "" || len(s) > nameMax {
		return fmt.Errorf("name %q: must be 1 to %d characters", s, nameMax)
	}
	if s[0] == '-' || s[0] == '.' {
		return fmt.Errorf("name %q: must not start with %q", s, s[0])
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '_' || r == '.' || r == '-'
		if !ok {
			return fmt.Errorf("name %q: character %q not allowed (letters, digits, _ . -)", s, r)
		}
	}
	return nil
}

// NamespaceName is the network namespace of host in lab: "rl-<lab>-<host>". Names may be
// ambiguous when lab names contain '-' ("rl-a-b-c"), which is harmless: ownership is
// decided by the state file, never by parsing a name.
func NamespaceName(lab, host string) string {
	return Prefix + lab + "-" + host
}

// TapName is the TAP netdev of host inside its namespace: "rl-<host>" when that fits in
// 15 bytes, otherwise the first 7 bytes of host, '-', and 4 hex digits of a hash of the
// whole host name ("rl-leaf-12-a3f0"), so that distinct hosts keep distinct names. The
// lab is not part of the name: the TAP lives in the lab's own namespace.
func TapName(host string) string {
	name := Prefix + host
	if len(name) <= ifNameMax {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(host))
	return fmt.Sprintf("%s%s-%04x", Prefix, strings.TrimRight(host[:7], "-."), h.Sum32()&0xffff)
}
