package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
)

// HostConfig describes one host of a lab for [AddHost].
type HostConfig struct {
	Name       string
	MAC        net.HardwareAddr
	IPv4       netip.Prefix // address and subnet; the zero Prefix for none
	IPv6       netip.Prefix // address and subnet; the zero Prefix for none
	MTU        int          // 0 keeps the TAP's default (1500)
	Queues     int          // TAP queues; 0 means 1
	Routes     []Route
	Neighbours []Neighbour
	// Bridge, if set, makes the TAP a port of a Linux bridge of that name in the
	// namespace instead of the host's NIC: the lab relays the fabric to whatever else
	// joins the bridge (a QEMU VM's TAP, a veth). The TAP then carries no address,
	// route or neighbour, and keeps a MAC of its own; MAC, IPv4 and IPv6 are recorded
	// as the external device's but not configured.
	Bridge string
}

// AddHost builds host cfg of lab, whose state file must exist: it records the host,
// then creates its namespace [NamespaceName](lab, host) and TAP [TapName](host) there,
// and configures the TAP and loopback. It returns the open TAP, owned by the caller;
// the TAP disappears when the caller closes it or exits. A namespace of that name must
// not exist. On failure the namespace is deleted and the host unrecorded again (a crash
// in between leaves a record of a missing namespace, which removal tolerates).
func AddHost(store Store, lab string, cfg HostConfig) (*TAP, error) {
	if err := ValidName(cfg.Name); err != nil {
		return nil, fmt.Errorf("netns: add host to lab %s: %w", lab, err)
	}
	host := Host{
		Name:   cfg.Name,
		Netns:  NamespaceName(lab, cfg.Name),
		Tap:    TapName(cfg.Name),
		MAC:    cfg.MAC.String(),
		IPv4:   cfg.IPv4,
		IPv6:   cfg.IPv6,
		Bridge: cfg.Bridge,
	}
	// Checked before recording: a record of a namespace someone else made would let
	// Down delete it.
	if _, err := os.Stat(NamespacePath(host.Netns)); err == nil {
		return nil, fmt.Errorf("netns: add host %s to lab %s: namespace %s: %w", cfg.Name, lab, host.Netns, os.ErrExist)
	}
	err := store.Update(lab, func(l *Lab) error {
		if l.Host(cfg.Name) != nil {
			return fmt.Errorf("netns: add host %s to lab %s: already recorded", cfg.Name, lab)
		}
		l.Hosts = append(l.Hosts, host)
		return nil
	})
	if err != nil {
		return nil, err
	}
	tap, err := createHost(host, cfg)
	if err != nil {
		// Nothing of the host is left; neither should its record be, in case the
		// namespace was created by someone else meanwhile.
		unrecord := store.Update(lab, func(l *Lab) error {
			l.Hosts = slices.DeleteFunc(l.Hosts, func(h Host) bool { return h.Name == cfg.Name })
			return nil
		})
		return nil, errors.Join(fmt.Errorf("netns: add host %s to lab %s: %w", cfg.Name, lab, err), unrecord)
	}
	return tap, nil
}

func createHost(host Host, cfg HostConfig) (*TAP, error) {
	if err := CreateNamespace(host.Netns); err != nil {
		return nil, err
	}
	queues := max(cfg.Queues, 1)
	tap, err := OpenTAP(host.Netns, host.Tap, queues)
	if err == nil && cfg.Bridge != "" {
		if err = addBridge(host.Netns, cfg.Bridge, host.Tap, cfg.MTU); err != nil {
			err = errors.Join(err, tap.Close())
		}
	} else if err == nil {
		link := LinkConfig{Name: host.Tap, MTU: cfg.MTU, MAC: cfg.MAC, Routes: cfg.Routes, Neighbours: cfg.Neighbours}
		for _, p := range []netip.Prefix{cfg.IPv4, cfg.IPv6} {
			if p.IsValid() {
				link.Addrs = append(link.Addrs, p)
			}
		}
		if err = ConfigureLink(host.Netns, link); err != nil {
			err = errors.Join(err, tap.Close())
		}
	}
	if err != nil {
		return nil, errors.Join(err, DeleteNamespace(host.Netns))
	}
	return tap, nil
}
