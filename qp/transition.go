package qp

// The state transition table of ibv_modify_qp(3), as the kernel's ib_modify_qp_is_ok
// (drivers/infiniband/core/verbs.c, qp_state_table) enforces it for RC, UC and UD QPs on
// an Ethernet (RoCE) port. IBV_QP_STATE is always allowed; IBV_QP_SMAC and the VLAN
// attributes the kernel adds for Ethernet are resolved by the rnic, not passed here.

// transition is one cell of the table: whether it is valid and, per QP type, the
// attributes it requires and the ones it also accepts.
type transition struct {
	valid    bool
	required [3]AttrMask // indexed by typeIndex
	optional [3]AttrMask
}

func typeIndex(t Type) int { return int(t - RC) }

// perType spells a mask for RC, UC and UD in that order.
func perType(rc, uc, ud AttrMask) [3]AttrMask { return [3]AttrMask{rc, uc, ud} }

func same(m AttrMask) [3]AttrMask { return [3]AttrMask{m, m, m} }

var transitions = func() (t [StateErr + 1][StateErr + 1]transition) {
	always := transition{valid: true}
	for from := StateReset; from <= StateErr; from++ {
		t[from][StateReset] = always // any state → RESET
		t[from][StateErr] = always   // any state → ERR
	}
	t[StateReset][StateInit] = transition{valid: true, required: perType(
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrQKey)}
	t[StateInit][StateInit] = transition{valid: true, optional: perType(
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrAccessFlags,
		AttrPKeyIndex|AttrPort|AttrQKey)}
	t[StateInit][StateRTR] = transition{valid: true,
		required: perType(
			AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer,
			AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN,
			0),
		optional: perType(
			AttrAltPath|AttrAccessFlags|AttrPKeyIndex,
			AttrAltPath|AttrAccessFlags|AttrPKeyIndex,
			AttrPKeyIndex|AttrQKey)}
	t[StateRTR][StateRTS] = transition{valid: true,
		required: perType(
			AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrSQPSN|AttrMaxQPRdAtomic,
			AttrSQPSN,
			AttrSQPSN),
		optional: perType(
			AttrCurState|AttrAltPath|AttrAccessFlags|AttrMinRNRTimer|AttrPathMigState,
			AttrCurState|AttrAltPath|AttrAccessFlags|AttrPathMigState,
			AttrCurState|AttrQKey)}
	t[StateRTS][StateRTS] = transition{valid: true, optional: perType(
		AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState|AttrMinRNRTimer,
		AttrCurState|AttrAccessFlags|AttrAltPath|AttrPathMigState,
		AttrCurState|AttrQKey)}
	t[StateRTS][StateSQD] = transition{valid: true, optional: same(AttrEnSQDAsyncNotify)}
	t[StateSQD][StateRTS] = transition{valid: true, optional: perType(
		AttrCurState|AttrAltPath|AttrAccessFlags|AttrMinRNRTimer|AttrPathMigState,
		AttrCurState|AttrAltPath|AttrAccessFlags|AttrPathMigState,
		AttrCurState|AttrQKey)}
	t[StateSQD][StateSQD] = transition{valid: true, optional: perType(
		AttrPort|AttrAV|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic|
			AttrMaxDestRdAtomic|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrMinRNRTimer|AttrPathMigState,
		AttrAV|AttrAltPath|AttrAccessFlags|AttrPKeyIndex|AttrPathMigState,
		AttrPKeyIndex|AttrQKey)}
	// SQE exists for UC and UD only: an RC send queue error takes the whole QP to ERR.
	t[StateSQE][StateRTS] = transition{valid: true, optional: perType(
		0,
		AttrCurState|AttrAccessFlags,
		AttrCurState|AttrQKey)}
	return t
}()

// checkTransition reports whether a QP of type t in state cur may move to state next
// setting the attributes of mask, with an error naming the first offending attribute.
func checkTransition(t Type, cur, next State, mask AttrMask) error {
	if cur > StateErr || next > StateErr {
		return attrErr(AttrState, "unknown state")
	}
	tr := transitions[cur][next]
	if !tr.valid || (cur == StateSQE && next == StateRTS && t == RC) {
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
