package qp

import (
	"fmt"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// TestAckReqEvery: AckReq on every Nth request packet (the count running across
// messages and restarting at each AckReq) and on the last packet of each message, set
// by the builder so that the ICRC covers it.
func TestAckReqEvery(t *testing.T) {
	const T, F = true, false
	for _, tc := range []struct {
		every int
		want  [][]bool // per message (5 and 3 packets of 1024 bytes), per packet
	}{
		{0, [][]bool{{F, F, F, F, T}, {F, F, T}}}, // 64: only the last packets
		{1, [][]bool{{T, T, T, T, T}, {T, T, T}}},
		{2, [][]bool{{F, T, F, T, T}, {F, T, T}}},
		{4, [][]bool{{F, F, F, T, T}, {F, F, T}}},
		{6, [][]bool{{F, F, F, F, T}, {F, F, T}}},
	} {
		t.Run(fmt.Sprint(tc.every), func(t *testing.T) {
			o := defaultOpts()
			o.ackReqEvery = tc.every
			a, b := newPair(t, o)
			withRegions(a, b, AccessRemoteWrite)
			for i, n := range []uint32{5 << 10, 3 << 10} {
				post(t, a, SendWR{WRID: uint64(i), Opcode: WRWrite, SGL: []SGE{{Addr: localBase, Length: n, LKey: localKey}},
					RemoteAddr: remoteBase, RKey: remoteKey})
			}
			buf := make([]byte, MaxFrameSize)
			var p roce.Packet
			for m, msg := range tc.want {
				for i, want := range msg {
					n, ok := a.qp.NextRequest(0, buf)
					if !ok {
						t.Fatalf("message %d packet %d: no request", m, i)
					}
					if err := p.Decode(buf[:n]); err != nil {
						t.Fatal(err)
					}
					if err := p.VerifyICRC(); err != nil {
						t.Errorf("message %d packet %d: %v", m, i, err)
					}
					if n, data := a.qp.LastRequest(); n != len(p.Payload) || !data {
						t.Errorf("message %d packet %d: LastRequest %d, %v; the packet carries %d bytes of WRITE",
							m, i, n, data, len(p.Payload))
					}
					if got := p.BTH.AckReq(); got != want {
						t.Errorf("message %d packet %d: AckReq %v, want %v", m, i, got, want)
					}
				}
			}
			if _, ok := a.qp.NextRequest(0, buf); ok {
				t.Error("a request beyond the two messages")
			}
		})
	}
	if _, err := New(Config{Type: RC, QPN: 0x11, Memory: newFakeMem(), SendCQ: &cqRec{}, RecvCQ: &cqRec{},
		MaxSendWR: 1, MaxRecvWR: 1, AckReqEvery: -1}); err == nil {
		t.Error("negative AckReqEvery accepted")
	}
}
