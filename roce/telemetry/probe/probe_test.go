package probe

import (
	"encoding/hex"
	"testing"

	"github.com/rocelab/rocelab/roce/telemetry"
	"github.com/rocelab/rocelab/roce/telemetry/telemetrytest"
)

// Request body: version 1, A set, sequence 7, send time 0x0102030405060708 ns.
//
//	11 00 00 00 | 00 00 00 07 | 01 02 03 04 05 06 07 08
const goldenRequest = "11000000" + "00000007" + "0102030405060708"

func TestRequest(t *testing.T) {
	r := Request{AllHops: true, Seq: 7, SendTS: 0x0102030405060708}
	b := make([]byte, RequestSize)
	r.Put(b)
	if got := hex.EncodeToString(b); got != goldenRequest {
		t.Fatalf("request %s, want %s", got, goldenRequest)
	}
	var back Request
	if err := back.Parse(b); err != nil || back != r {
		t.Fatalf("parse: %+v %v", back, err)
	}
}

// A most-loaded-hop response: path of 3 hops, hop 2 (index 1) chosen.
//
//	10 03 01 00 | 00 00 00 07 | 00 00 00 00 00 00 00 2a     header: 3 path hops, 1 record, seq 7, ts 42
//	01 00 00 0f | 00 00 00 16                               index 1, mask 0xF, ingress port 22
//	00 00 00 00 00 0f 4a 10                                 ts 1002000
//	00 00 00 00 00 02 71 00                                 qlen 160000
//	00 00 00 00 01 86 a0 00                                 tx bytes 25600000
//	00 00 00 17 48 76 e8 00                                 rate 100e9
//	00 00 01 02 | 00 00 00 0c                               switch 0x102, egress port 12
const goldenResponse = "10030100" + "00000007" + "000000000000002a" + "0100000f" + "00000016" +
	"00000000000f4a10" + "0000000000027100" + "000000000186a000" + "000000174876e800" + "00000102" + "0000000c"

func TestResponseMostLoaded(t *testing.T) {
	var st telemetry.Stack
	for i := range 3 {
		st.Hops[i] = telemetrytest.Hop(i + 1)
		st.Hops[i].Has = telemetry.FieldTS | telemetry.FieldQLen | telemetry.FieldTxBytes | telemetry.FieldRate
	}
	st.N = 3
	st.Hops[1].QLen = 160000 // hop 2 holds the deepest queue relative to its rate
	st.Hops[2].QLen = 1000
	var r Response
	r.Answer(&Request{Seq: 7, SendTS: 42}, &st, nil, 10_000)
	b := make([]byte, r.Size())
	r.Put(b)
	if got := hex.EncodeToString(b); got != goldenResponse {
		t.Fatalf("response\n got %s\nwant %s", got, goldenResponse)
	}
	var back Response
	if err := back.Parse(b); err != nil || back.N != 1 || back.Records[0].Hop.Hop != st.Hops[1].Hop {
		t.Fatalf("parse: %+v %v", back.Records[0], err)
	}
}

func TestResponseAllHops(t *testing.T) {
	var st telemetry.Stack
	for i := range 4 {
		st.Hops[i] = telemetrytest.Hop(i + 1)
	}
	st.N = 4
	var r Response
	r.Answer(&Request{AllHops: true, Seq: 1}, &st, nil, 10_000)
	b := make([]byte, r.Size())
	r.Put(b)
	var back Response
	if err := back.Parse(b); err != nil || back.N != 4 || back.PathHops != 4 || !back.AllHops {
		t.Fatalf("parse: %+v %v", back, err)
	}
	for i := range 4 {
		if back.Records[i].Index != uint8(i) || back.Records[i].Hop.SwitchID != st.Hops[i].SwitchID {
			t.Fatalf("record %d: %+v", i, back.Records[i])
		}
	}
}

// The tx-rate term needs the previous probe: with it, a hop sending at line rate with
// an empty queue beats one with a small queue and an idle link.
func TestInflightUsesPreviousSample(t *testing.T) {
	var prev, cur telemetry.Stack
	for i := range 2 {
		prev.Hops[i] = telemetrytest.Hop(i + 1)
		cur.Hops[i] = prev.Hops[i]
		cur.Hops[i].TS += 10_000 // 10 µs later
		cur.Hops[i].QLen = 0
	}
	prev.N, cur.N = 2, 2
	cur.Hops[0].QLen = 10_000      // 10 KB queued, no traffic
	cur.Hops[1].TxBytes += 125_000 // 100 Gb/s for 10 µs
	var r Response
	r.Answer(&Request{}, &cur, &prev, 10_000)
	if r.Records[0].Index != 1 {
		t.Fatalf("chose hop %d, want 1", r.Records[0].Index)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{0x11, 0, 0, 0, 0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8})
	b, _ := hex.DecodeString(goldenResponse)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var q Request
		if q.Parse(b) == nil {
			out := make([]byte, RequestSize)
			q.Put(out)
			var again Request
			if again.Parse(out) != nil || again != q {
				t.Fatalf("request does not round-trip: %+v", q)
			}
		}
		var r Response
		if r.Parse(b) == nil {
			out := make([]byte, r.Size())
			r.Put(out)
			var again Response
			if again.Parse(out) != nil || again.N != r.N || again.Seq != r.Seq {
				t.Fatalf("response does not round-trip")
			}
		}
	})
}
