package manypy

// The C side: libmanypy.so through pkg-config. Against an install,
// PKG_CONFIG_PATH=<prefix>/lib/pkgconfig finds manypy.pc; against a build
// tree, PKG_CONFIG_PATH=<build>/pkgconfig finds manypy-uninstalled.pc, which
// pkg-config prefers and which also sets the RUNPATH to the build's lib/.

/*
#cgo pkg-config: manypy
#include <stdlib.h>
#include "glue.h"
*/
import "C"
