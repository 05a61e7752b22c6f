package rnic

import (
	"testing"

	"github.com/rocelab/rocelab/internal/clock"
)

func TestDeviceLoop(t *testing.T) {
	v := clock.NewVirtual(1)
	l := v.NewLoop("h1")
	d := &Device{loop: l}
	if d.Loop() != l {
		t.Fatal("Loop does not return the device's loop")
	}
}
