// The Go binding of manypy (docs/go.md, "Installing"): its versions are
// the library's (v0.3.0 goes with libmanypy.so.0.3), published as a module
// proxy directory by scripts/package/goproxy.sh.
module manypy.dev/manypy

// runtime.AddCleanup (the backstop that frees unclosed handles) needs 1.24;
// runtime.Pinner (zero-copy tensors over Go slices) needs 1.21.
go 1.24

require (
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sys v0.35.0 // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)
