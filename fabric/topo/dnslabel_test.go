package topo

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestIsDNSLabelMatchesRegexp holds isDNSLabel to the RFC 1123 label's regular
// expression (Kubernetes' own) on the edges and on random strings over an alphabet
// of valid and invalid characters.
func TestIsDNSLabelMatchesRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	cases := []string{"", "a", "-", "a-", "-a", "a-b", "0", "A", "a.b", "a_b", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 61) + "b"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "az09-A._é"
	for range 20000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := isDNSLabel(s), re.MatchString(s); got != want {
			t.Fatalf("isDNSLabel(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}
