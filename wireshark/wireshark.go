// Package wireshark ships rocelab's Wireshark Lua dissectors (rocelab.lua: INT-MD/MX
// over UDP, IFA, the HPCC compact hop, rocelab's telemetry probes) inside the rocelab
// binary, so `rocelab wireshark install` can put them where Wireshark looks.
package wireshark

import (
	_ "embed"
	"os"
	"path/filepath"
)

// Script is the dissector source.
//
//go:embed rocelab.lua
var Script []byte

// ScriptName is the file name the plugin is installed under.
const ScriptName = "rocelab.lua"

// PluginDir returns Wireshark's personal Lua plugin directory,
// ~/.local/lib/wireshark/plugins (Wireshark 3.x and 4.x on Linux).
func PluginDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "lib", "wireshark", "plugins"), nil
}

// Install writes Script into dir (PluginDir when dir is empty) and returns its path.
func Install(dir string) (string, error) {
	if dir == "" {
		d, err := PluginDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, ScriptName)
	return path, os.WriteFile(path, Script, 0o644)
}
