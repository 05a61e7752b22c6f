package link

// prefetch asks the processor to bring the two cache lines at p into its caches,
// without waiting for them.
//
//go:noescape
func prefetch(p *byte)
