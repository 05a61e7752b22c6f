package service

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// realDevice opens a soft-RNIC on a running real-time clock, as a lab's: the service
// under test runs its loop, accept and connection goroutines for real.
func realDevice(tb testing.TB) *rnic.Device {
	tb.Helper()
	r := clock.NewReal(clock.RealOptions{})
	a, _, err := link.New(link.Config{Rate: 100e9, MTU: 1500})
	if err != nil {
		tb.Fatal(err)
	}
	d, err := rnic.Open(rnic.Config{Name: "h1", MAC: [6]byte{2, 0, 0, 0, 0, 1}, GIDs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		Loop: r.NewLoop("h1"), Link: a, Pool: link.NewPool(1518), CC: rnic.CC{Mode: rnic.ModeNone}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return d
}

// fdCount is how many descriptors this process holds.
func fdCount(tb testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// memfdMappings is how many of this process's mappings are of a memfd: the service's
// (rings, doorbell pages, clients' MRs) and the test client's. The Go runtime's own
// mappings come and go with its heap and are not the service's to account for.
func memfdMappings(tb testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Count(b, []byte("/memfd:"))
}

// passable makes a descriptor of kind to send: a sealed memfd, an eventfd, a pipe's end
// or a socket, so that every call sees descriptors of the right and the wrong type.
func passable(tb testing.TB, kind uint8) int {
	switch kind % 4 {
	case 0:
		fd, mem, err := wire.SealedMemfd("fuzz-mr", 1<<16)
		if err != nil {
			tb.Fatal(err)
		}
		unix.Munmap(mem)
		return fd
	case 1:
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			tb.Fatal(err)
		}
		return fd
	case 2:
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			tb.Fatal(err)
		}
		unix.Close(p[0])
		return p[1]
	default:
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			tb.Fatal(err)
		}
		return fd
	}
}

// exchange sends msg with nfds descriptors of kind and reads the answer (nil at the
// service's end of the connection). The descriptors of both are closed: they are the
// test process's, as the service's are.
func exchange(tb testing.TB, c *net.UnixConn, msg []byte, nfds, kind uint8) []byte {
	tb.Helper()
	var fds []int
	for i := range nfds {
		fds = append(fds, passable(tb, kind+i))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	err := sendmsg(c, msg, oob)
	wire.CloseFDs(fds)
	if err != nil {
		return nil // the service closed the connection: a refused handshake
	}
	// A bound that only a hung service reaches (every answer is immediate).
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf, roob := make([]byte, wire.MaxMessage), make([]byte, unix.CmsgSpace(4*wire.MaxFDs))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, roob)
	if oobn > 0 {
		scms, _ := unix.ParseSocketControlMessage(roob[:oobn])
		for i := range scms {
			got, _ := unix.ParseUnixRights(&scms[i])
			wire.CloseFDs(got)
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Fatalf("the service did not answer a %d-byte message with %d descriptors", len(msg), nfds)
	}
	if err != nil {
		return nil
	}
	return buf[:n]
}

// sendmsg sends msg with oob as one datagram, zero-length too: Go's own send paths
// (syscall.SendmsgN, so WriteMsgUnix) add a byte to an empty message with ancillary
// data on a stream or seqpacket socket, which a C client does not.
func sendmsg(c *net.UnixConn, msg, oob []byte) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Write(func(fd uintptr) bool {
		var h unix.Msghdr
		var iov unix.Iovec
		if len(msg) > 0 {
			iov.Base = &msg[0]
			iov.SetLen(len(msg))
			h.Iov, h.Iovlen = &iov, 1
		}
		if len(oob) > 0 {
			h.Control = &oob[0]
			h.SetControllen(len(oob))
		}
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&h)), 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			serr = e
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

// FuzzVerbsSocket sends the verbs service (real socket, real server) one message of
// any type and length, zero included, carrying any number of descriptors of any type,
// after a client that said HELLO registered an MR and created a CQ (or as the first
// message), and checks that once the client left and the server closed, the process
// holds as many descriptors and memfd mappings as before: nothing a message carried
// or made the service map outlives it.
func FuzzVerbsSocket(f *testing.F) {
	ops := []uint16{0, 99, 0xffff}
	for op := range uint16(0x50) {
		if int(op) < len(handlers) && (handlers[op].run != nil || handlers[op].withFD != nil) || op == uint16(wire.OpHello) {
			ops = append(ops, op)
		}
	}
	for _, op := range ops {
		for _, n := range []int{0, 8, 32} {
			f.Add(op, make([]byte, n), false, uint8(len(ops)+n)%3, uint8(op), op%2 == 0)
		}
	}
	f.Add(uint16(0), []byte{}, true, uint8(2), uint8(0), true)  // the zero-length message with two memfds
	f.Add(uint16(0), []byte{}, true, uint8(2), uint8(1), false) // ... as the first message
	f.Add(uint16(0), []byte{1}, true, uint8(3), uint8(0), true) // more descriptors than a message carries

	d := realDevice(f)
	addr := fmt.Sprintf("@rocelab-test/%d/fuzz", os.Getpid())
	// Warm up: the runtime's poller and the device's first objects are not a leak.
	if s, err := Listen(d, addr); err != nil {
		f.Fatal(err)
	} else {
		s.Close()
	}
	f.Fuzz(func(t *testing.T, op uint16, body []byte, raw bool, nfds, kind uint8, hello bool) {
		fds0, maps0 := fdCount(t), memfdMappings(t)
		s, err := Listen(d, addr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: addr, Net: "unixpacket"})
		if err != nil {
			s.Close()
			t.Fatal(err)
		}
		if hello {
			prepare(t, c)
		}
		msg := body
		if !raw {
			msg = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, wire.Version), op)
			msg = append(binary.LittleEndian.AppendUint32(msg, 7), body...)
		}
		exchange(t, c, msg, nfds%4, kind)
		c.Close()
		s.Close() // returns once every connection is gone and reclaimed
		if used := s.Stats().Budget.LabUse; used != (Usage{}) {
			t.Errorf("op %#x: the budget still charges %+v once every client is gone", op, used)
		}
		if fds, maps := fdCount(t), memfdMappings(t); fds != fds0 || maps != maps0 {
			t.Errorf("op %#x, %d-byte message (raw %v), %d descriptors of kind %d, hello %v: descriptors %d → %d, memfd mappings %d → %d",
				op, len(msg), raw, nfds%4, kind%4, hello, fds0, fds, maps0, maps)
		}
	})
}

// prepare says HELLO and makes the service hold a PD (handle 1), an MR and a CQ.
func prepare(t *testing.T, c *net.UnixConn) {
	t.Helper()
	if err := wire.ParseResponse(exchange(t, c, wire.AppendRequest(nil, wire.OpHello, 0, &wire.Hello{MinVersion: wire.Version, MaxVersion: wire.Version}), 0, 0),
		wire.OpHello, &wire.HelloResp{}); err != nil {
		t.Fatal(err)
	}
	if err := wire.ParseResponse(exchange(t, c, wire.AppendRequest(nil, wire.OpAllocPD, 1, nil), 0, 0), wire.OpAllocPD, &wire.Handle{}); err != nil {
		t.Fatal(err)
	}
	mr := &wire.RegMR{PD: 1, Access: 1, Length: 4096, Addr: 1 << 20}
	if err := wire.ParseResponse(exchange(t, c, wire.AppendRequest(nil, wire.OpRegMR, 2, mr), 1, 0), wire.OpRegMR, &wire.MRResp{}); err != nil {
		t.Fatal(err)
	}
	if err := wire.ParseResponse(exchange(t, c, wire.AppendRequest(nil, wire.OpCreateCQ, 3, &wire.CreateCQ{CQE: 16}), 0, 0), wire.OpCreateCQ, &wire.RingResp{}); err != nil {
		t.Fatal(err)
	}
}
