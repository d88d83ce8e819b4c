// manypy-go-vs-c is a module of its own because its C side #includes
// bindings/bench/c_side.c from outside go/, which a module zip of
// manypy.dev/manypy could not hold (scripts/package/goproxy.sh): it builds
// only in a checkout, against the binding beside it.
module manypy.dev/manypy/cmd/manypy-go-vs-c

go 1.24

require manypy.dev/manypy v0.0.0

replace manypy.dev/manypy => ../..
