package roce

import (
	"errors"
	"fmt"
)

// Sentinel errors that DecodeError wraps; test with errors.Is.
var (
	// ErrTruncated: the frame ends before a header or length it declares.
	ErrTruncated = errors.New("truncated")
	// ErrNotRoCE: a well-formed frame that is not RoCEv2 (another EtherType, protocol
	// or UDP port). Callers relaying non-RoCE traffic test for it.
	ErrNotRoCE = errors.New("not RoCEv2")
	// ErrUnknownOpcode: a BTH opcode outside the opcode table.
	ErrUnknownOpcode = errors.New("unknown opcode")
	// ErrBadLength: IP or UDP lengths that disagree with each other or the frame.
	ErrBadLength = errors.New("length mismatch")
	// ErrBadPadCount: a pad count larger than the payload, or pad on a packet that may
	// not carry payload.
	ErrBadPadCount = errors.New("bad pad count")
	// ErrBadHeader: a field value the standard forbids (IP version, IHL, fragments).
	ErrBadHeader = errors.New("bad header")
	// ErrBadICRC: the ICRC does not match the packet.
	ErrBadICRC = errors.New("ICRC mismatch")
)

// DecodeError reports where and why a frame failed to decode.
type DecodeError struct {
	Layer  string // "ethernet", "ipv4", "ipv6", "udp", "bth", "eth", "payload"
	Offset int    // byte offset in the frame where the problem was found
	Err    error  // one of the sentinel errors above
	Detail string // what exactly was wrong
}

// Error says where and why: "roce: LAYER at offset N: SENTINEL: DETAIL".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("roce: %s at offset %d: %v: %s", e.Layer, e.Offset, e.Err, e.Detail)
}

// Unwrap returns the sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// UnknownOpcodeError is the Detail-carrying form of ErrUnknownOpcode; it is what
// errors.As finds for a frame whose opcode is outside the table.
type UnknownOpcodeError struct {
	Opcode Opcode
}

// Error names the opcode.
func (e *UnknownOpcodeError) Error() string {
	return fmt.Sprintf("roce: unknown BTH opcode %#02x", uint8(e.Opcode))
}

// Is makes errors.Is(err, ErrUnknownOpcode) true.
func (e *UnknownOpcodeError) Is(target error) bool { return target == ErrUnknownOpcode }

func decodeErr(layer string, off int, err error, format string, args ...any) error {
	return &DecodeError{Layer: layer, Offset: off, Err: err, Detail: fmt.Sprintf(format, args...)}
}
