package telemetry

import "github.com/rocelab/rocelab/roce"

// Detacher is a Codec whose block can travel beside a frame instead of inside it.
//
// In a payload-free simulation nothing reads a block's bytes between the NIC that
// requests it and the NIC that strips it but the switches' stamping, so the block
// need not sit between the UDP header and the BTH, to be opened at the sender, grown
// at every hop and closed at the receiver by moving the headers: the frame carries it
// in a buffer of its own (fabric/link's Frame.Detached), its bytes counted in the
// frame's length on the wire. The frame's headers show the format's signal as they
// would with the block in them (the DSCP, kept in the block as Request keeps it);
// their length fields do not count the block. The block holds the same bytes the
// frame would hold, written and read by the same code as Push and Decode, so a
// receiver decodes exactly the hops it would have decoded from the frame.
//
// Each method takes the block as a slice whose capacity is the room it may grow into
// and returns it as it now is. A block that is not the codec's is ErrMalformed.
type Detacher interface {
	// RequestDetached marks frame, whose headers l locates, with the request signal
	// and writes the empty block into blk[:0]; ErrUnsupported for a frame that cannot
	// carry the format, ErrAlreadyPresent when blk is not empty.
	RequestDetached(frame []byte, l roce.Layout, blk []byte) ([]byte, error)
	// PushDetached is Push into the block: ipLen is the length of the frame's IP
	// packet as it would be with the block in it (what the format's MTU limit is
	// measured against). It does not set h.TTL.
	PushDetached(blk []byte, h *Hop, ipLen int) ([]byte, Status, error)
	// DecodeDetached is the decoder's hops of the block, into st.
	DecodeDetached(blk []byte, st *Stack) error
	// StripDetached restores in frame, whose headers l locates, the signal the block
	// replaced (the DSCP it keeps); the caller then drops the block.
	StripDetached(frame []byte, l roce.Layout, blk []byte) error
}
