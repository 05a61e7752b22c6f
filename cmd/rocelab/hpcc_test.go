package main

import (
	"bytes"
	"strings"
	"testing"
)

// runHPCCReplay executes a fresh `hpcc replay` command in-process (a fresh command, so
// flag values do not leak between cases).
func runHPCCReplay(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newHPCCReplayCmd()
	var out bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestHPCCReplayContract checks the stdin/stdout contract with the default flags:
// T = 5 µs, line rate 100 Gb/s so W_init = 62500 bytes, eta 0.95, maxStage 5,
// W_ai = 62500·0.05 = 3125 (rule of thumb, one flow), W_min 1000.
func TestHPCCReplayContract(t *testing.T) {
	in := `{"seq":0,"snd_nxt":62500,"hops":[{"ts_ns":1000,"qlen":0,"tx_bytes":0,"bw_bps":100000000000}]}

{"seq":62501,"snd_nxt":125000,"hops":[{"ts_ns":6000,"qlen":0,"tx_bytes":31250,"bw_bps":1e11}]}
`
	// Line 2: 31250 bytes in 5000 ns is half the line rate: U = 0.5 < eta, stage 0:
	// W = 62500 + 3125, clamped to W_init; committed because 62501 > 62500.
	want := `{"u":1,"w":62500,"wc":62500,"rate_bps":100000000000,"inc_stage":0,"update_wc":false}
{"u":0.5,"w":62500,"wc":62500,"rate_bps":100000000000,"inc_stage":1,"update_wc":true}
`
	got, err := runHPCCReplay(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("stdout\n%s\nwant\n%s", got, want)
	}

	// Receiver mode with explicit flags: T = 10 µs, W_init 10000, W_ai 100, eta 0.8.
	in = `{"now_ns":0,"hops":[{"ts_ns":0,"qlen":0,"tx_bytes":0,"bw_bps":8e9}]}
{"now_ns":10001,"hops":[{"ts_ns":10000,"qlen":0,"tx_bytes":10000,"bw_bps":8e9}]}
`
	// U = 1 ≥ 0.8: W = 10000·0.8 + 100 = 8100, fed back since 10001 > 0 + T.
	want = `{"u":1,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":false,"send_ack":false}
{"u":1,"w":8100,"wc":8100,"rate_bps":6480000000,"inc_stage":0,"update_wc":true,"send_ack":true}
`
	got, err = runHPCCReplay(t, in, "--mode", "receiver", "--base-rtt", "10us", "--winit", "10000",
		"--wai", "100", "--eta", "0.8", "--wmin", "500", "--max-stage", "3", "--line-rate", "8e9")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("stdout\n%s\nwant\n%s", got, want)
	}
}

func TestHPCCReplayErrors(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		err   string
	}{
		{[]string{"--eta", "0"}, "", "eta must be in (0, 1]"},
		{[]string{"--eta", "1.2"}, "", "eta must be in (0, 1]"},
		{[]string{"--base-rtt", "-1us"}, "", "base RTT must be positive"},
		{[]string{"--mode", "both"}, "", `mode must be "sender" or "receiver"`},
		{[]string{"--winit", "0"}, "", "--winit must be a positive"},
		{[]string{"--wai", "-3"}, "", "--wai must be a non-negative"},
		{[]string{"--flows", "0"}, "", "--flows must be at least 1"},
		{[]string{"--wmin", "1e6"}, "", "exceeds W_init"},
		{nil, "{}\n{\"seq\":1}\n", "stdin line 1: replay: seq: missing"},
		{nil, `{"seq":"1","snd_nxt":2,"hops":[]}` + "\n", `line: seq must be a JSON number, got "1"`},
		{nil, `{"seq":1,"snd_nxt":2,"hops":[],"colour":1}` + "\n", `line: unknown field "colour"`},
		{nil, `{"seq":1,"seq":2,"snd_nxt":2,"hops":[]}` + "\n", `line: field "seq" given twice`},
		{nil, `{"seq":1,"snd_nxt":2,"hops":[{"ts_ns":1,"qlen":0,"tx_bytes":0,"bw_bps":"1e11"}]}` + "\n", `hops[0]: bw_bps must be a JSON number`},
		{nil, `{"seq":1,"snd_nxt":2,"hops":[{"ts_ns":1,"qlen":0,"qlen":0,"bw_bps":1e11}]}` + "\n", `hops[0]: field "qlen" given twice`},
		{[]string{"--winit", "1e308"}, "", "W_init 1e+308 and W_ai 0 bytes must be at most"},
	}
	for _, tc := range tests {
		if _, err := runHPCCReplay(t, tc.stdin, tc.args...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.err)
		}
	}
}

// TestHPCCRegistered checks that the command is reachable from the root as documented.
func TestHPCCRegistered(t *testing.T) {
	c, _, err := rootCmd.Find([]string{"hpcc", "replay"})
	if err != nil || c.Name() != "replay" {
		t.Fatalf("rocelab hpcc replay not registered: %v", err)
	}
}
