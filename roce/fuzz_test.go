package roce

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary frames to the parser. Whatever the input: no panic; a
// frame Decode accepts has views inside the frame, and one whose ICRC verifies
// rebuilds from its decoded fields to a frame that decodes to the same headers.
func FuzzDecode(f *testing.F) {
	f.Add(writeFirst(f, false, 64))
	f.Add(writeFirst(f, true, 3))
	f.Add(xrcWriteOnly(f))
	var p, q Packet
	var b Builder
	buf := make([]byte, 1<<16+64)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if p.Decode(frame) != nil {
			return
		}
		if len(p.Payload)+len(p.Pad) > len(frame) || p.BTH == nil || p.UDP == nil {
			t.Fatalf("views outside the frame")
		}
		ok := p.ICRCOK()
		b.From(&p)
		n, err := b.Build(buf)
		if err != nil {
			t.Fatalf("rebuild of an accepted frame: %v", err)
		}
		if err := q.Decode(buf[:n]); err != nil {
			t.Fatalf("rebuilt frame does not decode: %v", err)
		}
		if !q.ICRCOK() {
			t.Fatalf("rebuilt frame has a bad ICRC")
		}
		if q.BTH.Fields() != p.BTH.Fields() && ok || !bytes.Equal(q.Payload, p.Payload) {
			t.Fatalf("rebuilt frame differs: %+v vs %+v", q.BTH.Fields(), p.BTH.Fields())
		}
	})
}
