package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/fabric/topo"
	"github.com/rocelab/rocelab/internal/clock"
)

// Config describes this part of a lab.
type Config struct {
	Lab      string
	Machine  string // this part's machine
	Topology *topo.Topology
	// Peers override the machines' addresses (machine name → IP or DNS name).
	Peers map[string]string
	// Secret is the lab secret every part shares.
	Secret []byte
	// Listen is the address the part binds (its underlay address); "" binds all.
	Listen string
	// Handle answers a peer's request (Message.Op other than ping and exec) with a body.
	Handle func(op string, body json.RawMessage) (json.RawMessage, error)
	// Exec, if set, returns the (unstarted) command a remote exec asks for (exec.go).
	Exec func(ExecRequest) (*exec.Cmd, error)
	Log  *zap.Logger
}

// Part is this part's side of the underlay: the VXLAN socket its tunnels share, a
// control listener, and a connection to every other part.
type Part struct {
	cfg       Config
	udp       *net.UDPConn
	out       *sender
	ctl       net.Listener
	tunnels   map[uint32]*Tunnel
	peers     map[string]*peer
	pool      *link.Pool
	epochWall int64 // wall-clock ns at this part's clock's zero
	log       *zap.Logger
	stop      chan struct{}
	wg        sync.WaitGroup

	// Datagrams dropped by the reader, by reason.
	Malformed, UnknownVNI, UnknownSource atomic.Uint64
	// Refused counts control connections that failed the handshake.
	Refused atomic.Uint64
}

// New prepares the part: one tunnel per link of t that crosses from this machine to
// another. Call Tunnel to get each one's endpoint while building the network, then
// Start once the clock runs.
func New(cfg Config) (*Part, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("tunnel: a lab over several machines needs a lab secret (--secret-file): its parts authenticate each other with it")
	}
	p := &Part{cfg: cfg, tunnels: map[uint32]*Tunnel{}, peers: map[string]*peer{}, log: cfg.Log, stop: make(chan struct{}), out: newSender()}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	found := false
	for _, m := range cfg.Topology.Machines {
		if m.Name == cfg.Machine {
			found = true
			continue
		}
		addr := m.Address
		if a, ok := cfg.Peers[m.Name]; ok {
			addr = a
		}
		p.peers[m.Name] = &peer{name: m.Name, host: addr}
	}
	if !found {
		return nil, fmt.Errorf("tunnel: machine %q is not among the topology's machines", cfg.Machine)
	}
	for name := range cfg.Peers {
		if p.peers[name] == nil {
			return nil, fmt.Errorf("tunnel: --peer %s: no other machine of the topology is named so", name)
		}
	}
	for _, pe := range p.peers {
		if pe.host == "" {
			return nil, fmt.Errorf("tunnel: machine %s has no address: give one in the topology or with --peer %s=ADDR", pe.name, pe.name)
		}
	}
	return p, nil
}

// Tunnel returns the endpoint of link i (its index in the topology's Links) on this
// part's side, towards machine peer.
func (p *Part) Tunnel(i int, peer string) (*Tunnel, error) {
	l := p.cfg.Topology.Links[i]
	t, err := newTunnel(p, topo.VNI(i), peer, l.Config())
	if err != nil {
		return nil, err
	}
	p.tunnels[t.VNI] = t
	return t, nil
}

// Tunnels returns the part's tunnels by VNI.
func (p *Part) Tunnels() map[uint32]*Tunnel { return p.tunnels }

// Start binds the underlay sockets and starts the reader, the control listener and a
// connection to every peer. clk is the lab's clock (running); pool supplies received
// frames.
func (p *Part) Start(clk *clock.Real, pool *link.Pool) error {
	p.pool = pool
	p.epochWall = time.Now().UnixNano() - int64(clk.Now())
	ip := net.IPv6zero
	if p.cfg.Listen != "" {
		a, err := netip.ParseAddr(p.cfg.Listen)
		if err != nil {
			return fmt.Errorf("tunnel: --listen %q: want an IP address: %w", p.cfg.Listen, err)
		}
		ip = a.AsSlice()
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: VXLANPort})
	if err != nil {
		return fmt.Errorf("tunnel: VXLAN socket: %w", err)
	}
	udp.SetReadBuffer(4 << 20)
	udp.SetWriteBuffer(4 << 20)
	p.udp = udp
	ctl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: ControlPort})
	if err != nil {
		udp.Close()
		return fmt.Errorf("tunnel: control socket: %w", err)
	}
	p.ctl = ctl
	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.read() }()
	go func() { defer p.wg.Done(); p.out.write(udp, p.stop) }()
	go func() { defer p.wg.Done(); p.accept() }()
	for _, pe := range p.peers {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.keep(pe) }()
	}
	return nil
}

// Close stops the part: its peers see it gone.
func (p *Part) Close() error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	close(p.stop)
	var errs []error
	if p.udp != nil {
		errs = append(errs, p.udp.Close(), p.ctl.Close())
	}
	for _, pe := range p.peers {
		pe.mu.Lock()
		if pe.conn != nil {
			pe.conn.Close()
		}
		pe.mu.Unlock()
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

// toWall converts a time of this part's clock to wall-clock ns.
func (p *Part) toWall(t clock.Time) int64 { return p.epochWall + int64(t) }

// toLocal converts a wall-clock time of machine peer to this part's clock, correcting
// by the clock offset measured to that peer.
func (p *Part) toLocal(peer string, wall int64) clock.Time {
	off := int64(0)
	if pe := p.peers[peer]; pe != nil {
		off = pe.offset.Load()
	}
	return clock.Time(wall - off - p.epochWall)
}

// peerAddr returns peer's underlay VXLAN address, once resolved.
func (p *Part) peerAddr(peer string) (netip.AddrPort, bool) {
	pe := p.peers[peer]
	if pe == nil {
		return netip.AddrPort{}, false
	}
	a, ok := pe.addr.Load().(netip.Addr)
	return netip.AddrPortFrom(a, VXLANPort), ok
}

// read takes every datagram that reaches the VXLAN port: from a peer's address, with a
// VNI of one of this part's tunnels towards that peer, it goes to the tunnel;
// anything else is counted and dropped.
func (p *Part) read() {
	r := newReader(p.udp)
	for {
		err := r.read(func(b []byte, from netip.AddrPort) {
			d, err := Decode(b)
			if err != nil {
				p.Malformed.Add(1)
				return
			}
			t := p.tunnels[d.VNI]
			if t == nil {
				p.UnknownVNI.Add(1)
				return
			}
			if a, ok := p.peerAddr(t.Peer); !ok || a.Addr() != from.Addr().Unmap() {
				p.UnknownSource.Add(1)
				return
			}
			t.received(d, p.pool)
		})
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// peer is another part, as this one sees it.
type peer struct {
	name, host string
	addr       atomic.Value // netip.Addr, resolved from host
	offset     atomic.Int64 // its wall clock minus ours, ns (0 when within measurement)

	req sync.Mutex // one request at a time on the session

	mu        sync.Mutex
	conn      net.Conn
	sess      *Session
	up        bool
	since     time.Time // when it came up or went away
	everUp    bool
	rtt, best time.Duration // the last and the least ping round trip
	lastErr   string
}

// PeerStatus is what this part knows of another.
type PeerStatus struct {
	Machine string `json:"machine"`
	Address string `json:"address"`
	// State is "up", "waiting" (never reached yet) or "gone".
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// RTTUS is the last control round trip, MinRTTUS the least; the underlay's one-way
	// delay is about half the least (OneWayUS).
	RTTUS    float64 `json:"rtt_us,omitempty"`
	MinRTTUS float64 `json:"min_rtt_us,omitempty"`
	OneWayUS float64 `json:"underlay_one_way_us,omitempty"`
	// ClockOffsetUS is its wall clock less ours as measured (0 when within the
	// measurement's uncertainty).
	ClockOffsetUS float64 `json:"clock_offset_us"`
	Error         string  `json:"error,omitempty"`
}

// Peers returns the state of every other part.
func (p *Part) Peers() []PeerStatus {
	var out []PeerStatus
	for _, m := range p.cfg.Topology.Machines {
		pe := p.peers[m.Name]
		if pe == nil {
			continue
		}
		pe.mu.Lock()
		st := PeerStatus{Machine: pe.name, Address: pe.host, State: "waiting", Since: pe.since, Error: pe.lastErr,
			RTTUS: us(pe.rtt), MinRTTUS: us(pe.best), OneWayUS: us(pe.best) / 2, ClockOffsetUS: float64(pe.offset.Load()) / 1e3}
		switch {
		case pe.up:
			st.State = "up"
		case pe.everUp:
			st.State = "gone"
		}
		pe.mu.Unlock()
		out = append(out, st)
	}
	return out
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// Timing of the control connections.
const (
	pingEvery = 100 * time.Millisecond
	// goneAfter is how long a peer may leave a ping unanswered before it counts as
	// gone and its tunnels go down.
	goneAfter   = time.Second
	redialEvery = 200 * time.Millisecond
	handshake   = 5 * time.Second
)

// keep keeps a connection to pe: it resolves pe's address, dials, authenticates, then
// pings it; when that fails the peer is gone (its tunnels go down) and keep dials again.
func (p *Part) keep(pe *peer) {
	for {
		err := p.session(pe)
		pe.mu.Lock()
		wasUp := pe.up
		if wasUp {
			pe.up, pe.since = false, time.Now()
		}
		if err != nil {
			pe.lastErr = err.Error()
		}
		pe.mu.Unlock()
		if wasUp {
			p.log.Warn("part gone", zap.String("machine", pe.name), zap.Error(err))
			p.setTunnels(pe.name, false)
		}
		select {
		case <-p.stop:
			return
		case <-time.After(redialEvery):
		}
	}
}

func (p *Part) session(pe *peer) error {
	ip, err := resolve(pe.host)
	if err != nil {
		return err
	}
	pe.addr.Store(ip)
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(ControlPort)), handshake)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(handshake))
	s, err := Dial(c, p.cfg.Secret, p.cfg.Lab, p.cfg.Machine)
	if err != nil {
		return err
	}
	if s.Peer != pe.name {
		return fmt.Errorf("tunnel: %s answers as machine %q, not %q", pe.host, s.Peer, pe.name)
	}
	pe.mu.Lock()
	pe.conn, pe.sess = c, s
	pe.mu.Unlock()
	defer func() { pe.mu.Lock(); pe.conn, pe.sess = nil, nil; pe.mu.Unlock() }()
	first := true
	for {
		if err := p.ping(pe); err != nil {
			return err
		}
		if first {
			first = false
			pe.mu.Lock()
			pe.up, pe.everUp, pe.since, pe.lastErr = true, true, time.Now(), ""
			pe.mu.Unlock()
			p.log.Info("part up", zap.String("machine", pe.name), zap.String("address", ip.String()))
			p.setTunnels(pe.name, true)
		}
		select {
		case <-p.stop:
			return nil
		case <-time.After(pingEvery):
		}
	}
}

// ping measures the round trip and the clock offset to pe (NTP's estimate: the
// offset is known within half the round trip, so one smaller than that is taken as 0).
func (p *Part) ping(pe *peer) error {
	t0 := time.Now()
	m, err := p.Request(pe.name, Message{Op: "ping", T0Ns: t0.UnixNano()}, goneAfter)
	if err != nil {
		return err
	}
	rtt := time.Since(t0)
	pe.mu.Lock()
	defer pe.mu.Unlock()
	pe.rtt = rtt
	if pe.best == 0 || rtt < pe.best {
		pe.best = rtt
		off := m.T1Ns - (t0.UnixNano() + rtt.Nanoseconds()/2)
		if off < rtt.Nanoseconds()/2 && -off < rtt.Nanoseconds()/2 {
			off = 0
		}
		pe.offset.Store(off)
	}
	return nil
}

// Request sends m to the part on machine name and returns its answer.
func (p *Part) Request(name string, m Message, timeout time.Duration) (Message, error) {
	pe := p.peers[name]
	if pe == nil {
		return Message{}, fmt.Errorf("tunnel: no part on machine %q", name)
	}
	pe.req.Lock()
	defer pe.req.Unlock()
	pe.mu.Lock()
	conn, sess := pe.conn, pe.sess
	pe.mu.Unlock()
	if sess == nil {
		return Message{}, fmt.Errorf("tunnel: part %s is not connected", name)
	}
	conn.SetDeadline(time.Now().Add(timeout))
	if err := sess.Send(m); err != nil {
		conn.Close() // a session out of step is of no further use
		return Message{}, err
	}
	r, err := sess.Receive()
	if err != nil {
		conn.Close()
	}
	if err != nil {
		return Message{}, err
	}
	if r.Error != "" {
		return r, fmt.Errorf("part %s: %s", name, r.Error)
	}
	return r, nil
}

// Connected lists the machines of the parts this one is connected to.
func (p *Part) Connected() []string {
	var out []string
	for _, m := range p.cfg.Topology.Machines {
		if pe := p.peers[m.Name]; pe != nil {
			pe.mu.Lock()
			if pe.up {
				out = append(out, pe.name)
			}
			pe.mu.Unlock()
		}
	}
	return out
}

func (p *Part) setTunnels(peer string, up bool) {
	for _, t := range p.tunnels {
		if t.Peer == peer {
			t.setUp(up)
		}
	}
}

func resolve(host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), handshake)
	defer cancel()
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(as) == 0 {
		return netip.Addr{}, fmt.Errorf("tunnel: resolve %s: %v", host, err)
	}
	return as[0].Unmap(), nil
}

// maxControlConns bounds the control connections served at once: peers need one each.
const maxControlConns = 64

// accept serves the control connections other parts open.
func (p *Part) accept() {
	sem := make(chan struct{}, maxControlConns)
	for {
		c, err := p.ctl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close()
			p.Refused.Add(1)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-sem }()
			p.serve(c)
		}()
	}
}

func (p *Part) serve(c net.Conn) {
	defer c.Close()
	done := make(chan struct{})
	defer close(done)
	go func() { // Close ends served connections too
		select {
		case <-p.stop:
			c.Close()
		case <-done:
		}
	}()
	c.SetDeadline(time.Now().Add(handshake))
	s, err := Accept(c, p.cfg.Secret, p.cfg.Lab, p.cfg.Machine)
	if err != nil || p.peers[s.Peer] == nil {
		p.Refused.Add(1)
		p.log.Warn("control connection refused", zap.Stringer("from", c.RemoteAddr()), zap.Error(err))
		return
	}
	for {
		c.SetDeadline(time.Now().Add(2 * goneAfter))
		m, err := s.Receive()
		if err != nil {
			return
		}
		if m.Op == "exec" {
			p.serveExec(c, s, m.Body)
			return
		}
		var r Message
		if m.Op == "ping" {
			r = Message{Op: "pong", T0Ns: m.T0Ns, T1Ns: time.Now().UnixNano()}
		} else if p.cfg.Handle == nil {
			r.Error = fmt.Sprintf("unknown op %q", m.Op)
		} else if body, err := p.cfg.Handle(m.Op, m.Body); err != nil {
			r.Error = err.Error()
		} else {
			r.Body = body
		}
		c.SetDeadline(time.Now().Add(handshake))
		if err := s.Send(r); err != nil {
			return
		}
	}
}
