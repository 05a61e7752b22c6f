package replay

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rocelab/rocelab/hpcc"
)

// params is the replay defaults at 8 Gb/s and T = 10 µs: W_init = 10000 bytes,
// eta 0.95, W_ai = 10000·0.05 = 500 (rule of thumb, one flow).
func params() hpcc.Params {
	return hpcc.Params{BaseRTT: 10 * time.Microsecond, LineRate: 8e9, Eta: 0.95, MaxStage: 5, Flows: 1, WMin: 1000}
}

func TestSenderTrace(t *testing.T) {
	r, err := New(ModeSender, params())
	if err != nil {
		t.Fatal(err)
	}
	lines := []struct{ in, out string }{
		{`{"seq":0,"snd_nxt":10000,"hops":[{"ts_ns":0,"qlen":0,"tx_bytes":0,"bw_bps":8e9}]}`,
			`{"u":1,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":false}`},
		// u' = 5000/10000 = 0.5 over a full T (the new queue is not counted: min(5000, 0)): U = 0.5, AI 10000 + 500 clamped to W_init;
		// seq 10000 is not past lastUpdateSeq 10000, so nothing commits.
		{`{"seq":10000,"snd_nxt":20000,"hops":[{"ts_ns":10000,"qlen":5000,"tx_bytes":5000,"bw_bps":8000000000}]}`,
			`{"u":0.5,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":false}`},
		// Full rate plus a 5000-byte queue seen twice (min filter): U = 1.5.
		// W = 10000/(1.5/0.95) + 500 = 6333.33… + 500, committed.
		{`{"seq":10001,"snd_nxt":30000,"hops":[{"ts_ns":20000,"qlen":5000,"tx_bytes":15000,"bw_bps":8e9}]}`,
			`{"u":1.5,"w":6833.333333333334,"wc":6833.333333333334,"rate_bps":5466666666.666667,"inc_stage":0,"update_wc":true}`},
	}
	for i, l := range lines {
		got, err := r.Step([]byte(l.in))
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(got) != l.out {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, l.out)
		}
	}
}

func TestReceiverTrace(t *testing.T) {
	r, err := New(ModeReceiver, params())
	if err != nil {
		t.Fatal(err)
	}
	lines := []struct{ in, out string }{
		{`{"now_ns":0,"hops":[]}`, `{"u":1,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":false,"send_ack":false}`},
		// No hop: U stays 1 ≥ eta, W = 10000·0.95 + 500 = 10000; 10000 is not > 0 + T.
		{`{"now_ns":10000,"hops":[]}`, `{"u":1,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":false,"send_ack":false}`},
		{`{"now_ns":1.0001e4,"hops":[]}`, `{"u":1,"w":10000,"wc":10000,"rate_bps":8000000000,"inc_stage":0,"update_wc":true,"send_ack":true}`},
	}
	for i, l := range lines {
		got, err := r.Step([]byte(l.in))
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(got) != l.out {
			t.Errorf("line %d:\n got %s\nwant %s", i, got, l.out)
		}
	}
}

func TestStepErrors(t *testing.T) {
	tests := []struct{ mode, in, err string }{
		{ModeSender, `{"seq":1`, "unexpected end of the line"},
		{ModeSender, `{"seq":1,"snd_nxt":1,"hops":[],"extra":1}`, `unknown field "extra"`},
		{ModeSender, `{"seq":1,"snd_nxt":1,"snd_nxt":2,"hops":[]}`, `field "snd_nxt" given twice`},
		{ModeSender, `{"seq":1,"snd_nxt":1,"hops":[]} {}`, "trailing data"},
		{ModeSender, `[1]`, "line must be an object"},
		{ModeSender, `{"snd_nxt":1,"hops":[]}`, "seq: missing"},
		{ModeSender, `{"seq":-1,"snd_nxt":1}`, "seq must be a non-negative integer"},
		{ModeSender, `{"seq":1.5,"snd_nxt":1}`, "seq must be a non-negative integer"},
		{ModeSender, `{"seq":1,"snd_nxt":1,"hops":[{"ts_ns":1,"qlen":0,"tx_bytes":0,"bw_bps":0}]}`, "hops[0].bw_bps must be positive"},
		{ModeSender, `{"seq":1,"snd_nxt":1,"hops":[{"ts_ns":1,"tx_bytes":0,"bw_bps":1}]}`, "hops[0].qlen: missing"},
		{ModeSender, `{"seq":"x","snd_nxt":1}`, `seq must be a JSON number, got "x"`},
		{ModeReceiver, `{"hops":[]}`, "now_ns: missing"},
		{ModeReceiver, `{"now_ns":1e300}`, "now_ns must be an integer"},
	}
	for _, tc := range tests {
		r, err := New(tc.mode, params())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Step([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s %s: error %v, want it to contain %q", tc.mode, tc.in, err, tc.err)
		}
	}
	if _, err := New("sideways", params()); err == nil || !strings.Contains(err.Error(), `"sideways"`) {
		t.Errorf("bad mode: %v", err)
	}
}

// FuzzStep feeds arbitrary lines to both modes: Step must not panic, and whatever it
// accepts must produce a JSON object with finite numbers.
func FuzzStep(f *testing.F) {
	f.Add(`{"seq":0,"snd_nxt":10000,"hops":[{"ts_ns":0,"qlen":0,"tx_bytes":0,"bw_bps":8e9}]}`,
		`{"seq":10001,"snd_nxt":20000,"hops":[{"ts_ns":5000,"qlen":300,"tx_bytes":4000,"bw_bps":8e9}]}`)
	f.Add(`{"now_ns":0,"hops":[]}`, `{"now_ns":99999,"hops":[]}`)
	f.Add(`{"seq":1,"snd_nxt":1,"hops":[{"ts_ns":18446744073709551615,"qlen":1,"tx_bytes":18446744073709551615,"bw_bps":1}]}`,
		`{"seq":2,"snd_nxt":1,"hops":[{"ts_ns":0,"qlen":18446744073709551615,"tx_bytes":0,"bw_bps":1}]}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, mode := range []string{ModeSender, ModeReceiver} {
			r, err := New(mode, params())
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range []string{a, b, a} {
				res, err := r.Step([]byte(line))
				if err != nil {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal(res, &m); err != nil {
					t.Fatalf("output %s is not JSON: %v", res, err)
				}
				for _, k := range []string{"u", "w", "wc", "rate_bps"} {
					if v, ok := m[k].(float64); !ok || math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("output %s: %s is %v", res, k, m[k])
					}
				}
			}
		}
	})
}
