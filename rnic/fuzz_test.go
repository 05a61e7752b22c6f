package rnic

import (
	"testing"

	"github.com/rocelab/rocelab/fabric/link"
)

// FuzzReceive runs arbitrary frames through the Rx pipeline of a device with a QP in
// RTS, through the port's link entry point as a lab delivers them: nothing may panic
// (a contained panic counts as a failure here), and every frame is accounted for.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{})
	f.Add(append(make([]byte, 12), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1))
	f.Add(append(make([]byte, 12), 0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, d, _ := pair(t)
		pool := link.NewPool(1518)
		fr := pool.Get()
		if fr.SetBytes(b) != nil {
			return
		}
		d.port.Receive([]*link.Frame{fr})
		if st := d.Stats(); st.Panics != 0 || st.RxFrames != 1 {
			t.Fatalf("frame counted %d times, %d panics", st.RxFrames, st.Panics)
		}
	})
}
