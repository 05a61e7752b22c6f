package netns

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// LinkConfig is what a host's NIC looks like from its kernel. Zero fields are left as
// they are.
type LinkConfig struct {
	Name       string           // netdev inside the namespace, e.g. [TapName](host)
	MTU        int              // bytes of IP packet; 0 keeps the current MTU
	MAC        net.HardwareAddr // nil keeps the current address
	Addrs      []netip.Prefix   // IPv4 and IPv6 addresses with their subnets
	Routes     []Route          // added after the link is up
	Neighbours []Neighbour      // permanent ARP (IPv4) and NDP (IPv6) entries
}

// Route sends Dst through the link, via the gateway Via, or on-link when Via is the
// zero Addr.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
}

// Neighbour is a static ARP or NDP entry: the kernel sends to IP at MAC without asking.
type Neighbour struct {
	IP  netip.Addr
	MAC net.HardwareAddr
}

// ConfigureLink applies cfg to the link cfg.Name in namespace ns, brings the link and
// the namespace's loopback up, and is idempotent: addresses, routes and neighbours that
// exist already are replaced, not duplicated. IPv6 addresses skip duplicate address
// detection (IFA_F_NODAD), so they are usable as soon as ConfigureLink returns.
func ConfigureLink(ns string, cfg LinkConfig) error {
	if err := configureLink(ns, cfg); err != nil {
		return fmt.Errorf("netns: configure link %s in %s: %w", cfg.Name, ns, err)
	}
	return nil
}

func configureLink(ns string, cfg LinkConfig) error {
	h, err := openNetlink(ns)
	if err != nil {
		return err
	}
	defer h.Close()

	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	link, err := h.LinkByName(cfg.Name)
	if err != nil {
		return err
	}
	if cfg.MTU != 0 {
		if err := h.LinkSetMTU(link, cfg.MTU); err != nil {
			return fmt.Errorf("set MTU %d: %w", cfg.MTU, err)
		}
	}
	if cfg.MAC != nil {
		if err := h.LinkSetHardwareAddr(link, cfg.MAC); err != nil {
			return fmt.Errorf("set MAC %s: %w", cfg.MAC, err)
		}
	}
	for _, p := range cfg.Addrs {
		addr := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("add address %s: %w", p, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("link up: %w", err)
	}
	for _, r := range cfg.Routes {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(r.Dst.Masked())}
		if r.Via.IsValid() {
			route.Gw = net.IP(r.Via.AsSlice())
		} else {
			route.Scope = netlink.SCOPE_LINK
		}
		if err := h.RouteReplace(route); err != nil {
			return fmt.Errorf("add route %s via %v: %w", r.Dst, r.Via, err)
		}
	}
	for _, n := range cfg.Neighbours {
		family := netlink.FAMILY_V4
		if n.IP.Is6() {
			family = netlink.FAMILY_V6
		}
		neigh := &netlink.Neigh{
			LinkIndex:    link.Attrs().Index,
			Family:       family,
			State:        netlink.NUD_PERMANENT,
			IP:           net.IP(n.IP.AsSlice()),
			HardwareAddr: n.MAC,
		}
		if err := h.NeighSet(neigh); err != nil {
			return fmt.Errorf("add neighbour %s at %s: %w", n.IP, n.MAC, err)
		}
	}
	return nil
}

// openNetlink returns a netlink handle whose socket lives in namespace ns, so that
// configuring a namespace never moves a thread.
func openNetlink(ns string) (*netlink.Handle, error) {
	nsh, err := vnetns.GetFromPath(NamespacePath(ns))
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	return netlink.NewHandleAt(nsh)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{
		IP:   net.IP(p.Addr().AsSlice()),
		Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
	}
}
