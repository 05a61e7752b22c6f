package lab

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/rocelab/rocelab/netns"
	"github.com/rocelab/rocelab/network"
)

// RDMADeviceName is the name the drop-in libibverbs gives each host's soft-RNIC
// (libibverbs/rocelab.h RL_DEVICE_NAME), and its sysfs directory's.
const RDMADeviceName = "rocelab0"

// createViews gives every emulated host its own hostname, /etc/hosts, sysfs and RDMA
// device entries (netns.CreateHostView). The device's files come from the soft-RNIC's
// own query verbs, the ones the verbs service answers ibv_query_device, _port and _gid
// with, so sysfs and the library cannot disagree.
func (l *Lab) createViews() error {
	rec, err := l.cfg.Store.Load(l.cfg.Name)
	if err != nil {
		return err
	}
	hosts, err := l.cfg.Store.WriteHosts(l.cfg.Name)
	if err != nil {
		return err
	}
	// A view costs a re-executed child (about 10 ms): a few at a time.
	sem := make(chan struct{}, 2*runtime.GOMAXPROCS(0))
	errs := make([]error, len(l.Network.Hosts))
	var wg sync.WaitGroup
	for i, h := range l.Network.Hosts {
		r := rec.Host(h.Name)
		if r == nil {
			return fmt.Errorf("lab: host %s: not in the state file", h.Name)
		}
		dev, err := rdmaDevice(h, r.Tap)
		if err != nil {
			return err
		}
		v := netns.HostView{Hostname: h.Name, Hosts: hosts, Devices: []netns.RDMADevice{dev}}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = netns.CreateHostView(l.cfg.Store, l.cfg.Name, h.Name, v)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rdmaDevice is what h's soft-RNIC says of itself, on netdev tap.
func rdmaDevice(h *network.Host, tap string) (netns.RDMADevice, error) {
	attr := h.Device.QueryDevice()
	port, err := h.Device.QueryPort(1)
	if err != nil {
		return netns.RDMADevice{}, fmt.Errorf("lab: host %s: %w", h.Name, err)
	}
	gids := make([]netns.GID, port.GIDTableLen)
	for i := range gids {
		g, err := h.Device.QueryGID(i)
		if err != nil {
			return netns.RDMADevice{}, fmt.Errorf("lab: host %s: %w", h.Name, err)
		}
		gids[i] = netns.GID{GID: g, Type: "RoCE v2"} // rocelab speaks RoCE v2 only
	}
	return netns.RDMADevice{Name: RDMADeviceName, NodeGUID: attr.NodeGUID, FWVer: attr.FWVer, Netdev: tap,
		Active: port.State == "ACTIVE", Rate: port.Rate, GIDs: gids,
		PKeys: 1}, nil // the P_Key table the drop-in libibverbs reports (pkey_tbl_len 1)
}
