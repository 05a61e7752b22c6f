package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocelab/rocelab/qp"
)

// TestCEncodings: rocelab's libibverbs.so.1 speaks this protocol from C
// (libibverbs/wire.h, packed structs). Its encodings of sample messages and ring
// entries, printed by libibverbs/test/wire_dump.c, must equal this package's.
func TestCEncodings(t *testing.T) {

	var dgid, sgid, ahGID [16]byte
	for i := range dgid {
		dgid[i], sgid[i], ahGID[i] = byte(i), byte(0x80+i), byte(0xf0+i)
	}
	attr := QPAttr{State: 3, CurState: 2, EnSQDAsyncNotify: 1, Port: 1, AccessFlags: 7, PKeyIndex: 2, PathMTU: 1024,
		QKey: 0x11111111, DGID: dgid, SGID: sgid, DstMAC: [6]byte{0x10, 0x11, 0x12, 0x13, 0x14, 0x15},
		SrcMAC: [6]byte{0x20, 0x21, 0x22, 0x23, 0x24, 0x25}, TrafficClass: 0x28, HopLimit: 64, Timeout: 14,
		RetryCnt: 7, RNRRetry: 6, MaxRdAtomic: 4, MinRNRTimer: 12, MaxDestRdAtomic: 5, FlowLabel: 0x12345,
		RQPSN: 0x654321, SQPSN: 0x123456, DestQPN: 0x11}
	port := PortAttr{MaxMTU: 4096, ActiveMTU: 1024, GIDTableLen: 3, MaxMsgSize: 1 << 23, Rate: 100e9}
	PutString(port.State[:], "ACTIVE")
	PutString(port.LinkLayer[:], "Ethernet")
	dev := DeviceAttr{NodeGUID: 0x0200fffe000001, MaxQP: 1, MaxQPWR: 2, MaxSGE: 3, MaxCQE: 4, MaxQPRdAtom: 5,
		MaxQPInitRdAtom: 6, PhysPortCnt: 7, MaxSRQ: 8,
		MaxMcastGrp: 9, MaxMcastQPAttach: 10, MaxTotalMcastQPAttach: 11}
	PutString(dev.FWVer[:], "rocelab")
	body := func(v any) []byte { return AppendRequest(nil, 0, 0, v)[HeaderSize:] }

	send := make([]byte, SendEntrySize(2))
	PutSendWQE(send, &qp.SendWR{WRID: 0x1122334455667788, Opcode: 5, Flags: 6, Imm: 0xC0FFEE, RKey: 0x1234,
		RemoteAddr: 0x7f00deadbeef, CompareAdd: 42, Swap: 7, RemoteQPN: 0x11, RemoteQKey: 0x11111111, InvalidateRKey: 0x99,
		SGL: []qp.SGE{{Addr: 0x1000, Length: 4096, LKey: 0x55}, {Addr: 0x3000, Length: 100, LKey: 0x66}}}, 3)
	recv := make([]byte, RecvEntrySize(1))
	PutRecvWQE(recv, &qp.RecvWR{WRID: 77, SGL: []qp.SGE{{Addr: 0x1000, Length: 4096, LKey: 0x55}}})
	cqe := make([]byte, CQESize)
	PutCQE(cqe, &qp.WC{WRID: 99, Status: 10, Opcode: 129, PKeyIndex: 1, VendorErr: 0x5e0001, ByteLen: 100, Imm: 0xC0FFEE,
		QPNum: 0x11, SrcQP: 0x12, Flags: 3, SL: 2})

	want := map[string][]byte{
		"hello":      AppendRequest(nil, OpHello, 1, &Hello{1, 1}),
		"reg_mr":     AppendRequest(nil, OpRegMR, 2, &RegMR{PD: 3, Access: 15, Length: 0x12345, Offset: 0x7f0000001000, Addr: 0x7f0000001234}),
		"create_cq":  AppendRequest(nil, OpCreateCQ, 3, &CreateCQ{CQE: 256, Channel: 4}),
		"create_srq": AppendRequest(nil, OpCreateSRQ, 4, &CreateSRQ{PD: 3, MaxWR: 64, MaxSGE: 2}),
		"create_ah": AppendRequest(nil, OpCreateAH, 5, &CreateAH{PD: 3, SGIDIndex: 1, DGID: ahGID, TrafficClass: 0x28,
			HopLimit: 64, FlowLabel: 0xabcde}),
		"create_qp": AppendRequest(nil, OpCreateQP, 6, &CreateQP{PD: 3, SendCQ: 5, RecvCQ: 6, SRQ: 7, Type: 4, SigAll: 1,
			MaxSendWR: 128, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 3}),
		"modify_qp": AppendRequest(nil, OpModifyQP, 7, &ModifyQP{Handle: 9, Mask: 0x1fffff, Attr: attr}),
		"qp_resp": body(&QPResp{Handle: 9, QPN: 0x11, MaxSendWR: 128, MaxRecvWR: 256, MaxSendSGE: 2, MaxRecvSGE: 3,
			SendEntry: 96, RecvEntry: 64, RQOffset: 12480, Size: 28672}),
		"resize_cq":      AppendRequest(nil, OpResizeCQ, 8, &Resize{Handle: 5, Entries: 1000}),
		"resize_srq":     AppendRequest(nil, OpResizeSRQ, 9, &Resize{Handle: 5, Entries: 1000}),
		"rereg_mr":       AppendRequest(nil, OpReregMR, 10, &ReregMR{Handle: 4, PD: 6, Access: 7, ChangePD: 1, ChangeAccess: 1}),
		"attach_mcast":   AppendRequest(nil, OpAttachMcast, 11, &Mcast{Handle: 4, GID: ahGID}),
		"detach_mcast":   AppendRequest(nil, OpDetachMcast, 12, &Mcast{Handle: 5, GID: ahGID}),
		"ring_resp":      body(&RingResp{Handle: 5, Cap: 256, EntrySize: 64, Size: 16576}),
		"open_xrcd":      AppendRequest(nil, OpOpenXRCD, 13, &OpenXRCD{Dev: 0x803, Ino: 1234, OFlags: 0x40, HasFile: 1}),
		"create_xrc_srq": AppendRequest(nil, OpCreateXRCSRQ, 14, &CreateXRCSRQ{PD: 3, MaxWR: 64, MaxSGE: 2, XRCD: 4, CQ: 5}),
		"xrc_srq_resp":   body(&XRCSRQResp{Ring: RingResp{Handle: 6, Cap: 64, EntrySize: 48, Size: 8192}, SRQN: 0x123}),
		"open_qp":        AppendRequest(nil, OpOpenQP, 15, &OpenQP{XRCD: 4, QPN: 0x11}),
		"port_attr":      body(&port),
		"device_attr":    body(&dev),
		"hello_resp":     body(&HelloResp{Version: 1, PageSize: 4096, PID: 1234}),
		"async_event":    body(&AsyncEvent{Type: 15, Handle: 7}),
		"send_wqe":       send,
		"recv_wqe":       recv,
		"cqe":            cqe,
	}
	compareC(t, "libibverbs/test/wire_dump.c", want)
}

// TestCMCEncodings: the RDMA-CM calls as librdmacm/wire_cm.h lays them out, printed by
// librdmacm/test/wire_dump.c, must equal this package's encodings.
func TestCMCEncodings(t *testing.T) {
	addr := func(n byte, port uint16) CMAddr {
		return FromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, n}), port))
	}
	param := CMConnParam{ResponderResources: 1, InitiatorDepth: 2, RetryCount: 7, RNRRetryCount: 6, PrivateDataLen: 5}
	copy(param.PrivateData[:], "rping")
	reject := CMReject{ID: 6, PrivateDataLen: 2}
	reject.PrivateData[0], reject.PrivateData[1] = 0xab, 0xcd
	want := map[string][]byte{
		"cm_create_id":    AppendRequest(nil, OpCMCreateID, 1, &CMCreateID{Channel: 3, PortSpace: 0x013F, QPType: 4}),
		"cm_bind":         AppendRequest(nil, OpCMBind, 8, &CMBind{ID: 4, Addr: addr(1, 0)}),
		"cm_migrate_id":   AppendRequest(nil, OpCMMigrateID, 9, &CMMigrateID{ID: 4, Channel: 9}),
		"cm_listen":       AppendRequest(nil, OpCMListen, 2, &CMListen{ID: 4, Backlog: 8, Addr: addr(1, 7174)}),
		"cm_resolve_addr": AppendRequest(nil, OpCMResolveAddr, 3, &CMResolveAddr{ID: 5, TimeoutMS: 2000, Src: addr(1, 0), Dst: addr(2, 7174)}),
		"cm_connect":      AppendRequest(nil, OpCMConnect, 4, &CMConnect{ID: 5, QP: 9, QPN: 0x33, Param: param}),
		"cm_reject":       AppendRequest(nil, OpCMReject, 5, &reject),
		"cm_init_qp_attr": AppendRequest(nil, OpCMInitQPAttr, 6, &CMInitQPAttr{ID: 5, State: 2}),
		"cm_qp_attr": AppendRequest(nil, 0, 0, &CMQPAttr{Mask: 0x1a5, Attr: QPAttr{State: 2, PathMTU: 1024, DestQPN: 0x11,
			RQPSN: 0x123456, MaxDestRdAtomic: 16, MinRNRTimer: 12, HopLimit: 64, TrafficClass: 0x28, FlowLabel: 0xabcde}})[HeaderSize:],
		"cm_set_option": AppendRequest(nil, OpCMSetOption, 7, &CMSetOption{ID: 5, Option: CMOptionACKTimeout, Value: 14}),
		"cm_event": AppendRequest(nil, 0, 0, &CMEvent{Type: 4, Status: -110, ID: 7, Listener: 4, Local: addr(1, 7174),
			Remote: addr(2, 42570), QPN: 0x11, Param: param, QKey: 0x01234567, FlowLabel: 0xabcde})[HeaderSize:],
	}
	compareC(t, "librdmacm/test/wire_dump.c", want)
}

// compareC builds the C program src (a path from the repository's root), runs it and
// compares each "NAME HEX" line it prints with want[NAME], the Go encoding.
func compareC(t *testing.T, src string, want map[string][]byte) {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed: the C side of the protocol cannot be built")
	}
	bin := filepath.Join(t.TempDir(), "wire_dump")
	if out, err := exec.Command(gcc, "-Wall", "-Werror", "-o", bin, filepath.Join("../../..", src)).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]string{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		name, h, _ := strings.Cut(sc.Text(), " ")
		c[name] = h
	}
	for name, w := range want {
		got, ok := c[name]
		if !ok {
			t.Errorf("%s: %s printed nothing", name, src)
			continue
		}
		if got != hex.EncodeToString(w) {
			t.Errorf("%s:\n C  %s\n Go %s", name, got, hex.EncodeToString(w))
		}
	}
	if len(c) != len(want) {
		t.Errorf("%s printed %d encodings, the test compares %d", src, len(c), len(want))
	}
}
