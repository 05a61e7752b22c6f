package experiment

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rocelab/rocelab/fabric"
	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/stamp"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/roce/telemetry"
)

// star is one switch with hosts around it, every host a soft-RNIC: the topology of the
// incast and fairness scenarios. Host i sits behind switch port i.
type star struct {
	sw    *fabric.Switch
	hosts []*rnic.Device
	pool  *link.Pool
}

func hostMAC(i int) [6]byte { return [6]byte{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }

func hostIP(i int, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(i + 1), 14: byte((i + 1) >> 8)})
	}
	return netip.AddrFrom4([4]byte{10, 0, byte((i + 1) >> 8), byte(i + 1)})
}

// buildStar creates n hosts around one switch on clk. Hosts know each other's MACs
// statically (the lab's job; ARP is tested on its own).
func buildStar(clk clock.Clock, n int, cfg *Config) (*star, error) {
	pool := link.NewPool(cfg.linkMTU() + 18)
	switch clk.(type) {
	case *clock.Virtual, oneLoop: // every frame is got and released on one thread
		pool = link.NewSerialPool(cfg.linkMTU() + 18)
	}
	scfg := fabric.Config{ID: 1, Buffer: cfg.Buffer, SharedBuffer: true, Pool: pool}
	// One priority for everything: strict priority between telemetry classes would
	// reorder a flow whose packets carry telemetry only sometimes.
	var prio [64]uint8
	scfg.DSCPPriority = &prio
	if cfg.CC == rnic.ModeDCQCN {
		scfg.ECN = cfg.ECN
	}
	if cfg.CC != rnic.ModeDCQCN && cfg.CC != rnic.ModeNone {
		c, err := rnic.Codecs(cfg.Telemetry)
		if err != nil {
			return nil, err
		}
		scfg.Stamper = stamp.New(c)
	}
	sw, err := fabric.New(clk.NewLoop("s1"), scfg)
	if err != nil {
		return nil, err
	}
	s := &star{sw: sw, pool: pool}
	cc := cfg.ccConfig()
	v6 := cfg.Telemetry == telemetry.FormatIOAM
	for i := range n {
		a, b, err := link.New(link.Config{Rate: cfg.LinkRate, Delay: cfg.LinkDelay, MTU: cfg.linkMTU()})
		if err != nil {
			return nil, err
		}
		d, err := rnic.Open(rnic.Config{Name: fmt.Sprintf("h%d", i), MAC: hostMAC(i), GIDs: []netip.Addr{hostIP(i, v6)},
			Loop: clk.NewLoop(fmt.Sprintf("h%d", i)), Link: a, Pool: pool, CC: cc, TxLookahead: cfg.TxLookahead,
			PayloadFree: !cfg.Verify})
		if err != nil {
			return nil, err
		}
		s.hosts = append(s.hosts, d)
		sw.AddPort(b, fabric.MAC{0x02, 0xff, 0, 0, byte(i >> 8), byte(i)})
		sw.SetRoute(hostMAC(i), []uint16{uint16(i)})
	}
	for i, d := range s.hosts {
		for j := range s.hosts {
			if i != j {
				d.AddNeighbour(hostIP(j, v6), hostMAC(j))
			}
		}
	}
	return s, nil
}

// baseRTT is the round trip of an MTU-sized packet and its ACK through one switch
// without queueing: four propagation delays, and each of the two packets serialized
// twice (by its sender and by the switch). Under the ns3 preset it is the simulator's
// (simRTT over the two links).
func baseRTT(cfg *Config) time.Duration {
	if cfg.Preset == PresetNS3 {
		l := pathLink{cfg.LinkDelay, cfg.LinkRate}
		return simRTT(cfg.segment(), []pathLink{l, l})
	}
	ser := func(n int) time.Duration { return time.Duration(uint64(n) * 8e9 / cfg.LinkRate) }
	return 4*cfg.LinkDelay + 2*ser(int(cfg.MTU)+100) + 2*ser(100)
}
