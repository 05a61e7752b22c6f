package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Send writes one datagram with fds as SCM_RIGHTS.
func Send(c *net.UnixConn, msg []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n != len(msg) || oobn != len(oob) {
		return fmt.Errorf("%w: short write (%d of %d bytes)", ErrProtocol, n, len(msg))
	}
	return nil
}

// Recv reads one datagram into buf and returns it with the descriptors it carried
// (close-on-exec). A truncated datagram or ancillary data is a protocol error; its
// descriptors are closed. Whatever Recv returns, a descriptor it received is either
// in the returned slice (the caller's to close) or already closed: on error it is the
// latter, so no message, however malformed, leaves one open in the receiver.
func Recv(c *net.UnixConn, buf, oob []byte) ([]byte, []int, error) {
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	// The descriptors are installed in this process as soon as recvmsg returns, error
	// or not: a zero-length datagram is io.EOF to Go's SOCK_SEQPACKET reader, and yet
	// its ancillary data carried them.
	fds, perr := unixRights(oob[:oobn])
	switch {
	case err != nil && oobn > 0 && n == 0 && errors.Is(err, io.EOF):
		CloseFDs(fds)
		return nil, nil, fmt.Errorf("%w: a zero-length message carrying %d descriptors", ErrProtocol, len(fds))
	case err != nil:
		CloseFDs(fds)
		return nil, nil, err
	case perr != nil:
		CloseFDs(fds)
		return nil, nil, fmt.Errorf("%w: ancillary data: %v", ErrProtocol, perr)
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		CloseFDs(fds)
		return nil, nil, fmt.Errorf("%w: truncated datagram (flags %#x)", ErrProtocol, flags)
	case n == 0 && oobn == 0:
		// A zero-length read on SOCK_SEQPACKET is the peer's orderly shutdown.
		return nil, nil, os.ErrClosed
	}
	return buf[:n], fds, nil
}

// unixRights returns every descriptor of the SCM_RIGHTS messages in oob, also when a
// later control message does not parse (the earlier ones' descriptors are open).
func unixRights(oob []byte) ([]int, error) {
	var fds []int
	for len(oob) >= unix.CmsgLen(0) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.CmsgLen(0) || l > len(oob) {
			return fds, fmt.Errorf("control message of %d bytes in %d", l, len(oob))
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			data := oob[unix.CmsgLen(0):l]
			for i := 0; i+4 <= len(data); i += 4 {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data[i:]))))
			}
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return fds, nil
}

// OOBSpace is the ancillary buffer size Recv needs for MaxFDs descriptors.
var OOBSpace = unix.CmsgSpace(MaxFDs * 4)

// CloseFDs closes every descriptor of fds.
func CloseFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// SealedMemfd creates a memfd of size bytes, maps it shared, and seals its size
// (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL): the peer it is passed to can write the pages
// but never truncate them away under the other side's mapping, which would kill the
// other side with SIGBUS.
func SealedMemfd(name string, size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, os.NewSyscallError("memfd_create", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError("fcntl(F_ADD_SEALS)", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError("mmap", err)
	}
	return fd, mem, nil
}

// CheckSealed verifies that fd is a memfd sealed against shrinking and holds at least
// size bytes: what makes mapping a peer's memory safe.
func CheckSealed(fd int, size uint64) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("fd is not a sealable memfd: %v", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return fmt.Errorf("memfd is not sealed against shrinking (F_SEAL_SHRINK)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %v", err)
	}
	if st.Size < 0 || uint64(st.Size) < size {
		return fmt.Errorf("memfd holds %d bytes, %d needed", st.Size, size)
	}
	return nil
}

// Map maps size bytes of fd shared.
func Map(fd int, size uint64) ([]byte, error) {
	if size == 0 || size > 1<<46 {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return mem, nil
}
