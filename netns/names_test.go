package netns

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"h1", "lab_1", "leaf-12", "a.b", strings.Repeat("x", 64)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", ".x", "..", "a/b", "a b", "h:1", strings.Repeat("x", 65)} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) = nil, want an error", bad)
		}
	}
}

func TestNamespaceName(t *testing.T) {
	if got := NamespaceName("lab1", "h1"); got != "rl-lab1-h1" {
		t.Errorf("NamespaceName = %q, want rl-lab1-h1", got)
	}
}

func TestTapNameFitsAndStaysDistinct(t *testing.T) {
	if got := TapName("h1"); got != "rl-h1" {
		t.Errorf("TapName(h1) = %q, want rl-h1", got)
	}
	if got := TapName("abcdefghijkl"); got != "rl-abcdefghijkl" { // exactly 15 bytes
		t.Errorf("TapName(abcdefghijkl) = %q, want it unchanged", got)
	}
	seen := map[string]string{}
	for _, host := range []string{"leaf-switch-host-1", "leaf-switch-host-2", "leaf-s.", "abcdefghijklm"} {
		name := TapName(host)
		if len(name) > 15 || !strings.HasPrefix(name, Prefix) {
			t.Errorf("TapName(%q) = %q: want at most 15 bytes with prefix %q", host, name, Prefix)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("TapName(%q) = TapName(%q) = %q", host, other, name)
		}
		seen[name] = host
	}
}
