// The tool that writes manypy's Go module into a module proxy directory
// (scripts/package/goproxy.sh). Its own module, so that golang.org/x/mod is
// pinned here and not a requirement of manypy.dev/manypy. x/mod v0.33.0 is
// the newest that needs no Go newer than the binding's 1.24.
module manypy.dev/tools/goproxy

go 1.24.0

require golang.org/x/mod v0.33.0
