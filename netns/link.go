package netns

import (
	"fmt"
	"net"
	"net/netip"
	"time"

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
// detection (IFA_F_NODAD) and ConfigureLink returns once the kernel accepts packets for
// them.
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
	var v6 []netip.Addr
	for _, p := range cfg.Addrs {
		if p.Addr().Is6() {
			v6 = append(v6, p.Addr())
		}
	}
	var routeUpdates <-chan netlink.RouteUpdate
	if len(v6) > 0 {
		// Subscribed before the addresses exist, so no route event can be missed.
		updates, stop, err := subscribeRoutes(ns)
		if err != nil {
			return err
		}
		defer stop()
		routeUpdates = updates
	}

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
	if err := waitLocal(h, v6, routeUpdates); err != nil {
		return err
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

// ipv6Timeout bounds the wait for IPv6 addresses to become usable, which takes
// microseconds on an idle machine and a scheduling delay on a busy one.
const ipv6Timeout = 5 * time.Second

// waitLocal returns once every address in addrs has its local route, i.e. the kernel
// delivers packets sent to it. For IPv6 that is asynchronous even with IFA_F_NODAD:
// the kernel's DAD worker installs the route, some time after the address is added (a
// packet arriving before counts as Ip6InAddrErrors and is dropped). updates carries
// the namespace's route events; each one prompts a recheck, so nothing sleeps.
func waitLocal(h *netlink.Handle, addrs []netip.Addr, updates <-chan netlink.RouteUpdate) error {
	timeout := time.NewTimer(ipv6Timeout)
	defer timeout.Stop()
	for _, a := range addrs {
		for {
			routes, err := h.RouteGet(net.IP(a.AsSlice()))
			if err != nil {
				return fmt.Errorf("route to %s: %w", a, err)
			}
			if len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL {
				break
			}
			select {
			case <-updates:
			case <-timeout.C:
				return fmt.Errorf("address %s: not usable after %v", a, ipv6Timeout)
			}
		}
	}
	return nil
}

// subscribeRoutes delivers the route events of namespace ns until stop is called.
func subscribeRoutes(ns string) (updates <-chan netlink.RouteUpdate, stop func(), err error) {
	nsh, err := vnetns.GetFromPath(NamespacePath(ns))
	if err != nil {
		return nil, nil, err
	}
	defer nsh.Close()
	ch := make(chan netlink.RouteUpdate, 16)
	done := make(chan struct{})
	if err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &nsh}); err != nil {
		return nil, nil, fmt.Errorf("subscribe to routes: %w", err)
	}
	return ch, func() {
		close(done)
		for range ch { // until the subscription's goroutine closes ch on its way out
		}
	}, nil
}

// addBridge creates bridge br in namespace ns, makes the link port (already there)
// its port, and brings both and the loopback up. STP stays off, as on a new bridge, so
// ports forward as soon as they are up: the bridge stands for a piece of wire.
// bridgeTAPQueue is the queue, in frames, of an external host's TAP on its bridge.
const bridgeTAPQueue = 16384

func addBridge(ns, br, port string, mtu int) error {
	h, err := openNetlink(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = br
	if mtu > 0 {
		attrs.MTU = mtu
	}
	// No multicast snooping: a wire forwards NDP and MLD to every port, whatever
	// reports it has or has not seen (the lab relays nothing before it runs).
	snoop := false
	bridge := &netlink.Bridge{LinkAttrs: attrs, MulticastSnooping: &snoop}
	if err := h.LinkAdd(bridge); err != nil {
		return fmt.Errorf("netns: add bridge %s in %s: %w", br, ns, err)
	}
	p, err := h.LinkByName(port)
	if err != nil {
		return err
	}
	if mtu > 0 {
		if err := h.LinkSetMTU(p, mtu); err != nil {
			return fmt.Errorf("netns: set MTU of %s: %w", port, err)
		}
	}
	// What the bridge hands the TAP waits in its queue for the lab's reader, which a
	// loaded machine deschedules for milliseconds; a VM behind the bridge sends
	// bursts that nothing resends (rxe's UC: 12,800 frames), and at the default 1000
	// the kernel dropped over a thousand of them.
	if err := h.LinkSetTxQLen(p, bridgeTAPQueue); err != nil {
		return fmt.Errorf("netns: set the queue of %s: %w", port, err)
	}
	if err := h.LinkSetMaster(p, bridge); err != nil {
		return fmt.Errorf("netns: add %s to bridge %s: %w", port, br, err)
	}
	for _, name := range []string{"lo", port, br} {
		l, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("netns: %s up in %s: %w", name, ns, err)
		}
	}
	return nil
}
