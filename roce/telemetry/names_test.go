package telemetry

import (
	"strings"
	"testing"
)

// TestParseFormatRoundTrips: every name parses to a format whose Name is that name, the
// decode spelling of INT-MD parses too, and an unknown name's error lists the accepted
// ones.
func TestParseFormatRoundTrips(t *testing.T) {
	for _, name := range append(FormatNames(), NoTelemetry) {
		f, err := ParseFormat(name)
		if err != nil {
			t.Fatalf("ParseFormat(%q): %v", name, err)
		}
		if got := f.Name(); got != name {
			t.Errorf("ParseFormat(%q).Name() = %q", name, got)
		}
	}
	if f, err := ParseFormat("int-md"); err != nil || f != FormatINTMD {
		t.Errorf(`ParseFormat("int-md") = %q, %v; want %q`, f, err, FormatINTMD)
	}
	if f, err := ParseFormat(""); err != nil || f != "" {
		t.Errorf(`ParseFormat("") = %q, %v; want none`, f, err)
	}
	_, err := ParseFormat("int-mx")
	if err == nil || !strings.Contains(err.Error(), "int, ioam, ifa, hpcc or none") {
		t.Errorf(`ParseFormat("int-mx") = %v, want an error listing the names`, err)
	}
}
