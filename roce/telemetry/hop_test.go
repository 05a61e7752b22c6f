package telemetry

import (
	"errors"
	"testing"
)

// TestStackSlotTruncates: a stack takes MaxHops hops, then refuses the next one and
// says it was truncated.
func TestStackSlotTruncates(t *testing.T) {
	var s Stack
	for i := 0; i < MaxHops; i++ {
		h := s.Slot()
		if h == nil || s.Truncated {
			t.Fatalf("hop %d: slot %v, truncated %v", i, h, s.Truncated)
		}
		h.SwitchID = uint32(i)
		s.N++
	}
	if h := s.Slot(); h != nil || !s.Truncated {
		t.Fatalf("hop %d: slot %v, truncated %v; want nil, true", MaxHops, h, s.Truncated)
	}
	if s.N != MaxHops || s.Hops[MaxHops-1].SwitchID != MaxHops-1 {
		t.Errorf("N %d, last hop %d", s.N, s.Hops[MaxHops-1].SwitchID)
	}
}

// TestReadHops walks stacks of one-byte hops stored newest first: the hops come out in
// path order, a stack longer than MaxHops is cut and marked Truncated, and a hop cut
// off is ErrMalformed with the hops before it kept.
func TestReadHops(t *testing.T) {
	read := FixedHop(1, func(b []byte, h *Hop) { *h = Hop{}; h.SwitchID = uint32(b[0]) })
	var s Stack
	if err := s.ReadHops([]byte{3, 2, 1}, "hop", read); err != nil || s.N != 3 || s.Truncated ||
		s.Hops[0].SwitchID != 1 || s.Hops[2].SwitchID != 3 {
		t.Fatalf("3 hops: %v, %d hops %v, truncated %v", err, s.N, s.HopList(), s.Truncated)
	}
	s = Stack{}
	if err := s.ReadHops(make([]byte, MaxHops+5), "hop", read); err != nil || s.N != MaxHops || !s.Truncated {
		t.Fatalf("%d hops: %v, %d decoded, truncated %v", MaxHops+5, err, s.N, s.Truncated)
	}
	s = Stack{}
	two := FixedHop(2, func(b []byte, h *Hop) { h.SwitchID = uint32(b[0]) })
	if err := s.ReadHops([]byte{1, 1, 2}, "node", two); !errors.Is(err, ErrMalformed) || s.N != 1 ||
		err.Error() != "telemetry: malformed telemetry: node data cut off after 1 nodes" {
		t.Fatalf("cut-off hop: %v, %d decoded", err, s.N)
	}
}

// TestSetPort: an all-ones ID is "not supplied" and leaves the port as it was.
func TestSetPort(t *testing.T) {
	var h Hop
	h.SetPort(FieldEgressPort, 7, 0xFFFF)
	h.SetPort(FieldEgressPort, 0xFFFF, 0xFFFF)
	h.SetPort(FieldIngressPort, 0xFFFFFFFF, 0xFFFFFFFF)
	if h.PortID != 7 || h.IngressPort != 0 || h.Has != FieldEgressPort {
		t.Fatalf("%+v", h)
	}
}
