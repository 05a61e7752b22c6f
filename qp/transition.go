package qp

// The state transition table of ibv_modify_qp(3), as the kernel's ib_modify_qp_is_ok
// (drivers/infiniband/core/verbs.c, qp_state_table) enforces it for RC, UC, UD and XRC QPs on
// an Ethernet (RoCE) port. IBV_QP_STATE is always allowed; IBV_QP_SMAC and the VLAN
// attributes the kernel adds for Ethernet are resolved by the rnic, not passed here.

// transition is one cell of the table: whether it is valid and, per QP type, the
// attributes it requires and the ones it also accepts.
type transition struct {
	valid    bool
	required [5]AttrMask // indexed by typeIndex
	optional [5]AttrMask
}

// typeIndex orders the types as perType spells them: RC, UC, UD, XRC_SEND, XRC_RECV.
func typeIndex(t Type) int {
	switch t {
	case XRCSend:
		return 3
	case XRCRecv:
		return 4
	}
	return int(t - RC)
}

// perType spells a mask for RC, UC, UD, XRC_SEND (the kernel's XRC_INI) and XRC_RECV
// (XRC_TGT) in that order.
func perType(rc, uc, ud, ini, tgt AttrMask) [5]AttrMask { return [5]AttrMask{rc, uc, ud, ini, tgt} }

func same(m AttrMask) [5]AttrMask { return [5]AttrMask{m, m, m, m, m} }

var transitions = func() (t [StateErr + 1][StateErr + 1]transition) {
	always := transition{valid: true}
	for from := StateReset; from <= StateErr; from++ {
		t[from][StateReset] = always // any state → RESET
		t[from][StateErr] = always   // any state → ERR
	}
	const initAttrs = AttrPKeyIndex | AttrPort | AttrAccessFlags
	t[StateReset][StateInit] = transition{valid: true, required: perType(
		initAttrs, initAttrs, AttrPKeyIndex|AttrPort|AttrQKey, initAttrs, initAttrs)}
	t[StateInit][StateInit] = transition{valid: true, optional: perType(
		initAttrs, initAttrs, AttrPKeyIndex|AttrPort|AttrQKey, initAttrs, initAttrs)}
	// An XRC initiator has no responder: it takes neither MAX_DEST_RD_ATOMIC nor
	// MIN_RNR_TIMER; a target has no requester and so takes no retry counts or
	// MAX_QP_RD_ATOMIC.
	const rtrRC = AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer
	const rtrUC = AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN
	const rtrOpt = AttrAltPath | AttrAccessFlags | AttrPKeyIndex
	t[StateInit][StateRTR] = transition{valid: true,
		required: perType(rtrRC, rtrUC, 0, rtrUC, rtrRC),
		optional: perType(rtrOpt, rtrOpt, AttrPKeyIndex|AttrQKey, rtrOpt, rtrOpt)}
	const rtsRC = AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic
	const rtsOptUC = AttrCurState | AttrAltPath | AttrAccessFlags | AttrPathMigState
	const rtsOptRC = rtsOptUC | AttrMinRNRTimer
	t[StateRTR][StateRTS] = transition{valid: true,
		required: perType(rtsRC, AttrSQPSN, AttrSQPSN, rtsRC, AttrTimeout|AttrSQPSN),
		optional: perType(rtsOptRC, rtsOptUC, AttrCurState|AttrQKey, rtsOptUC, rtsOptRC)}
	rtsRTS := perType(rtsOptRC, rtsOptUC, AttrCurState|AttrQKey, rtsOptUC, rtsOptRC)
	t[StateRTS][StateRTS] = transition{valid: true, optional: rtsRTS}
	t[StateRTS][StateSQD] = transition{valid: true, optional: same(AttrEnSQDAsyncNotify)}
	t[StateSQD][StateRTS] = transition{valid: true, optional: rtsRTS}
	t[StateSQD][StateSQD] = transition{valid: true, optional: perType(
		AttrPort|AttrAV|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic|
			AttrMaxDestRdAtomic|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrMinRNRTimer|AttrPathMigState,
		AttrAV|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrPathMigState,
		AttrPKeyIndex|AttrQKey,
		AttrPort|AttrAV|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic|
			AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrPathMigState,
		AttrPort|AttrAV|AttrTimeout|AttrMaxDestRdAtomic|AttrAltPath|AttrAccessFlags|
			AttrPKeyIndex|AttrMinRNRTimer|AttrPathMigState)}
	// SQE exists for UC and UD only: an RC send queue error takes the whole QP to ERR.
	t[StateSQE][StateRTS] = transition{valid: true, optional: perType(
		0,
		AttrCurState|AttrAccessFlags,
		AttrCurState|AttrQKey,
		0, 0)}
	return t
}()

// checkTransition reports whether a QP of type t in state cur may move to state next
// setting the attributes of mask, with an error naming the first offending attribute.
func checkTransition(t Type, cur, next State, mask AttrMask) error {
	if cur > StateErr || next > StateErr {
		return attrErr(AttrState, "unknown state")
	}
	tr := transitions[cur][next]
	if !tr.valid || (cur == StateSQE && next == StateRTS && t.reliable()) {
		return attrErr(AttrState, "%v → %v is not a valid transition for %v", cur, next, t)
	}
	if mask&AttrCurState != 0 && cur != StateRTR && cur != StateRTS && cur != StateSQD && cur != StateSQE {
		return attrErr(AttrCurState, "may only be given in RTR, RTS, SQD or SQE, QP is %v", cur)
	}
	req, opt := tr.required[typeIndex(t)], tr.optional[typeIndex(t)]
	if missing := req &^ mask; missing != 0 {
		return attrErr(lowestBit(missing), "required by %v → %v for %v", cur, next, t)
	}
	if extra := mask &^ (req | opt | AttrState); extra != 0 {
		return attrErr(lowestBit(extra), "not allowed in %v → %v for %v", cur, next, t)
	}
	return nil
}

func lowestBit(m AttrMask) AttrMask { return m & -m }
