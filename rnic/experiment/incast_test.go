package experiment

import (
	"testing"

	"github.com/rocelab/rocelab/rnic"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []rnic.Mode{rnic.ModeNone, rnic.ModeHPCC, rnic.ModeDCQCN, rnic.ModeHPCCProbe, rnic.ModeRxHPCC, rnic.ModeHPCCEveryN} {
		cfg := Defaults()
		cfg.FlowSize = 500_000
		cfg.CC = mode
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: errors %v metrics %+v events %d base %v", mode, res.Errors, res.Metrics, res.Events, res.BaseRTT)
	}
}
