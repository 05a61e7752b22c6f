package wire

import (
	"errors"
	"testing"

	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic"
)

// bodies is one value of every request and response body, for round trips and seeds.
var bodies = map[Op][]any{
	OpHello: {&Hello{1, 1}, &HelloResp{Version: 1, PageSize: PageSize}}, OpQueryDevice: {&DeviceAttr{MaxQP: 5}},
	OpQueryPort: {&QueryPort{Port: 1}, &PortAttr{Rate: 1e11}}, OpQueryGID: {&QueryGID{3}, &GID{}},
	OpAllocPD: {&Handle{1}}, OpRegMR: {&RegMR{PD: 1, Length: 4096, Addr: 1 << 40}, &MRResp{1, 2, 3}},
	OpCreateCQ:  {&CreateCQ{64, 1}, &RingResp{Handle: 2, Cap: 64, EntrySize: 64, Size: 8192}},
	OpCreateSRQ: {&CreateSRQ{1, 16, 1}}, OpModifySRQ: {&ModifySRQ{1, 4}}, OpCreateAH: {&CreateAH{PD: 1, HopLimit: 64}},
	OpCreateQP: {&CreateQP{PD: 1, SendCQ: 2, RecvCQ: 2, Type: 2, MaxSendWR: 8}, &QPResp{Handle: 3, QPN: 17}},
	OpModifyQP: {&ModifyQP{Handle: 3, Mask: 1, Attr: QPAttr{State: 1, PathMTU: 4096}}}, OpQueryQP: {&QPAttr{DestQPN: 9}},
	OpGetAsyncEvent: {&AsyncEvent{Type: 15, Handle: 7}}, OpResizeCQ: {&Resize{2, 100}}, OpResizeSRQ: {&Resize{3, 50}},
	OpReregMR: {&ReregMR{Handle: 1, PD: 2, ChangePD: 1}}, OpAttachMcast: {&Mcast{Handle: 1, GID: [16]byte{0xff, 0x0e}}},
	OpDetachMcast: {&Mcast{Handle: 2}},
	OpAllocMW:     {&AllocMW{PD: 1, Type: 2}, &MWResp{4, 0x1234}},
	OpOpenXRCD:    {&OpenXRCD{Dev: 0x803, Ino: 1234, OFlags: 0x40, HasFile: 1}},
	OpCreateXRCSRQ: {&CreateXRCSRQ{PD: 1, MaxWR: 16, MaxSGE: 1, XRCD: 2, CQ: 3},
		&XRCSRQResp{Ring: RingResp{Handle: 4, Cap: 16, EntrySize: 32, Size: 4096}, SRQN: 7}},
	OpOpenQP: {&OpenQP{XRCD: 2, QPN: 0x11}},
}

func TestRoundTrip(t *testing.T) {
	for op, bs := range bodies {
		for _, b := range bs {
			msg := AppendRequest(nil, op, 7, b)
			h, body, err := ParseHeader(msg)
			if err != nil || h.Op != op || h.Word != 7 {
				t.Fatalf("%v: %+v %v", op, h, err)
			}
			if err := ParseResponse(AppendResponse(nil, op, b), op, b); err != nil {
				t.Fatalf("%v response: %v", op, err)
			}
			if err := DecodeBody(body[:len(body)-1], b); !errors.Is(err, ErrProtocol) {
				t.Errorf("%v short body: %v", op, err)
			}
		}
	}
	err := ParseResponse(AppendError(nil, OpCreateQP, errors.Join(rnic.ErrBusy)), OpCreateQP, nil)
	if !errors.Is(err, rnic.ErrBusy) {
		t.Errorf("error response: %v", err)
	}
	a := qp.Attr{State: qp.StateRTR, AccessFlags: 7, PathMTU: 1024, DestQPN: 0x123456, RQPSN: 99, EnSQDAsyncNotify: true}
	a.AV.DGID[3], a.AV.FlowLabel = 9, 0xfffff
	w := FromQPAttr(&a)
	if w.QP() != a {
		t.Errorf("QP attr round trip: %+v != %+v", w.QP(), a)
	}
}

// TestWQEs: WQEs and CQEs survive the ring encoding; too many SGEs are refused.
func TestWQEs(t *testing.T) {
	e := make([]byte, SendEntrySize(2))
	wr := qp.SendWR{WRID: 1, Opcode: qp.WRCompareSwap, Flags: qp.SendSignaled, Imm: 2, RemoteAddr: 3, RKey: 4, CompareAdd: 5,
		Swap: 6, RemoteQPN: 7, RemoteQKey: 8, InvalidateRKey: 9, SGL: []qp.SGE{{Addr: 1, Length: 2, LKey: 3}, {Addr: 4, Length: 5, LKey: 6}}}
	if !PutSendWQE(e, &wr, 11) {
		t.Fatal("put")
	}
	var got qp.SendWR
	sgl := make([]qp.SGE, 2)
	ah, ok := GetSendWQE(e, &got, sgl)
	if !ok || ah != 11 || got.SGL[1] != wr.SGL[1] || got.Swap != 6 || got.InvalidateRKey != 9 {
		t.Fatalf("%+v %v %v", got, ah, ok)
	}
	if _, ok := GetSendWQE(e, &got, sgl[:1]); ok {
		t.Error("2 SGEs decoded into room for 1")
	}
	bind := qp.SendWR{WRID: 2, Opcode: qp.WRBindMW, Flags: qp.SendSignaled, Bind: qp.MWBind{MWRKey: 0x1234, NewRKey: 0x1235,
		MRLKey: 0x5678, Addr: 1 << 40, Length: 4096, Access: qp.AccessRemoteRead | qp.AccessRemoteWrite}}
	if !PutSendWQE(e, &bind, 0) {
		t.Fatal("put bind")
	}
	if _, ok := GetSendWQE(e, &got, sgl); !ok || got.Opcode != qp.WRBindMW || got.Bind != bind.Bind || len(got.SGL) != 0 {
		t.Fatalf("bind WQE: %+v, want %+v", got.Bind, bind.Bind)
	}
	wc := qp.WC{WRID: 1, Status: 2, Opcode: 3, VendorErr: 4, ByteLen: 5, Imm: 6, QPNum: 7, SrcQP: 8, Flags: 9, PKeyIndex: 10}
	c := make([]byte, CQESize)
	PutCQE(c, &wc)
	var wc2 qp.WC
	GetCQE(c, &wc2)
	if wc != wc2 {
		t.Errorf("CQE %+v != %+v", wc2, wc)
	}
}

// FuzzDecode feeds arbitrary datagrams to the decoders the service runs on client
// input: header, every body, and the WQE decoders. None may panic. The seed corpus in
// testdata/fuzz runs with the normal tests.
func FuzzDecode(f *testing.F) {
	for op, bs := range bodies {
		for _, b := range bs {
			f.Add(AppendRequest(nil, op, 1, b))
		}
	}
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, body, err := ParseHeader(msg)
		if err != nil {
			return
		}
		for _, bs := range bodies {
			for _, b := range bs {
				DecodeBody(body, b)
			}
		}
		ParseResponse(msg, h.Op, nil)
		var wr qp.SendWR
		GetSendWQE(body, &wr, make([]qp.SGE, 4))
		var rwr qp.RecvWR
		GetRecvWQE(body, &rwr, make([]qp.SGE, 4))
		if len(body) >= CQESize {
			var wc qp.WC
			GetCQE(body, &wc)
		}
	})
}
