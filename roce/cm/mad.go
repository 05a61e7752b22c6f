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
	MethodGet     Method = 0x01
	MethodSet     Method = 0x02
	MethodSend    Method = 0x03
	MethodGetResp Method = 0x81
)

// AttributeID names the CM message a MAD carries (IBTA 12.11).
type AttributeID uint16

// CM attributes.
const (
	AttrClassPortInfo AttributeID = 0x0001
	AttrREQ           AttributeID = 0x0010
	AttrMRA           AttributeID = 0x0011
	AttrREJ           AttributeID = 0x0012
	AttrREP           AttributeID = 0x0013
	AttrRTU           AttributeID = 0x0014
	AttrDREQ          AttributeID = 0x0015
	AttrDREP          AttributeID = 0x0016
	AttrSIDRREQ       AttributeID = 0x0017
	AttrSIDRREP       AttributeID = 0x0018
	AttrLAP           AttributeID = 0x0019
	AttrAPR           AttributeID = 0x001A
)

var attrNames = map[AttributeID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

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

func (m MAD) BaseVersion() uint8           { return m[0] }
func (m MAD) MgmtClass() uint8             { return m[1] }
func (m MAD) ClassVersion() uint8          { return m[2] }
func (m MAD) Method() Method               { return Method(m[3]) }
func (m MAD) Status() uint16               { return binary.BigEndian.Uint16(m[4:]) }
func (m MAD) ClassSpecific() uint16        { return binary.BigEndian.Uint16(m[6:]) }
func (m MAD) TransactionID() uint64        { return binary.BigEndian.Uint64(m[8:]) }
func (m MAD) AttributeID() AttributeID     { return AttributeID(binary.BigEndian.Uint16(m[16:])) }
func (m MAD) AttributeMod() uint32         { return binary.BigEndian.Uint32(m[20:]) }
func (m MAD) SetTransactionID(t uint64)    { binary.BigEndian.PutUint64(m[8:], t) }
func (m MAD) SetAttributeID(a AttributeID) { binary.BigEndian.PutUint16(m[16:], uint16(a)) }
func (m MAD) SetStatus(s uint16)           { binary.BigEndian.PutUint16(m[4:], s) }

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
	m[0], m[1], m[2], m[3] = f.BaseVersion, f.MgmtClass, f.ClassVersion, byte(f.Method)
	binary.BigEndian.PutUint16(m[4:], f.Status)
	binary.BigEndian.PutUint16(m[6:], f.ClassSpecific)
	binary.BigEndian.PutUint64(m[8:], f.TransactionID)
	binary.BigEndian.PutUint16(m[16:], uint16(f.AttributeID))
	binary.BigEndian.PutUint16(m[18:], 0)
	binary.BigEndian.PutUint32(m[20:], f.AttributeMod)
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

func (e *ParseError) Error() string { return "cm: " + e.Err.Error() + ": " + e.Detail }

// Unwrap returns the sentinel error.
func (e *ParseError) Unwrap() error { return e.Err }

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

// commIDs are the two communication IDs that open every connected-mode CM message
// but REQ (which has only its local one).
func localCommID(m []byte) uint32  { return binary.BigEndian.Uint32(m[24:]) }
func remoteCommID(m []byte) uint32 { return binary.BigEndian.Uint32(m[28:]) }

func setUint24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }
func uint24(b []byte) uint32       { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func boolBit(v bool, bit byte) byte {
	if v {
		return bit
	}
	return 0
}
