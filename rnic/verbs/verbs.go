// Package verbs is the client of a soft-RNIC's verbs service (package rnic/service):
// it gives an application process in a lab host's network namespace the same verbs
// interface as package rnic, with the same names and the same types (qp.SendWR,
// qp.RecvWR, qp.WC, qp.Attr, ibv.QPCap, ibv.AHAttr, ...).
//
//	ctx, _ := verbs.Open("")                 // $ROCELAB_VERBS_SOCKET, or the lab's host
//	pd, _ := ctx.AllocPD()
//	mr, _ := ctx.RegMR(pd, 1<<20, qp.AccessLocalWrite|qp.AccessRemoteWrite)
//	cq, _ := ctx.CreateCQ(256, nil)
//	x, _ := ctx.CreateQP(pd, verbs.QPInitAttr{Type: qp.RC, SendCQ: cq, RecvCQ: cq, Cap: ...})
//	ctx.ModifyQP(x, &attr, mask)             // INIT, RTR, RTS
//	x.PostSend(&wr)                          // a write into shared memory + a doorbell
//	n, _ := cq.PollCQ(wcs)                   // a read of shared memory
//
// Memory regions are the process's own pages (a sealed memfd mapped here and in the lab
// process): an RDMA WRITE lands in MR.Bytes directly. Work requests and completions go
// through rings in shared memory; PostSend, PostRecv, PostSRQRecv, PollCQ and
// ReqNotifyCQ make no control call and do not allocate. Everything else is one
// request/response on the service's socket.
//
// Differences from ibverbs that follow from the rings: a work request the device
// refuses after PostSend returned (a bad AH handle, an SGE the QP cannot take, a QP not
// in RTS) completes with status LOC_QP_OP_ERR instead of failing the post; and, as in
// package rnic, ReqNotifyCQ raises the event at once if completions are already queued.
//
// Concurrency: control calls are safe from any goroutine (they are serialized on the
// connection). Each QP, SRQ and CQ may be used by one goroutine at a time for posting or
// polling; different objects may be used concurrently. GetCQEvent is safe from any
// goroutine.
package verbs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
	"github.com/rocelab/rocelab/rnic/service/wire"
	"github.com/rocelab/rocelab/roce"
)

// Errors of the client besides the rnic's (ibv.ErrInvalidArgument, ...), which the
// service's errors wrap as the device returned them.
var (
	// ErrPermission: the service refused the process (SO_PEERCRED policy).
	ErrPermission = wire.ErrPermission
	// ErrProtocol: a malformed message or a version mismatch.
	ErrProtocol = wire.ErrProtocol
	// ErrNoService: no address was given and the environment names none.
	ErrNoService = errors.New("no verbs service address")
)

// DefaultAddress returns the service address from the environment: $ROCELAB_VERBS_SOCKET,
// else the address of host $ROCELAB_HOST in lab $ROCELAB_LAB, which `rocelab exec`
// sets for the processes it starts in a host.
func DefaultAddress() (string, error) {
	if a := os.Getenv(ibv.EnvSocket); a != "" {
		return a, nil
	}
	lab, host := os.Getenv(ibv.EnvLab), os.Getenv(ibv.EnvHost)
	if lab == "" || host == "" {
		return "", fmt.Errorf("%w: set %s, or run inside a lab host (%s and %s)", ErrNoService, ibv.EnvSocket, ibv.EnvLab, ibv.EnvHost)
	}
	return ibv.Address(lab, host), nil
}

// Context is an open device (ibv_context): one connection to the verbs service.
type Context struct {
	sock *net.UnixConn
	addr string

	mu   sync.Mutex // one control call at a time
	seq  uint32
	buf  []byte
	oob  []byte
	req  []byte
	dead bool

	bellFD int
	page   []byte

	ahMu sync.RWMutex
	ahs  map[*qp.AddressVector]uint32

	closed atomic.Bool
}

// Open connects to the verbs service at addr ("" = DefaultAddress) (ibv_open_device).
func Open(addr string) (*Context, error) {
	if addr == "" {
		var err error
		if addr, err = DefaultAddress(); err != nil {
			return nil, err
		}
	}
	sock, err := dial(addr)
	if err != nil {
		return nil, fmt.Errorf("verbs: connect to %s: %w", addr, err)
	}
	c := &Context{sock: sock, addr: addr, buf: make([]byte, wire.MaxMessage), oob: make([]byte, wire.OOBSpace),
		ahs: map[*qp.AddressVector]uint32{}, bellFD: -1}
	var hr wire.HelloResp
	fds, err := c.call(wire.OpHello, &wire.Hello{MinVersion: wire.Version, MaxVersion: wire.Version}, &hr)
	if err == nil && len(fds) != 2 {
		wire.CloseFDs(fds)
		err = fmt.Errorf("%w: HELLO carried %d descriptors, want 2", ErrProtocol, len(fds))
	}
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("verbs: open %s: %w", addr, err)
	}
	c.bellFD = fds[0]
	c.page, err = wire.Map(fds[1], wire.PageSize)
	unix.Close(fds[1])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("verbs: open %s: doorbell page: %w", addr, err)
	}
	return c, nil
}

// dialPatience bounds how long Open waits for room in the service's listen backlog.
const dialPatience = 10 * time.Second

// dial connects to the service as a blocking connect(2) does: Go's non-blocking connect
// fails with EAGAIN while the listen backlog is full (a burst of other clients, or a
// flood the service is busy refusing), where a C client would wait; so wait, briefly.
func dial(addr string) (*net.UnixConn, error) {
	deadline := time.Now().Add(dialPatience)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
		if err == nil || !errors.Is(err, unix.EAGAIN) || time.Now().After(deadline) {
			return sock, err
		}
		time.Sleep(pause)
	}
}

// Close closes the device (ibv_close_device). The service destroys every object the
// context still holds; their memory stays mapped in this process until it exits, so a
// stray access after Close cannot crash it, but no work completes any more.
func (c *Context) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.mu.Lock()
	err := c.sock.Close()
	c.dead = true
	c.mu.Unlock()
	if c.bellFD >= 0 {
		unix.Close(c.bellFD)
	}
	return err
}

// call makes one control call: req (a wire body or nil) and fds out, the response
// body decoded into resp (or nil); it returns the descriptors the response carried.
func (c *Context) call(op wire.Op, req any, resp any, fds ...int) ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, fmt.Errorf("verbs %v: %w", op, ibv.ErrClosed)
	}
	c.seq++
	c.req = wire.AppendRequest(c.req[:0], op, c.seq, req)
	if err := wire.Send(c.sock, c.req, fds...); err != nil {
		c.dead = true
		// A service that refuses a connection says why, then closes it, before it reads
		// anything: the reason may be waiting behind the broken pipe.
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			if msg, got, rerr := c.recv(); rerr == nil {
				wire.CloseFDs(got)
				if perr := wire.ParseResponse(msg, op, resp); perr != nil {
					return nil, perr
				}
			}
		}
		return nil, fmt.Errorf("verbs %v: service %s: %w (%w)", op, c.addr, ibv.ErrClosed, err)
	}
	msg, got, err := c.recv()
	if err != nil {
		c.dead = true
		return nil, fmt.Errorf("verbs %v: service %s: %w (%w)", op, c.addr, ibv.ErrClosed, err)
	}
	if err := wire.ParseResponse(msg, op, resp); err != nil {
		wire.CloseFDs(got)
		return nil, err
	}
	return got, nil
}

// recv reads the service's answer. A refusing service closes without reading our
// request; Linux reports that as a reset before the answer it queued, which the next
// read returns.
func (c *Context) recv() ([]byte, []int, error) {
	msg, fds, err := wire.Recv(c.sock, c.buf, c.oob)
	if errors.Is(err, unix.ECONNRESET) {
		msg, fds, err = wire.Recv(c.sock, c.buf, c.oob)
	}
	return msg, fds, err
}

// callNoFD is call for responses that carry no descriptor.
func (c *Context) callNoFD(op wire.Op, req, resp any, fds ...int) error {
	got, err := c.call(op, req, resp, fds...)
	if len(got) > 0 {
		wire.CloseFDs(got)
		return fmt.Errorf("%w: %v response carried %d descriptors", ErrProtocol, op, len(got))
	}
	return err
}

// callRing is call for responses that carry one ring memfd of size bytes, mapped.
func (c *Context) callRing(op wire.Op, req, resp any, size func() uint64) ([]byte, error) {
	got, err := c.call(op, req, resp)
	if err != nil {
		return nil, err
	}
	defer wire.CloseFDs(got)
	if len(got) != 1 {
		return nil, fmt.Errorf("%w: %v response carried %d descriptors, want 1", ErrProtocol, op, len(got))
	}
	mem, err := wire.Map(got[0], size())
	if err != nil {
		return nil, fmt.Errorf("verbs %v: map ring: %w", op, err)
	}
	return mem, nil
}

var one = [8]byte{1}

// doorbell tells the service that rings have new WQEs. The device's loop polls the
// doorbell page while it is awake, so the eventfd (which wakes it) is written only when
// the service has not yet seen an earlier post (Pending was 0) and the loop said it
// sleeps (Awake is 0); see wire.Pending.
func (c *Context) doorbell() {
	if atomic.SwapUint32(wire.Pending(c.page), 1) == 0 && atomic.LoadUint32(wire.Awake(c.page)) == 0 {
		unix.Write(c.bellFD, one[:])
	}
}

// QueryDevice reports the device's limits (ibv_query_device).
func (c *Context) QueryDevice() (ibv.DeviceAttr, error) {
	var r wire.DeviceAttr
	if err := c.callNoFD(wire.OpQueryDevice, nil, &r); err != nil {
		return ibv.DeviceAttr{}, err
	}
	return ibv.DeviceAttr{FWVer: wire.GetString(r.FWVer[:]), NodeGUID: r.NodeGUID, MaxQP: int(r.MaxQP),
		MaxQPWR: int(r.MaxQPWR), MaxSGE: int(r.MaxSGE), MaxCQE: int(r.MaxCQE), MaxQPRdAtom: int(r.MaxQPRdAtom),
		MaxQPInitRdAtm: int(r.MaxQPInitRdAtom), PhysPortCnt: int(r.PhysPortCnt)}, nil
}

// QueryPort reports port port (ibv_query_port); the device has port 1.
func (c *Context) QueryPort(port uint8) (ibv.PortAttr, error) {
	var r wire.PortAttr
	if err := c.callNoFD(wire.OpQueryPort, &wire.QueryPort{Port: port}, &r); err != nil {
		return ibv.PortAttr{}, err
	}
	return ibv.PortAttr{State: wire.GetString(r.State[:]), MaxMTU: roce.MTU(r.MaxMTU), ActiveMTU: roce.MTU(r.ActiveMTU),
		GIDTableLen: int(r.GIDTableLen), Rate: r.Rate, LinkLayer: wire.GetString(r.LinkLayer[:])}, nil
}

// QueryGID returns GID index of port 1 (ibv_query_gid).
func (c *Context) QueryGID(index int) (roce.GID, error) {
	if index < 0 {
		return roce.GID{}, fmt.Errorf("verbs: %w: GID index %d", ibv.ErrInvalidArgument, index)
	}
	var r wire.GID
	err := c.callNoFD(wire.OpQueryGID, &wire.QueryGID{Index: uint32(index)}, &r)
	return roce.GID(r.GID), err
}

// PD is a protection domain (ibv_pd).
type PD struct {
	c *Context
	h uint32
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	var r wire.Handle
	if err := c.callNoFD(wire.OpAllocPD, nil, &r); err != nil {
		return nil, err
	}
	return &PD{c: c, h: r.Handle}, nil
}

// owns checks that pd and the contexts of other objects are c: handles are per
// connection, so another context's object would name an unrelated one of this.
func (c *Context) owns(pd *PD, others ...*Context) error {
	if pd == nil || pd.c != c {
		return fmt.Errorf("verbs: %w: the PD belongs to another context", ibv.ErrInvalidArgument)
	}
	for _, o := range others {
		if o != c {
			return fmt.Errorf("verbs: %w: an object belongs to another context", ibv.ErrInvalidArgument)
		}
	}
	return nil
}

// DeallocPD frees a protection domain (ibv_dealloc_pd); ErrBusy while objects use it.
func (c *Context) DeallocPD(pd *PD) error {
	return c.callNoFD(wire.OpDeallocPD, &wire.Handle{Handle: pd.h}, nil)
}

// MR is a registered memory region (ibv_mr) in this process's memory.
type MR struct {
	h, lkey, rkey uint32
	mem           []byte
	access        qp.Access
}

// LKey returns the local key (ibv_mr.lkey).
func (m *MR) LKey() uint32 { return m.lkey }

// RKey returns the remote key (ibv_mr.rkey).
func (m *MR) RKey() uint32 { return m.rkey }

// Addr returns the address of the region's first byte, as work requests name it: its
// address in this process, as with ibv_reg_mr.
func (m *MR) Addr() uint64 { return uint64(uintptr(unsafePointer(m.mem))) }

// Length returns the region's length in bytes.
func (m *MR) Length() int { return len(m.mem) }

// Access returns the region's access flags.
func (m *MR) Access() qp.Access { return m.access }

// Bytes returns the region's memory, shared with the RNIC: the device writes it while
// QPs are active, so read what a completion covers after polling that completion.
func (m *MR) Bytes() []byte { return m.mem }

// RegMR allocates length bytes of shared memory and registers them (ibv_reg_mr over a
// buffer the library allocates; the pages are a sealed memfd the RNIC maps too).
func (c *Context) RegMR(pd *PD, length int, access qp.Access) (*MR, error) {
	if length <= 0 {
		return nil, fmt.Errorf("verbs: %w: MR length %d: must be positive", ibv.ErrInvalidArgument, length)
	}
	if err := c.owns(pd); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("rocelab-verbs-mr", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("verbs: %w: memfd_create: %v", ibv.ErrNoMemory, err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(length)); err != nil {
		return nil, fmt.Errorf("verbs: %w: %d-byte MR: %v", ibv.ErrNoMemory, length, err)
	}
	// Sealed so that the lab process may map it without fearing SIGBUS.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		return nil, fmt.Errorf("verbs: %w: seal MR memfd: %v", ibv.ErrNoMemory, err)
	}
	mem, err := wire.Map(fd, uint64(length))
	if err != nil {
		return nil, fmt.Errorf("verbs: %w: %v", ibv.ErrNoMemory, err)
	}
	m := &MR{mem: mem, access: access}
	var r wire.MRResp
	if err := c.callNoFD(wire.OpRegMR, &wire.RegMR{PD: pd.h, Access: uint32(access), Length: uint64(length), Addr: m.Addr()}, &r, fd); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	m.h, m.lkey, m.rkey = r.Handle, r.LKey, r.RKey
	return m, nil
}

// DeregMR deregisters a memory region (ibv_dereg_mr) and unmaps it here.
func (c *Context) DeregMR(m *MR) error {
	if err := c.callNoFD(wire.OpDeregMR, &wire.Handle{Handle: m.h}, nil); err != nil {
		return err
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	return err
}

// AH is an address handle (ibv_ah).
type AH struct {
	h  uint32
	av qp.AddressVector
}

// AV returns the handle's address vector, to put in a UD work request (SendWR.AH),
// as with package rnic. It stands for the handle: only its pointer is looked at.
func (ah *AH) AV() *qp.AddressVector { return &ah.av }

// CreateAH creates an address handle (ibv_create_ah). It fails with ErrUnresolved while
// the destination's MAC is unknown (the device asks the network meanwhile).
func (c *Context) CreateAH(pd *PD, attr ibv.AHAttr) (*AH, error) {
	if attr.SGIDIndex < 0 {
		return nil, fmt.Errorf("verbs: %w: SGID index %d", ibv.ErrInvalidArgument, attr.SGIDIndex)
	}
	if err := c.owns(pd); err != nil {
		return nil, err
	}
	var r wire.Handle
	if err := c.callNoFD(wire.OpCreateAH, &wire.CreateAH{PD: pd.h, SGIDIndex: uint32(attr.SGIDIndex), DGID: attr.DGID,
		TrafficClass: attr.TrafficClass, HopLimit: attr.HopLimit, FlowLabel: attr.FlowLabel}, &r); err != nil {
		return nil, err
	}
	ah := &AH{h: r.Handle, av: qp.AddressVector{DGID: attr.DGID, TrafficClass: attr.TrafficClass,
		HopLimit: attr.HopLimit, FlowLabel: attr.FlowLabel}}
	c.ahMu.Lock()
	c.ahs[&ah.av] = ah.h
	c.ahMu.Unlock()
	return ah, nil
}

// DestroyAH destroys an address handle (ibv_destroy_ah).
func (c *Context) DestroyAH(ah *AH) error {
	c.ahMu.Lock()
	delete(c.ahs, &ah.av)
	c.ahMu.Unlock()
	return c.callNoFD(wire.OpDestroyAH, &wire.Handle{Handle: ah.h}, nil)
}

func (c *Context) ahHandle(av *qp.AddressVector) (uint32, bool) {
	c.ahMu.RLock()
	h, ok := c.ahs[av]
	c.ahMu.RUnlock()
	return h, ok
}
