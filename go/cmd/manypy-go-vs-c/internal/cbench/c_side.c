// The binding benchmarks' shared C side, compiled into this package: cgo
// compiles only the C files in a package's own directory. Go's build cache
// does not see changes to an #included file (golang/go#24355): after
// editing bindings/bench/c_side.c, build with -a.
#include "../../../../../bindings/bench/c_side.c"
