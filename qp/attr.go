package qp

import (
	"fmt"

	"github.com/rocelab/rocelab/roce"
)

// AttrMask selects the attributes a Modify call sets (enum ibv_qp_attr_mask).
type AttrMask uint32

// Attribute mask bits.
const (
	AttrState            AttrMask = 1 << 0  // IBV_QP_STATE
	AttrCurState         AttrMask = 1 << 1  // IBV_QP_CUR_STATE
	AttrEnSQDAsyncNotify AttrMask = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	AttrAccessFlags      AttrMask = 1 << 3  // IBV_QP_ACCESS_FLAGS
	AttrPKeyIndex        AttrMask = 1 << 4  // IBV_QP_PKEY_INDEX
	AttrPort             AttrMask = 1 << 5  // IBV_QP_PORT
	AttrQKey             AttrMask = 1 << 6  // IBV_QP_QKEY
	AttrAV               AttrMask = 1 << 7  // IBV_QP_AV
	AttrPathMTU          AttrMask = 1 << 8  // IBV_QP_PATH_MTU
	AttrTimeout          AttrMask = 1 << 9  // IBV_QP_TIMEOUT
	AttrRetryCnt         AttrMask = 1 << 10 // IBV_QP_RETRY_CNT
	AttrRNRRetry         AttrMask = 1 << 11 // IBV_QP_RNR_RETRY
	AttrRQPSN            AttrMask = 1 << 12 // IBV_QP_RQ_PSN
	AttrMaxQPRdAtomic    AttrMask = 1 << 13 // IBV_QP_MAX_QP_RD_ATOMIC
	AttrAltPath          AttrMask = 1 << 14 // IBV_QP_ALT_PATH
	AttrMinRNRTimer      AttrMask = 1 << 15 // IBV_QP_MIN_RNR_TIMER
	AttrSQPSN            AttrMask = 1 << 16 // IBV_QP_SQ_PSN
	AttrMaxDestRdAtomic  AttrMask = 1 << 17 // IBV_QP_MAX_DEST_RD_ATOMIC
	AttrPathMigState     AttrMask = 1 << 18 // IBV_QP_PATH_MIG_STATE
	AttrCap              AttrMask = 1 << 19 // IBV_QP_CAP
	AttrDestQPN          AttrMask = 1 << 20 // IBV_QP_DEST_QPN
)

var attrNames = [...]string{
	"IBV_QP_STATE", "IBV_QP_CUR_STATE", "IBV_QP_EN_SQD_ASYNC_NOTIFY", "IBV_QP_ACCESS_FLAGS",
	"IBV_QP_PKEY_INDEX", "IBV_QP_PORT", "IBV_QP_QKEY", "IBV_QP_AV", "IBV_QP_PATH_MTU",
	"IBV_QP_TIMEOUT", "IBV_QP_RETRY_CNT", "IBV_QP_RNR_RETRY", "IBV_QP_RQ_PSN",
	"IBV_QP_MAX_QP_RD_ATOMIC", "IBV_QP_ALT_PATH", "IBV_QP_MIN_RNR_TIMER", "IBV_QP_SQ_PSN",
	"IBV_QP_MAX_DEST_RD_ATOMIC", "IBV_QP_PATH_MIG_STATE", "IBV_QP_CAP", "IBV_QP_DEST_QPN",
}

// String names the set bits, e.g. "IBV_QP_STATE|IBV_QP_AV".
func (m AttrMask) String() string {
	s := ""
	for i := 0; i < 32; i++ {
		if m&(1<<i) == 0 {
			continue
		}
		if s != "" {
			s += "|"
		}
		if i < len(attrNames) {
			s += attrNames[i]
		} else {
			s += fmt.Sprintf("bit%d", i)
		}
	}
	if s == "" {
		return "0"
	}
	return s
}

// MigState is a path migration state (enum ibv_mig_state). rocelab has one path per QP,
// so only MigMigrated is accepted.
type MigState uint8

// Path migration states.
const (
	MigMigrated MigState = 0 // IBV_MIG_MIGRATED
	MigRearm    MigState = 1 // IBV_MIG_REARM
	MigArmed    MigState = 2 // IBV_MIG_ARMED
)

// AddressVector is the path to a peer, as ibv_ah_attr with its GRH describes it for
// RoCEv2. Connected QPs hold one (IBV_QP_AV); UD work requests carry one each (the
// address handle). The rnic resolves the MACs (ARP/NDP) before handing it over.
type AddressVector struct {
	DGID, SGID   roce.GID // destination and source GIDs: both IPv4-mapped or both IPv6
	DstMAC       [6]byte
	SrcMAC       [6]byte
	TrafficClass uint8  // DSCP in bits 7:2, ECN in bits 1:0, as ibv_global_route.traffic_class
	HopLimit     uint8  // IPv4 TTL or IPv6 hop limit; 0 = roce.DefaultTTL
	FlowLabel    uint32 // 20 bits; 0 = derive from the QPNs (connected QPs), as the kernel does
}

// Check reports what is wrong with the vector, or nil.
func (av *AddressVector) Check() error {
	if av.DGID == (roce.GID{}) {
		return fmt.Errorf("qp: address vector: destination GID is zero")
	}
	if av.SGID == (roce.GID{}) {
		return fmt.Errorf("qp: address vector: source GID is zero")
	}
	if av.DGID.IsIPv4() != av.SGID.IsIPv4() {
		return fmt.Errorf("qp: address vector: source GID %v and destination GID %v are not the same IP version", av.SGID, av.DGID)
	}
	if av.FlowLabel > 0xFFFFF {
		return fmt.Errorf("qp: address vector: flow label %#x exceeds 20 bits", av.FlowLabel)
	}
	return nil
}

// Attr holds the attributes of ibv_qp_attr that a QP of this transport uses. Modify
// reads only the fields its mask selects.
type Attr struct {
	State            State  // IBV_QP_STATE: the state to move to
	CurState         State  // IBV_QP_CUR_STATE: the state the caller believes the QP is in
	EnSQDAsyncNotify bool   // IBV_QP_EN_SQD_ASYNC_NOTIFY
	AccessFlags      Access // IBV_QP_ACCESS_FLAGS: remote operations the responder accepts
	PKeyIndex        uint16 // IBV_QP_PKEY_INDEX: must be 0 (the table holds 0xFFFF only)
	Port             uint8  // IBV_QP_PORT: must be 1
	QKey             uint32 // IBV_QP_QKEY (UD)
	AV               AddressVector
	PathMTU          roce.MTU // IBV_QP_PATH_MTU, in bytes (use roce.MTUFromEnum for ibv_mtu)
	Timeout          uint8    // IBV_QP_TIMEOUT: 4.096 µs × 2^Timeout; 0 = infinite
	RetryCnt         uint8    // IBV_QP_RETRY_CNT: 0..7, 7 = infinite (as rxe)
	RNRRetry         uint8    // IBV_QP_RNR_RETRY: 0..7, 7 = infinite
	RQPSN            roce.PSN // IBV_QP_RQ_PSN: first PSN the responder expects
	MaxRdAtomic      uint8    // IBV_QP_MAX_QP_RD_ATOMIC: outstanding READs/atomics as requester
	MinRNRTimer      uint8    // IBV_QP_MIN_RNR_TIMER: code 0..31 of IBTA table 45
	SQPSN            roce.PSN // IBV_QP_SQ_PSN: first PSN the requester sends
	MaxDestRdAtomic  uint8    // IBV_QP_MAX_DEST_RD_ATOMIC: READs/atomics accepted as responder
	PathMigState     MigState // IBV_QP_PATH_MIG_STATE: MigMigrated only
	DestQPN          roce.QPN // IBV_QP_DEST_QPN
}

// MaxRdAtomicLimit is the largest max_rd_atomic and max_dest_rd_atomic a QP accepts
// (ibv_device_attr.max_qp_rd_atom / max_qp_init_rd_atom; rxe reports 128).
const MaxRdAtomicLimit = 128

// AttrError reports an attribute that a Modify call may not set or set to that value.
type AttrError struct {
	Attr   AttrMask // the offending attribute
	Reason string
}

// Error names the attribute and why it was refused.
func (e *AttrError) Error() string { return fmt.Sprintf("qp: %v: %s", e.Attr, e.Reason) }

func attrErr(a AttrMask, format string, args ...any) error {
	return &AttrError{Attr: a, Reason: fmt.Sprintf(format, args...)}
}

// checkValues validates the values of the attributes in mask for a QP of type t.
func checkValues(t Type, a *Attr, mask AttrMask) error {
	if mask&AttrAccessFlags != 0 {
		const allowed = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
		if a.AccessFlags&^allowed != 0 {
			return attrErr(AttrAccessFlags, "unknown flags %#x", uint32(a.AccessFlags&^allowed))
		}
	}
	if mask&AttrPKeyIndex != 0 && a.PKeyIndex != 0 {
		return attrErr(AttrPKeyIndex, "index %d out of range: the P_Key table holds one entry", a.PKeyIndex)
	}
	if mask&AttrPort != 0 && a.Port != 1 {
		return attrErr(AttrPort, "port %d does not exist (the device has port 1)", a.Port)
	}
	if mask&AttrAV != 0 {
		if err := a.AV.Check(); err != nil {
			return &AttrError{Attr: AttrAV, Reason: err.Error()}
		}
	}
	if mask&AttrPathMTU != 0 && !a.PathMTU.Valid() {
		return attrErr(AttrPathMTU, "%d is not an IBTA path MTU (256, 512, 1024, 2048, 4096)", a.PathMTU)
	}
	if mask&AttrTimeout != 0 && a.Timeout > 31 {
		return attrErr(AttrTimeout, "%d out of range 0..31", a.Timeout)
	}
	if mask&AttrRetryCnt != 0 && a.RetryCnt > 7 {
		return attrErr(AttrRetryCnt, "%d out of range 0..7", a.RetryCnt)
	}
	if mask&AttrRNRRetry != 0 && a.RNRRetry > 7 {
		return attrErr(AttrRNRRetry, "%d out of range 0..7", a.RNRRetry)
	}
	if mask&AttrMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return attrErr(AttrMinRNRTimer, "%d out of range 0..31", a.MinRNRTimer)
	}
	if mask&AttrRQPSN != 0 && !a.RQPSN.Valid() {
		return attrErr(AttrRQPSN, "%#x exceeds 24 bits", uint32(a.RQPSN))
	}
	if mask&AttrSQPSN != 0 && !a.SQPSN.Valid() {
		return attrErr(AttrSQPSN, "%#x exceeds 24 bits", uint32(a.SQPSN))
	}
	if mask&AttrDestQPN != 0 && !a.DestQPN.Valid() {
		return attrErr(AttrDestQPN, "%#x exceeds 24 bits", uint32(a.DestQPN))
	}
	if mask&AttrMaxQPRdAtomic != 0 && a.MaxRdAtomic > MaxRdAtomicLimit {
		return attrErr(AttrMaxQPRdAtomic, "%d exceeds the device limit %d", a.MaxRdAtomic, MaxRdAtomicLimit)
	}
	if mask&AttrMaxDestRdAtomic != 0 && a.MaxDestRdAtomic > MaxRdAtomicLimit {
		return attrErr(AttrMaxDestRdAtomic, "%d exceeds the device limit %d", a.MaxDestRdAtomic, MaxRdAtomicLimit)
	}
	if mask&AttrPathMigState != 0 && a.PathMigState != MigMigrated {
		return attrErr(AttrPathMigState, "state %d: only IBV_MIG_MIGRATED (no alternate path)", a.PathMigState)
	}
	if mask&AttrAltPath != 0 {
		return attrErr(AttrAltPath, "alternate paths (automatic path migration) are not supported")
	}
	if mask&AttrState != 0 && a.State > StateErr {
		return attrErr(AttrState, "unknown state %d", a.State)
	}
	return nil
}
