package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MAD is a view of a Management Datagram (IBTA 13.4.2): a 24-byte common header
// followed by 232 bytes of class data.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  BaseVersion  |   MgmtClass   | ClassVersion  |R|   Method    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Status             |         ClassSpecific         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     TransactionID (64 bits)                   |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          AttributeID          |           Reserved            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      AttributeModifier                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   Data (232 bytes, per class)                 |
//
// R is set in responses (GetResp); the CM sends all its messages with Method Send.
type MAD []byte

const (
	// MADSize is the size of every MAD on the GSI QP.
	MADSize = 256
	// HeaderSize is the size of the MAD common header.
	HeaderSize = 24

	// BaseVersion is the only MAD base version (IBTA 13.4.2).
	BaseVersion = 1
	// ClassCM is the management class of connection management.
	ClassCM = 0x07
	// ClassVersionCM is the CM class version the kernel speaks (IBTA 1.2 and later).
	ClassVersionCM = 2

	// GSIQKey is the Q_Key of the GSI QP (IBTA 10.2.5); CM MADs carry it in their DETH.
	GSIQKey uint32 = 0x80010000
)

// Method is a MAD method (IBTA 13.4.5), the response bit included.
type Method uint8

// MAD methods the CM uses.
const (
	MethodGet     Method = 0x01 // read an attribute (ClassPortInfo)
	MethodSet     Method = 0x02 // write an attribute
	MethodSend    Method = 0x03 // a message that expects no response: every CM message
	MethodGetResp Method = 0x81 // the response to a Get (the response bit set)
)

// AttributeID names the CM message a MAD carries (IBTA 12.11).
type AttributeID uint16

// CM attributes.
const (
	AttrClassPortInfo AttributeID = 0x0001 // the class's capabilities and redirection
	AttrREQ           AttributeID = 0x0010 // ConnectRequest
	AttrMRA           AttributeID = 0x0011 // MessageReceiptAcknowledgement
	AttrREJ           AttributeID = 0x0012 // ConnectReject
	AttrREP           AttributeID = 0x0013 // ConnectReply
	AttrRTU           AttributeID = 0x0014 // ReadyToUse
	AttrDREQ          AttributeID = 0x0015 // DisconnectRequest
	AttrDREP          AttributeID = 0x0016 // DisconnectReply
	AttrSIDRREQ       AttributeID = 0x0017 // ServiceIDResolutionRequest
	AttrSIDRREP       AttributeID = 0x0018 // ServiceIDResolutionResponse
	AttrLAP           AttributeID = 0x0019 // LoadAlternatePath
	AttrAPR           AttributeID = 0x001A // AlternatePathResponse
)

var attrNames = map[AttributeID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

// String returns the message's name (REQ, SIDR_REQ, ...) or the number of an
// attribute this package does not know.
func (a AttributeID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("attribute %#04x", uint16(a))
}

// MADFields holds the values of a MAD common header, for Encode.
type MADFields struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        Method
	Status        uint16
	ClassSpecific uint16
	TransactionID uint64
	AttributeID   AttributeID
	AttributeMod  uint32
}

// Offsets of the MAD common header's fields.
const (
	madBaseVersion   = 0
	madMgmtClass     = 1
	madClassVersion  = 2
	madMethod        = 3  // R and Method
	madStatus        = 4  // 16 bits
	madClassSpecific = 6  // 16 bits
	madTID           = 8  // TransactionID, 64 bits
	madAttrID        = 16 // 16 bits
	madReserved      = 18 // 16 bits
	madAttrMod       = 20 // 32 bits
)

// Offsets of the communication IDs that open every connected-mode CM message (REQ has
// only the local one), and of SIDR's request ID, which stands where the local one does.
const (
	cmLocalCommID  = HeaderSize
	cmRemoteCommID = HeaderSize + 4
	sidrRequestID  = cmLocalCommID
)

// BaseVersion returns the MAD base version (BaseVersion).
func (m MAD) BaseVersion() uint8 { return m[madBaseVersion] }

// MgmtClass returns the management class (ClassCM).
func (m MAD) MgmtClass() uint8 { return m[madMgmtClass] }

// ClassVersion returns the version of the management class.
func (m MAD) ClassVersion() uint8 { return m[madClassVersion] }

// Method returns the method, the response bit included.
func (m MAD) Method() Method { return Method(m[madMethod]) }

// Status returns the status field (0 in CM messages).
func (m MAD) Status() uint16 { return binary.BigEndian.Uint16(m[madStatus:]) }

// ClassSpecific returns the class-specific field.
func (m MAD) ClassSpecific() uint16 { return binary.BigEndian.Uint16(m[madClassSpecific:]) }

// TransactionID returns the transaction ID that pairs a response with its request.
func (m MAD) TransactionID() uint64 { return binary.BigEndian.Uint64(m[madTID:]) }

// AttributeID returns the attribute: which CM message the MAD carries.
func (m MAD) AttributeID() AttributeID {
	return AttributeID(binary.BigEndian.Uint16(m[madAttrID:]))
}

// AttributeMod returns the attribute modifier.
func (m MAD) AttributeMod() uint32 { return binary.BigEndian.Uint32(m[madAttrMod:]) }

// SetTransactionID sets the transaction ID.
func (m MAD) SetTransactionID(t uint64) { binary.BigEndian.PutUint64(m[madTID:], t) }

// SetAttributeID sets the attribute.
func (m MAD) SetAttributeID(a AttributeID) {
	binary.BigEndian.PutUint16(m[madAttrID:], uint16(a))
}

// SetStatus sets the status field.
func (m MAD) SetStatus(s uint16) { binary.BigEndian.PutUint16(m[madStatus:], s) }

// Fields returns the header's values.
func (m MAD) Fields() MADFields {
	return MADFields{
		BaseVersion: m.BaseVersion(), MgmtClass: m.MgmtClass(), ClassVersion: m.ClassVersion(),
		Method: m.Method(), Status: m.Status(), ClassSpecific: m.ClassSpecific(),
		TransactionID: m.TransactionID(), AttributeID: m.AttributeID(), AttributeMod: m.AttributeMod(),
	}
}

// Encode writes every header field of f, the reserved field as zero.
func (m MAD) Encode(f *MADFields) {
	m[madBaseVersion], m[madMgmtClass], m[madClassVersion] = f.BaseVersion, f.MgmtClass, f.ClassVersion
	m[madMethod] = byte(f.Method)
	binary.BigEndian.PutUint16(m[madStatus:], f.Status)
	binary.BigEndian.PutUint16(m[madClassSpecific:], f.ClassSpecific)
	binary.BigEndian.PutUint64(m[madTID:], f.TransactionID)
	binary.BigEndian.PutUint16(m[madAttrID:], uint16(f.AttributeID))
	binary.BigEndian.PutUint16(m[madReserved:], 0)
	binary.BigEndian.PutUint32(m[madAttrMod:], f.AttributeMod)
}

// CMHeader returns the common header of a CM message with method Send, as the kernel's
// CM sends every message.
func CMHeader(attr AttributeID, tid uint64) MADFields {
	return MADFields{
		BaseVersion: BaseVersion, MgmtClass: ClassCM, ClassVersion: ClassVersionCM,
		Method: MethodSend, TransactionID: tid, AttributeID: attr,
	}
}

// Sentinel errors of Parse; test with errors.Is.
var (
	// ErrTruncated: fewer than MADSize bytes.
	ErrTruncated = errors.New("truncated MAD")
	// ErrNotCM: a well-formed MAD of another class, version or method.
	ErrNotCM = errors.New("not a CM MAD")
	// ErrUnknownAttribute: a CM MAD whose attribute is not a CM message this package knows.
	ErrUnknownAttribute = errors.New("unknown CM attribute")
	// ErrBadField: a field value the IBTA forbids.
	ErrBadField = errors.New("bad CM field")
)

// ParseError says why Parse rejected a MAD.
type ParseError struct {
	Err    error  // one of the sentinel errors above
	Detail string // what exactly was wrong
}

// Error says what was wrong: "cm: SENTINEL: DETAIL".
func (e *ParseError) Error() string { return "cm: " + e.Err.Error() + ": " + e.Detail }

// Unwrap returns the sentinel error.
func (e *ParseError) Unwrap() error { return e.Err }

// parseErr returns a *ParseError wrapping err with a formatted detail.
func parseErr(err error, format string, args ...any) error {
	return &ParseError{Err: err, Detail: fmt.Sprintf(format, args...)}
}

// Parse validates the payload of a GSI packet as a CM MAD and returns the MAD's view,
// whose AttributeID says which message view (REQ(m), REP(m), ...) applies. The view
// covers the first MADSize bytes; bytes beyond (a padded packet) are ignored.
func Parse(b []byte) (MAD, error) {
	if len(b) < MADSize {
		return nil, parseErr(ErrTruncated, "%d bytes, a MAD has %d", len(b), MADSize)
	}
	m := MAD(b[:MADSize])
	if m.BaseVersion() != BaseVersion || m.MgmtClass() != ClassCM || m.ClassVersion() != ClassVersionCM {
		return nil, parseErr(ErrNotCM, "base version %d, class %#02x, class version %d",
			m.BaseVersion(), m.MgmtClass(), m.ClassVersion())
	}
	switch a := m.AttributeID(); a {
	case AttrREQ, AttrMRA, AttrREJ, AttrREP, AttrRTU, AttrDREQ, AttrDREP, AttrSIDRREQ, AttrSIDRREP:
		if m.Method() != MethodSend {
			return nil, parseErr(ErrNotCM, "%v with method %#02x", a, uint8(m.Method()))
		}
	case AttrClassPortInfo, AttrLAP, AttrAPR:
		// Well-formed CM MADs the kernel may send; the agent answers or ignores them
		// by attribute, so Parse accepts them without a view of their body.
	default:
		return nil, parseErr(ErrUnknownAttribute, "%v", a)
	}
	if m.AttributeID() == AttrREJ {
		if n := REJ(m).RejectInfoLength(); n > rejARISize {
			return nil, parseErr(ErrBadField, "REJ additional reject information length %d > %d", n, rejARISize)
		}
	}
	return m, nil
}

// localCommID returns the local communication ID of a CM message (SIDR's request ID).
func localCommID(m []byte) uint32 { return binary.BigEndian.Uint32(m[cmLocalCommID:]) }

// remoteCommID returns the remote communication ID of a CM message other than REQ.
func remoteCommID(m []byte) uint32 { return binary.BigEndian.Uint32(m[cmRemoteCommID:]) }

// setUint24 stores v's low 24 bits big-endian in b[0:3].
func setUint24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

// uint24 loads a big-endian 24-bit value from b[0:3].
func uint24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

// boolBit returns bit when v holds, 0 otherwise.
func boolBit(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}
