package rnic

import (
	"testing"

	"github.com/rocelab/rocelab/fabric/link"
)

// FuzzReceive runs arbitrary frames through the Rx pipeline of a device with a QP in
// RTS: nothing may panic, and every frame is accounted for.
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
		d.receive(fr)
		if d.Stats().RxFrames != 1 {
			t.Fatal("frame not counted")
		}
	})
}
