package telemetry

import (
	"fmt"
	"strings"
)

// formatNames are the short names topology files, --telemetry and the lab's status use
// for the formats a switch stamps, in documentation order. INT-MX is decoded, never
// stamped, so it has none.
var formatNames = []struct {
	name   string
	format Format
}{{"int", FormatINTMD}, {"ioam", FormatIOAM}, {"ifa", FormatIFA}, {"hpcc", FormatHPCC}}

// NoTelemetry is the name of no telemetry, the zero Format.
const NoTelemetry = "none"

// FormatNames lists the names of the formats a switch stamps; ParseFormat takes these
// and NoTelemetry.
func FormatNames() []string {
	names := make([]string, 0, len(formatNames))
	for _, n := range formatNames {
		names = append(names, n.name)
	}
	return names
}

// ParseFormat returns the format name names: "int" (or its decode spelling "int-md"),
// "ioam", "ifa", "hpcc"; NoTelemetry and "" name no telemetry (the zero Format). The
// error lists the accepted names.
func ParseFormat(name string) (Format, error) {
	if name == "" || name == NoTelemetry {
		return "", nil
	}
	for _, n := range formatNames {
		if name == n.name || name == string(n.format) {
			return n.format, nil
		}
	}
	return "", fmt.Errorf("unknown telemetry format %q: want %s or %s", name, strings.Join(FormatNames(), ", "), NoTelemetry)
}

// Name returns the short name ParseFormat takes back: "int" for INT-MD, NoTelemetry for
// the zero Format, the format's own spelling otherwise.
func (f Format) Name() string {
	if f == "" {
		return NoTelemetry
	}
	for _, n := range formatNames {
		if f == n.format {
			return n.name
		}
	}
	return string(f)
}
