package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/netns"
)

// tourBlocks returns the shell blocks (```sh fences) of a Markdown text, in order.
func tourBlocks(markdown string) []string {
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(markdown, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestTourBlocks pins the extraction: fenced sh blocks only, in order, verbatim.
func TestTourBlocks(t *testing.T) {
	md := "text\n\n    make demo\n\n```sh\na\nb &\nwait\n```\n\n```text\nnot run\n```\n```sh\nc\n```\n"
	got := tourBlocks(md)
	if len(got) != 2 || got[0] != "a\nb &\nwait\n" || got[1] != "c\n" {
		t.Errorf("blocks %q, want the two sh blocks verbatim", got)
	}
}

// TestReadmeTourRealTime runs the README's tour as a new user would: every ```sh block
// of README.md, in order, exactly as written, in a root shell at the repository's top
// (bash -e: a failing command fails the block; no pipefail, as in a user's shell,
// where `| head` cutting its writer short is no failure). The labs it starts live in a state
// directory of the test's own, so the machine's labs are never touched. Real time (a
// lab, write_bw): it runs in the non-race pass.
func TestReadmeTourRealTime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the README's lab tour needs root (namespaces and TAPs)")
	}
	if raceEnabled {
		t.Skip("the race detector slows the lab below real time")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tourBlocks(string(readme))
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d sh blocks, want the tour and its lab", len(blocks))
	}
	state := t.TempDir()
	t.Cleanup(func() { downAll(t, netns.Store{Root: state}) }) // what a failed block left running
	for i, b := range blocks {
		start := time.Now()
		sh := exec.Command("bash", "-e", "-c", b)
		sh.Dir = "../.."
		sh.Env = append(os.Environ(), "ROCELAB_STATE_DIR="+state)
		out, err := sh.CombinedOutput()
		t.Logf("block %d (%v):\n%s\n%s", i+1, time.Since(start).Round(time.Millisecond), b, out)
		if err != nil {
			t.Fatalf("README block %d failed: %v", i+1, err)
		}
		if strings.Contains(string(out), "connection refused") {
			t.Errorf("README block %d: a client found its server not listening yet", i+1)
		}
	}
}

// downAll removes every lab in store.
func downAll(t *testing.T, store netns.Store) {
	labs, _, err := store.List()
	if err != nil {
		t.Error(err)
	}
	for _, l := range labs {
		if _, err := (&netns.Cleaner{Store: store}).Down(l.Name); err != nil {
			t.Errorf("down %s: %v", l.Name, err)
		}
	}
}
