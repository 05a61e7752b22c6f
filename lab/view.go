package lab

import (
	"fmt"

	"github.com/rocelab/rocelab/netns"
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
	hosts := netns.HostsFile(rec)
	for _, h := range l.Network.Hosts {
		r := rec.Host(h.Name)
		if r == nil {
			return fmt.Errorf("lab: host %s: not in the state file", h.Name)
		}
		attr := h.Device.QueryDevice()
		port, err := h.Device.QueryPort(1)
		if err != nil {
			return fmt.Errorf("lab: host %s: %w", h.Name, err)
		}
		gids := make([]netns.GID, port.GIDTableLen)
		for i := range gids {
			g, err := h.Device.QueryGID(i)
			if err != nil {
				return fmt.Errorf("lab: host %s: %w", h.Name, err)
			}
			gids[i] = netns.GID{GID: g, Type: "RoCE v2"} // rocelab speaks RoCE v2 only
		}
		dev := netns.RDMADevice{Name: RDMADeviceName, NodeGUID: attr.NodeGUID, FWVer: attr.FWVer, Netdev: r.Tap,
			Active: port.State == "ACTIVE", Rate: port.Rate, GIDs: gids,
			PKeys: 1} // the P_Key table the drop-in libibverbs reports (pkey_tbl_len 1)
		v := netns.HostView{Hostname: h.Name, Hosts: hosts, Devices: []netns.RDMADevice{dev}}
		if err := netns.CreateHostView(l.cfg.Store, l.cfg.Name, h.Name, v); err != nil {
			return err
		}
	}
	return nil
}
