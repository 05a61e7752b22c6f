// Package service is the verbs service of a soft-RNIC: it serves the device to
// application processes in the host's network namespace, over an abstract Unix socket
// (SOCK_SEQPACKET) that exists only in that namespace, as a netns-exclusive RDMA device
// is visible only there. Package rnic/verbs is the client; package rnic/service/wire
// is the protocol; docs/verbs-service.md describes both.
//
// Control calls (create and destroy objects, modify QPs, queries) are request/response
// datagrams; each runs on the device's loop through one Device.Do. The data path never
// crosses the socket: work requests and completions travel through rings in shared
// memory, memory regions are the application's own memfd pages, and the device's loop
// itself polls the clients' doorbell pages while it is awake (clock.Watch): a post costs
// the client no system call then, and one eventfd write, which wakes the loop directly,
// while the loop sleeps.
//
// A connection's objects belong to it: when the client closes the socket or dies,
// however it dies, the service destroys them all (QPs first, then SRQs, address
// handles, CQs, memory regions, PDs, completion channels) and unmaps their memory.
package service

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocelab/rocelab/rnic/ibv"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// The environment a verbs client reads to find its service (ibv's).
const (
	EnvSocket = ibv.EnvSocket
	EnvLab    = ibv.EnvLab
	EnvHost   = ibv.EnvHost
)

// Address is the abstract socket address of host's verbs service in lab (ibv.Address).
func Address(lab, host string) string { return ibv.Address(lab, host) }

// MaxAddress is the longest socket address Linux accepts: sun_path's 108 bytes, less
// the abstract namespace's leading NUL.
const MaxAddress = 107

// CheckAddress says whether host's service address in lab fits a socket address, so
// that a lab can refuse names that are too long before it creates anything.
func CheckAddress(lab, host string) error {
	if a := Address(lab, host); len(a)-1 > MaxAddress {
		return fmt.Errorf("lab %q with host %q: the verbs socket address %q is %d bytes, more than a socket address holds (%d): shorten the lab or host name (together at most %d characters)",
			lab, host, a, len(a)-1, MaxAddress, MaxAddress-len(Address("", ""))+1)
	}
	return nil
}

// Option configures a Server.
type Option func(*Server)

// WithAllowedUIDs replaces the user IDs whose processes may connect (checked with
// SO_PEERCRED). The default is the lab process's own uid and root.
func WithAllowedUIDs(uids ...uint32) Option {
	return func(s *Server) {
		s.allowed = map[uint32]bool{}
		for _, u := range uids {
			s.allowed[u] = true
		}
	}
}

// WithConnLimits replaces the connection limits: at most perUID connections from one
// user and total in all (defaults DefaultConnsPerUID and DefaultConns). A connection over
// a limit is told why and closed at accept, before anything is read from it.
func WithConnLimits(perUID, total int) Option {
	return func(s *Server) { s.perUID, s.maxConns = perUID, total }
}

// WithHandshakeTimeout replaces how long a new connection may take to say HELLO
// (default DefaultHandshakeTimeout); a silent one is closed then.
func WithHandshakeTimeout(d time.Duration) Option {
	return func(s *Server) { s.handshake = d }
}

// WithLogf sets where the service reports rejected peers, protocol errors and
// reclaims (default: nowhere).
func WithLogf(logf func(format string, args ...any)) Option {
	return func(s *Server) { s.logf = logf }
}

// WithReclaimHook calls fn after the service has destroyed the objects of a client
// that went away: its pid and how many objects it held.
func WithReclaimHook(fn func(pid int32, objects int)) Option {
	return func(s *Server) { s.onReclaim = fn }
}

// WithBudget makes the server charge what its clients make the lab process hold to b,
// shared with the lab's other hosts' servers, as the host of the device's name. The
// default is a budget of the process's own for one host (ProcessBudget(1)).
func WithBudget(b *Budget) Option {
	return func(s *Server) { s.budget = b }
}

// Connection defaults. A host's applications open one connection per device context;
// thousands per user is far beyond any real job and well inside the lab's descriptors.
const (
	DefaultConnsPerUID      = 1024
	DefaultConns            = 4096
	DefaultHandshakeTimeout = 5 * time.Second
)

// Server is a running verbs service.
type Server struct {
	dev       *rnic.Device
	ln        *net.UnixListener
	addr      string
	allowed   map[uint32]bool
	logf      func(string, ...any)
	onReclaim func(int32, int)
	perUID    int
	maxConns  int
	handshake time.Duration
	budget    *Budget
	host      string

	mu     sync.Mutex
	conns  map[*conn]struct{}
	byUID  map[uint32]int // open connections per user, under mu
	closed bool
	wg     sync.WaitGroup

	channel *rnic.CompChannel // on the loop: the one channel every service CQ is bound to

	// Doorbells: every client writes bellFD (an eventfd the device's loop sleeps on, see
	// clock.Watch) when it posts while the loop sleeps; the loop polls the doorbell
	// pages of active, the connections that said HELLO (loop-owned).
	bellFD  int
	active  []*conn
	unwatch func()

	ports *os.File // the namespace's ip_local_port_range, for the CM agent (cm.go)

	clients, objects, rejected, limited, timedOut atomic.Int64
}

// Listen creates the service's socket at addr (see Address) and serves dev on it.
// The socket is created before Listen returns, in the calling thread's network
// namespace: a lab calls Listen inside the host's namespace (netns.Do), and the socket
// stays there whichever thread later accepts on it. Close the server before stopping
// the device's clock: reclaiming runs on the device's loop.
func Listen(dev *rnic.Device, addr string, opts ...Option) (*Server, error) {
	if !strings.HasPrefix(addr, "@") {
		return nil, fmt.Errorf("verbs service: address %q is not abstract (must start with @)", addr)
	}
	s := &Server{dev: dev, addr: addr, conns: map[*conn]struct{}{}, byUID: map[uint32]int{}, logf: func(string, ...any) {},
		allowed: map[uint32]bool{uint32(os.Getuid()): true, 0: true},
		perUID:  DefaultConnsPerUID, maxConns: DefaultConns, handshake: DefaultHandshakeTimeout}
	for _, o := range opts {
		o(s)
	}
	if s.budget == nil {
		s.budget = ProcessBudget(1)
	}
	s.host = dev.Name()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("verbs service on %s: %w", dev.Name(), err)
	}
	s.bellFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("verbs service on %s: doorbell eventfd: %w", dev.Name(), err)
	}
	s.ports = openPortRange()
	// Registered on the loop, before any connection can be (Do runs calls in order).
	dev.Do(func() {
		dev.SetAsyncHandler(s.asyncEvent)
		if s.ports != nil {
			dev.SetLocalPortRange(s.localPortRange)
		}
		unwatch, err := clock.Watch(dev.Loop(), s.bellFD, (*watcher)(s))
		if err != nil {
			s.logf("verbs service %s: the device's loop cannot watch doorbells: %v", addr, err)
			return
		}
		s.unwatch = unwatch
	})
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// watcher is the Server seen by the device's loop (clock.Watcher): it polls the
// doorbell pages of the connections and keeps their Awake words.
type watcher Server

// Poll scans the rings of every connection whose client set Pending.
func (w *watcher) Poll() bool {
	found := false
	for _, c := range w.active {
		if wire.Load(wire.Pending(c.page)) != 0 {
			c.scan()
			found = true
		}
	}
	return found
}

// Sleep publishes whether the loop is awake: posts ring the eventfd only when it is not.
func (w *watcher) Sleep(asleep bool) {
	v := uint32(1)
	if asleep {
		v = 0
	}
	for _, c := range w.active {
		wire.Store(wire.Awake(c.page), v)
	}
}

// deactivate stops polling c's doorbell page, on the loop.
func (s *Server) deactivate(c *conn) {
	if i := slices.Index(s.active, c); i >= 0 {
		s.active = slices.Delete(s.active, i, i+1)
	}
}

// Addr returns the service's address.
func (s *Server) Addr() string { return s.addr }

// Stats counts the service's clients and objects.
type Stats struct {
	Clients   int `json:"clients"`    // connected clients (past HELLO)
	Conns     int `json:"conns"`      // open connections, clients and those still in their handshake
	Objects   int `json:"objects"`    // objects (PDs, MRs, CQs, QPs, ...) they hold
	Rejected  int `json:"rejected"`   // connections refused by the SO_PEERCRED policy
	OverLimit int `json:"over_limit"` // connections refused by the per-user or total limit
	TimedOut  int `json:"timed_out"`  // connections closed for a silent handshake
	// Budget is what the host's clients make the lab process hold against the host's
	// share, each client's and the lab's (docs/verbs-service.md, Budgets).
	Budget *BudgetStatus `json:"budget,omitempty"`
}

// Stats returns the service's counters. Safe from any goroutine.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	conns := len(s.conns)
	s.mu.Unlock()
	return Stats{Clients: int(s.clients.Load()), Conns: conns, Objects: int(s.objects.Load()), Rejected: int(s.rejected.Load()),
		OverLimit: int(s.limited.Load()), TimedOut: int(s.timedOut.Load()), Budget: s.budget.status(s.host)}
}

// Close stops accepting, disconnects every client, reclaims their objects and waits
// until all is done. The device's loop must still be running.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.sock.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.onLoop(func() {
		s.dev.SetAsyncHandler(nil)
		s.dev.SetLocalPortRange(nil)
		if s.unwatch != nil {
			s.unwatch()
			s.unwatch = nil
		}
	})
	unix.Close(s.bellFD)
	if s.ports != nil {
		s.ports.Close()
	}
	return err
}

// accept admits connections. Everything that can refuse one happens here, before a
// byte is read or a goroutine started: the SO_PEERCRED policy, then the per-user and
// total limits. When the process is out of descriptors (EMFILE, ENFILE) it backs off,
// as net/http's server does, instead of spinning on a listener that stays readable.
func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		sock, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
				s.logf("verbs service %s: accept: %v (backing off)", s.addr, err)
			} else if backoff *= 2; backoff > time.Second {
				backoff = time.Second
			}
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		cred, err := peerCred(sock)
		if err != nil {
			s.logf("verbs service %s: SO_PEERCRED: %v", s.addr, err)
			sock.Close()
			continue
		}
		if !s.allowed[cred.Uid] {
			s.rejected.Add(1)
			s.refuse(sock, cred, fmt.Errorf("%w: uid %d may not use the RNIC %s (SO_PEERCRED; allowed: the lab's uid and root)",
				wire.ErrPermission, cred.Uid, s.dev.Name()))
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			sock.Close()
			return
		}
		if over := s.overLimit(cred.Uid); over != "" {
			s.mu.Unlock()
			s.limited.Add(1)
			s.refuse(sock, cred, fmt.Errorf("%w: %s", rnic.ErrNoMemory, over))
			continue
		}
		c := &conn{s: s, sock: sock, pid: cred.Pid, uid: cred.Uid, objs: map[uint32]any{}, costs: map[uint32]Usage{}}
		if err := s.budget.charge(s.host, &c.used, c.pid, connCost()); err != nil {
			s.mu.Unlock()
			s.limited.Add(1)
			s.refuse(sock, cred, err)
			continue
		}
		s.conns[c] = struct{}{}
		s.byUID[cred.Uid]++
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// overLimit says which limit a new connection from uid would pass, or "". Under mu.
func (s *Server) overLimit(uid uint32) string {
	switch {
	case len(s.conns) >= s.maxConns:
		return fmt.Sprintf("the verbs service of %s has %d connections, its limit", s.dev.Name(), s.maxConns)
	case s.byUID[uid] >= s.perUID:
		return fmt.Sprintf("uid %d has %d connections to the verbs service of %s, its limit", uid, s.perUID, s.dev.Name())
	}
	return ""
}

// refuse tells a connection why it is refused and closes it. The message goes out
// before anything is read (the client reads it as the answer to its HELLO); a fresh
// socket's buffer has room for it, so the send does not block.
func (s *Server) refuse(sock *net.UnixConn, cred *unix.Ucred, why error) {
	if n := s.rejected.Load() + s.limited.Load(); n&(n-1) == 0 { // 1st, 2nd, 4th, ... refusal
		s.logf("verbs service %s: refused pid %d uid %d: %v (%d refused so far)", s.addr, cred.Pid, cred.Uid, why, n)
	}
	wire.Send(sock, wire.AppendError(nil, wire.OpHello, why))
	sock.Close()
}

// peerCred reads the connecting process's credentials (SO_PEERCRED): taken by the
// kernel at connect time, so a client cannot claim another identity.
func peerCred(sock *net.UnixConn) (*unix.Ucred, error) {
	raw, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// onLoop runs fn on the device's loop and waits for it.
func (s *Server) onLoop(fn func()) {
	done := make(chan struct{})
	s.dev.Do(func() {
		defer close(done)
		fn()
	})
	<-done
}
