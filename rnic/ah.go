package rnic

import (
	"github.com/rocelab/rocelab/qp"
	"github.com/rocelab/rocelab/rnic/ibv"
)

// AH is an address handle (ibv_ah): a resolved path for UD work requests.
type AH struct {
	pd *PD
	av qp.AddressVector
}

// AHAttr describes an address handle: ibv.AHAttr.
type AHAttr = ibv.AHAttr

// CreateAH creates an address handle (ibv_create_ah). Like the move of a connected QP to
// RTR, it fails with ErrUnresolved while the destination's MAC is unknown.
func (d *Device) CreateAH(pd *PD, attr AHAttr) (*AH, error) {
	sgid, err := d.QueryGID(attr.SGIDIndex)
	if err != nil {
		return nil, err
	}
	av := qp.AddressVector{DGID: attr.DGID, SGID: sgid, TrafficClass: attr.TrafficClass,
		HopLimit: attr.HopLimit, FlowLabel: attr.FlowLabel & flowLabelMask}
	if err := av.Check(); err != nil {
		return nil, errorf(ErrInvalidArgument, "%v", err)
	}
	if err := d.resolveAV(&av); err != nil {
		return nil, err
	}
	pd.refs++
	return &AH{pd: pd, av: av}, nil
}

// DestroyAH destroys an address handle (ibv_destroy_ah).
func (d *Device) DestroyAH(ah *AH) error {
	ah.pd.refs--
	return nil
}

// AV returns the resolved address vector to put in a UD work request (SendWR.AH).
func (ah *AH) AV() *qp.AddressVector { return &ah.av }
