package qp

import (
	"errors"
	"testing"

	"github.com/rocelab/rocelab/roce"
)

// The ibv_modify_qp(3) transition table, written out row by row from the man page (and
// the kernel's qp_state_table for Ethernet ports), independently of transition.go.
var modifyTable = []struct {
	from, to State
	typ      Type
	required AttrMask
	optional AttrMask
}{
	{StateReset, StateInit, RC, AttrPKeyIndex | AttrPort | AttrAccessFlags, 0},
	{StateReset, StateInit, UC, AttrPKeyIndex | AttrPort | AttrAccessFlags, 0},
	{StateReset, StateInit, UD, AttrPKeyIndex | AttrPort | AttrQKey, 0},
	{StateInit, StateInit, RC, 0, AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateInit, UC, 0, AttrPKeyIndex | AttrPort | AttrAccessFlags},
	{StateInit, StateInit, UD, 0, AttrPKeyIndex | AttrPort | AttrQKey},
	{StateInit, StateRTR, RC, AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
		AttrAltPath | AttrAccessFlags | AttrPKeyIndex},
	{StateInit, StateRTR, UC, AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN, AttrAltPath | AttrAccessFlags | AttrPKeyIndex},
	{StateInit, StateRTR, UD, 0, AttrPKeyIndex | AttrQKey},
	{StateRTR, StateRTS, RC, AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic,
		AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState},
	{StateRTR, StateRTS, UC, AttrSQPSN, AttrCurState | AttrAltPath | AttrAccessFlags | AttrPathMigState},
	{StateRTR, StateRTS, UD, AttrSQPSN, AttrCurState | AttrQKey},
	{StateRTS, StateRTS, RC, 0, AttrCurState | AttrAccessFlags | AttrAltPath | AttrPathMigState | AttrMinRNRTimer},
	{StateRTS, StateRTS, UC, 0, AttrCurState | AttrAccessFlags | AttrAltPath | AttrPathMigState},
	{StateRTS, StateRTS, UD, 0, AttrCurState | AttrQKey},
	{StateRTS, StateSQD, RC, 0, AttrEnSQDAsyncNotify},
	{StateRTS, StateSQD, UC, 0, AttrEnSQDAsyncNotify},
	{StateRTS, StateSQD, UD, 0, AttrEnSQDAsyncNotify},
	{StateSQD, StateRTS, RC, 0, AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState},
	{StateSQD, StateRTS, UC, 0, AttrCurState | AttrAltPath | AttrAccessFlags | AttrPathMigState},
	{StateSQD, StateRTS, UD, 0, AttrCurState | AttrQKey},
	{StateSQD, StateSQD, RC, 0, AttrAV | AttrMaxQPRdAtomic | AttrMaxDestRdAtomic | AttrPathMigState | AttrPKeyIndex |
		AttrPort | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer},
	{StateSQD, StateSQD, UC, 0, AttrAV | AttrAltPath | AttrAccessFlags | AttrPKeyIndex | AttrPathMigState},
	{StateSQD, StateSQD, UD, 0, AttrPKeyIndex | AttrQKey},
	{StateSQE, StateRTS, UC, 0, AttrCurState | AttrAccessFlags},
	{StateSQE, StateRTS, UD, 0, AttrCurState | AttrQKey},
}

func TestTransitionTable(t *testing.T) {
	type key struct {
		from, to State
		typ      Type
	}
	listed := map[key]bool{}
	for _, row := range modifyTable {
		listed[key{row.from, row.to, row.typ}] = true
		// The required set, plus each optional attribute, is accepted.
		if err := checkTransition(row.typ, row.from, row.to, AttrState|row.required); err != nil {
			t.Errorf("%v %v→%v with %v: %v", row.typ, row.from, row.to, row.required, err)
		}
		for bit := AttrMask(1); bit <= AttrDestQPN; bit <<= 1 {
			mask := AttrState | row.required | bit
			err := checkTransition(row.typ, row.from, row.to, mask)
			allowed := bit&(row.required|row.optional|AttrState) != 0
			if allowed && err != nil {
				t.Errorf("%v %v→%v: optional %v refused: %v", row.typ, row.from, row.to, bit, err)
			}
			if !allowed {
				var ae *AttrError
				if !errors.As(err, &ae) || ae.Attr != bit {
					t.Errorf("%v %v→%v: %v accepted or not named (err %v)", row.typ, row.from, row.to, bit, err)
				}
			}
			// Each required attribute left out is named.
			if bit&row.required != 0 {
				var ae *AttrError
				err := checkTransition(row.typ, row.from, row.to, AttrState|row.required&^bit)
				if !errors.As(err, &ae) || ae.Attr != bit {
					t.Errorf("%v %v→%v without %v: got %v", row.typ, row.from, row.to, bit, err)
				}
			}
		}
	}
	// Every other pair is invalid, except to RESET and to ERR, which take no attributes.
	for _, typ := range []Type{RC, UC, UD} {
		for from := StateReset; from <= StateErr; from++ {
			for to := StateReset; to <= StateErr; to++ {
				err := checkTransition(typ, from, to, AttrState)
				switch {
				case to == StateReset || to == StateErr:
					if err != nil {
						t.Errorf("%v %v→%v: %v", typ, from, to, err)
					}
					if checkTransition(typ, from, to, AttrState|AttrQKey) == nil {
						t.Errorf("%v %v→%v accepts IBV_QP_QKEY", typ, from, to)
					}
				case listed[key{from, to, typ}]:
				default:
					if err == nil {
						t.Errorf("%v %v→%v is accepted", typ, from, to)
					}
				}
			}
		}
	}
}

func TestModifyRejectsAtomically(t *testing.T) {
	n := newNode(t, defaultOpts(), 0)
	q := n.qp
	good := Attr{State: StateInit, Port: 1, AccessFlags: AccessRemoteWrite}
	for _, c := range []struct {
		name string
		a    Attr
		mask AttrMask
		bad  AttrMask
	}{
		{"port", Attr{State: StateInit, Port: 2}, AttrState | AttrPort | AttrPKeyIndex | AttrAccessFlags, AttrPort},
		{"pkey index", Attr{State: StateInit, Port: 1, PKeyIndex: 3}, AttrState | AttrPort | AttrPKeyIndex | AttrAccessFlags, AttrPKeyIndex},
		{"access flags", Attr{State: StateInit, Port: 1, AccessFlags: 1 << 9}, AttrState | AttrPort | AttrPKeyIndex | AttrAccessFlags, AttrAccessFlags},
		{"missing access", good, AttrState | AttrPort | AttrPKeyIndex, AttrAccessFlags},
		{"qkey on RC", good, AttrState | AttrPort | AttrPKeyIndex | AttrAccessFlags | AttrQKey, AttrQKey},
		{"skip to RTR", Attr{State: StateRTR}, AttrState, AttrState},
	} {
		var ae *AttrError
		if err := q.Modify(&c.a, c.mask); !errors.As(err, &ae) || ae.Attr != c.bad {
			t.Errorf("%s: got %v, want an error naming %v", c.name, err, c.bad)
		}
		if q.State() != StateReset || q.Attr().AccessFlags != 0 {
			t.Fatalf("%s: a refused Modify changed the QP: %v %+v", c.name, q.State(), q.Attr())
		}
	}
	if err := q.Modify(&good, AttrState|AttrPort|AttrPKeyIndex|AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	// Values are checked too: a bad MTU, timer or PSN modifies nothing.
	rtr := Attr{State: StateRTR, AV: nodeAddr(2), PathMTU: 1000, DestQPN: 5, MaxDestRdAtomic: 1, MinRNRTimer: 40}
	rtr.AV.SGID = nodeAddr(1).DGID
	mask := AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	for _, c := range []struct {
		fix func(*Attr)
		bad AttrMask
	}{
		{func(a *Attr) {}, AttrPathMTU},
		{func(a *Attr) { a.PathMTU = roce.MTU2048 }, AttrMinRNRTimer},
		{func(a *Attr) { a.MinRNRTimer = 12; a.RQPSN = 1 << 24 }, AttrRQPSN},
		{func(a *Attr) { a.RQPSN = 0; a.AV.SGID = roce.GID{} }, AttrAV},
	} {
		c.fix(&rtr)
		var ae *AttrError
		if err := q.Modify(&rtr, mask); !errors.As(err, &ae) || ae.Attr != c.bad {
			t.Errorf("got %v, want an error naming %v", err, c.bad)
		}
		if q.State() != StateInit || q.Attr().PathMTU != roce.MTU1024 {
			t.Fatalf("refused Modify changed the QP")
		}
	}
	rtr.AV.SGID = nodeAddr(1).DGID
	if err := q.Modify(&rtr, mask); err != nil {
		t.Fatal(err)
	}
	if a := q.Attr(); a.State != StateRTR || a.PathMTU != roce.MTU2048 || a.MinRNRTimer != 12 {
		t.Errorf("attributes after RTR: %+v", a)
	}
	// IBV_QP_CUR_STATE must match.
	var ae *AttrError
	rts := Attr{State: StateRTS, CurState: StateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	if err := q.Modify(&rts, AttrState|AttrCurState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic); !errors.As(err, &ae) || ae.Attr != AttrCurState {
		t.Errorf("wrong IBV_QP_CUR_STATE: got %v", err)
	}
}
