// The Go binding of manypy (docs/go.md). Nothing is published: services use
// it from a checkout, through a replace directive (samples/go/go.mod).
module manypy.dev/manypy

// runtime.AddCleanup (the backstop that frees unclosed handles) needs 1.24;
// runtime.Pinner (zero-copy tensors over Go slices) needs 1.21.
go 1.24
