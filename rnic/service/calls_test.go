package service

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rocelab/rocelab/fabric/link"
	"github.com/rocelab/rocelab/internal/clock"
	"github.com/rocelab/rocelab/rnic"
	"github.com/rocelab/rocelab/rnic/service/wire"
)

// testConn is a client connection's call path on a device in virtual time: the test's
// goroutine stands for the device's loop, as nothing runs it meanwhile.
func testConn(t *testing.T) *conn {
	t.Helper()
	v := clock.NewVirtual(1)
	a, _, err := link.New(link.Config{Rate: 100e9, MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	d, err := rnic.Open(rnic.Config{Name: "h1", MAC: [6]byte{2, 0, 0, 0, 0, 1}, GIDs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		Loop: v.NewLoop("h1"), Link: a, Pool: link.NewPool(1518), CC: rnic.CC{Mode: rnic.ModeNone}})
	if err != nil {
		t.Fatal(err)
	}
	return &conn{s: &Server{dev: d, budget: ProcessBudget(1), host: "h1"}, objs: map[uint32]any{}, costs: map[uint32]Usage{}}
}

// do makes one call and decodes its response into v (nil: none).
func do(c *conn, op wire.Op, body any, fds []int, v any) error {
	req := wire.AppendRequest(nil, op, 0, body)
	_, reqBody, err := wire.ParseHeader(req)
	if err != nil {
		return err
	}
	out, _ := c.call(op, reqBody, fds, make([]byte, 0, wire.MaxMessage))
	return wire.ParseResponse(out, op, v)
}

// TestCallTable: the handler table routes each op, rejects ops without a handler and
// descriptors a call does not carry, and destroys an object only by its own kind's op.
func TestCallTable(t *testing.T) {
	c := testConn(t)
	var attr wire.DeviceAttr
	if err := do(c, wire.OpQueryDevice, nil, nil, &attr); err != nil || attr.MaxQP == 0 {
		t.Fatalf("query device: %+v, %v", attr, err)
	}
	for _, op := range []wire.Op{wire.OpHello, 0, 99} {
		if err := do(c, op, nil, nil, nil); !errors.Is(err, rnic.ErrNotSupported) || !strings.Contains(err.Error(), "unknown call") {
			t.Errorf("op %v: %v, want an unknown call", op, err)
		}
	}
	if err := do(c, wire.OpRegMR, &wire.RegMR{}, nil, nil); !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), "carries 0 descriptors, want 1") {
		t.Errorf("reg MR without its memfd: %v", err)
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := do(c, wire.OpQueryDevice, nil, []int{fd}, nil); !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("query device with a descriptor: %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the descriptor of a rejected call is still open (%v)", err)
	}

	var pd wire.Handle
	if err := do(c, wire.OpAllocPD, nil, nil, &pd); err != nil {
		t.Fatal(err)
	}
	if err := do(c, wire.OpDestroyCQ, &pd, nil, nil); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("destroy CQ of a PD's handle: %v, want not found", err)
	}
	if err := do(c, wire.OpDeallocPD, &pd, nil, nil); err != nil {
		t.Errorf("dealloc PD: %v", err)
	}
	if err := do(c, wire.OpDeallocPD, &pd, nil, nil); !errors.Is(err, rnic.ErrNotFound) {
		t.Errorf("dealloc PD twice: %v, want not found", err)
	}
}

// TestMemoryWindowCalls: ALLOC_MW answers a handle and the window's rkey, refuses a
// window type other than 1 and 2 with EINVAL (as the kernel's uverbs), and DEALLOC_MW
// frees it so that the PD can go.
func TestMemoryWindowCalls(t *testing.T) {
	c := testConn(t)
	var pd wire.Handle
	if err := do(c, wire.OpAllocPD, nil, nil, &pd); err != nil {
		t.Fatal(err)
	}
	if err := do(c, wire.OpAllocMW, &wire.AllocMW{PD: pd.Handle, Type: 3}, nil, &wire.MWResp{}); !errors.Is(err, rnic.ErrInvalidArgument) {
		t.Fatalf("type 3 window: %v, want EINVAL", err)
	}
	var mw wire.MWResp
	if err := do(c, wire.OpAllocMW, &wire.AllocMW{PD: pd.Handle, Type: 2}, nil, &mw); err != nil || mw.RKey == 0 {
		t.Fatalf("type 2 window: %+v, %v", mw, err)
	}
	if err := do(c, wire.OpDeallocPD, &pd, nil, nil); !errors.Is(err, rnic.ErrBusy) {
		t.Fatalf("dealloc a PD holding a window: %v, want busy", err)
	}
	if err := do(c, wire.OpDeallocMW, &wire.Handle{Handle: mw.Handle}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := do(c, wire.OpDeallocPD, &pd, nil, nil); err != nil {
		t.Fatal(err)
	}
}
