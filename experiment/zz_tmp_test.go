package experiment

import (
	"testing"

	"github.com/rocelab/rocelab/rnic"
)

func TestZZProfRT(t *testing.T) {
	cfg := incastConfig(10e9, rnic.ModeHPCC, 2)
	res, err := RunRealTime(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("util %.3f window %v", res.Metrics.Utilization, res.Metrics.Window)
}
