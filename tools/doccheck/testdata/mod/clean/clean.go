// Package clean is a fixture that documents every exported identifier.
package clean

// Func does nothing.
func Func() {}

// Type is a type.
type Type int

// String returns the empty string.
func (Type) String() string { return "" }

// Values of Type.
const (
	A Type = iota
	B
)
