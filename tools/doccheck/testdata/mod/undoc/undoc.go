// Package undoc is a fixture: the identifiers named Bare* lack a doc comment.
package undoc

func BareFunc() {}

type BareType struct{}

func (BareType) BareMethod() {}

// Documented is documented; its method is not.
type Documented[K any] struct{}

func (*Documented[K]) BareGenericMethod() {}

const (
	BareConst = 1
	// DocConst has its own comment.
	DocConst      = 2
	TrailingConst = 3 // a comment at the end of its line
)

var BareVar, bareVar = 1, 2

// Group's comment documents every constant in it.
const (
	GroupA = iota
	GroupB
)

type unexported struct{}

// The method of an unexported type is not in go doc.
func (unexported) Exported() {}

func unexportedFunc() {}
