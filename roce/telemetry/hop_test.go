package telemetry

import "testing"

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
