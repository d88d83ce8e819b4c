// Command goproxy writes one version of a Go module into a module proxy
// directory, in the layout of the GOPROXY protocol, which the go command
// reads through GOPROXY=file:///that/dir:
//
//	<out>/<escaped module path>/@v/list           the versions, one a line
//	<out>/<escaped module path>/@v/<version>.info {"Version": ..., "Time": ...}
//	<out>/<escaped module path>/@v/<version>.mod  the module's go.mod
//	<out>/<escaped module path>/@v/<version>.zip  made by golang.org/x/mod/zip
//
// Before writing, it refuses a module whose zip could not build: a file the
// zip rules reject, or a C file (cgo) that #includes, or a #cgo directive
// that names through ${SRCDIR}, a path outside the module, which a module
// zip cannot hold. scripts/package/goproxy.sh runs it and then builds the
// result.
//
// usage: goproxy -dir <module dir> -version vX.Y.Z -time <RFC 3339> -out <dir>
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

func main() {
	dir := flag.String("dir", "", "the module's directory (holding its go.mod)")
	version := flag.String("version", "", "the version to publish, canonical semver: v0.3.0")
	stamp := flag.String("time", "", "the version's time in the .info file, RFC 3339 (the commit's)")
	out := flag.String("out", "", "the proxy directory to write into (created if missing)")
	flag.Parse()
	if err := run(*dir, *version, *stamp, *out); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
}

func run(dir, version, stamp, out string) error {
	if dir == "" || version == "" || stamp == "" || out == "" || flag.NArg() != 0 {
		return fmt.Errorf("usage: goproxy -dir <module dir> -version vX.Y.Z -time <RFC 3339> -out <dir>")
	}
	when, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return fmt.Errorf("-time %q is not RFC 3339 (as `git log -1 --format=%%cI` prints it): %v", stamp, err)
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("-dir %s is not a module directory: %v", dir, err)
	}
	path := modfile.ModulePath(goMod)
	if path == "" {
		return fmt.Errorf("%s/go.mod has no module line", dir)
	}
	if semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version such as v0.3.0", version)
	}
	mv := module.Version{Path: path, Version: version}
	// Checks the path and that the version fits it (a /v2 path needs v2.x.y).
	if err := module.Check(path, version); err != nil {
		return err
	}

	files, err := modzip.CheckDir(dir)
	for _, f := range files.Omitted {
		rel, _ := filepath.Rel(dir, f.Path)
		fmt.Printf("goproxy: left out of the zip: %s (%v)\n", rel, f.Err)
	}
	if err != nil {
		return fmt.Errorf("%s cannot be a module zip: %v", dir, err)
	}
	if err := checkIncludes(dir, files.Valid); err != nil {
		return err
	}

	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	if err := writeZip(filepath.Join(vdir, version+".zip"), mv, dir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".mod"), goMod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".info"), append(info, '\n'), 0o644); err != nil {
		return err
	}
	if err := addToList(filepath.Join(vdir, "list"), version); err != nil {
		return err
	}
	fmt.Printf("goproxy: %s@%s in %s (%d files)\n", path, version, vdir, len(files.Valid))
	return nil
}

// writeZip makes the zip beside its final name and renames it, so that an
// interrupted run never leaves a truncated zip a proxy would serve, and
// checks the result as the go command will.
func writeZip(name string, mv module.Version, dir string) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := modzip.CreateFromDir(f, mv, dir); err != nil {
		f.Close()
		return fmt.Errorf("zip of %s: %v", dir, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if _, err := modzip.CheckZip(mv, tmp); err != nil {
		return fmt.Errorf("the zip written does not check: %v", err)
	}
	return os.Rename(tmp, name)
}

// addToList adds version to the proxy's list of versions, keeping the
// others (a proxy directory may hold several), sorted by semver.
func addToList(name, version string) error {
	var versions []string
	if data, err := os.ReadFile(name); err == nil {
		versions = strings.Fields(string(data))
	} else if !os.IsNotExist(err) {
		return err
	}
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(name, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}
