package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// The files cgo compiles or reads preambles from.
var cgoExts = []string{".go", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".s", ".S"}

var (
	// #include "x" (not <x>: those come from the system, or pkg-config's -I).
	includeRe = regexp.MustCompile(`^\s*(?://\s*)?#\s*include\s+"([^"]+)"`)
	// ${SRCDIR}/x in a #cgo directive: a path relative to the package.
	srcdirRe = regexp.MustCompile(`\$\{SRCDIR\}/([^\s"']+)`)
)

// Headers that cgo itself writes into the package's build directory.
var generated = map[string]bool{"_cgo_export.h": true}

// checkIncludes fails if a file of the zip names, by a quoted #include or
// through ${SRCDIR}, a file that the zip does not hold: such a package
// builds in a checkout and fails for everyone who gets the module.
func checkIncludes(dir string, paths []string) error {
	// CheckDir reports paths under dir; the zip's are relative to it.
	valid := make([]string, 0, len(paths))
	inZip := make(map[string]bool, len(paths))
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		valid = append(valid, rel)
		inZip[rel] = true
	}
	var problems []string
	for _, f := range valid {
		if !hasExt(f, cgoExts) {
			continue
		}
		refs, err := references(dir + "/" + f)
		if err != nil {
			return err
		}
		for _, ref := range refs {
			if generated[ref] {
				continue
			}
			target := path.Clean(path.Join(path.Dir(f), ref))
			switch {
			case target == ".." || strings.HasPrefix(target, "../"):
				problems = append(problems, fmt.Sprintf("%s names %q, outside the module", f, ref))
			case !inZip[target] && !isDirIn(target, valid):
				// A quoted include may also be found through -I; only
				// one that resolves next to the file is checked.
				if _, err := os.Stat(dir + "/" + target); err == nil {
					problems = append(problems, fmt.Sprintf("%s names %q, which the zip leaves out", f, ref))
				}
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the module would not build from its zip, which can hold only files under %s:\n  %s\n"+
			"move what they need into the module, or move them into a module of their own (a directory with its own go.mod)",
			dir, strings.Join(problems, "\n  "))
	}
	return nil
}

// references returns the quoted #include paths and ${SRCDIR} paths of a file.
func references(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []string
	scan := bufio.NewScanner(f)
	scan.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for scan.Scan() {
		line := scan.Text()
		if m := includeRe.FindStringSubmatch(line); m != nil {
			refs = append(refs, m[1])
		}
		if strings.Contains(line, "#cgo") {
			for _, m := range srcdirRe.FindAllStringSubmatch(line, -1) {
				refs = append(refs, m[1])
			}
		}
	}
	return refs, scan.Err()
}

func hasExt(name string, exts []string) bool {
	for _, e := range exts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// isDirIn reports whether dir is a directory of the zip (an -I${SRCDIR}/x).
func isDirIn(dir string, files []string) bool {
	for _, f := range files {
		if strings.HasPrefix(f, dir+"/") {
			return true
		}
	}
	return false
}
