// A service's module that uses manypy as any Go module: run.sh adds the
// requirement with `go get manypy.dev/manypy@v0.3.0`, from a module proxy
// (no replace directive, no checkout).
module example.com/manypy-consumer

go 1.24
