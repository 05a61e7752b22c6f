//go:build !amd64

package link

// prefetch does nothing where the processor's prefetch instruction is not wired up.
func prefetch(*byte) {}
