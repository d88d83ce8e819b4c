// Fuzz target: any bytes as an AOTInductor package (.pt2), checked as
// manypy_aoti_load_bytes checks them before libtorch's loader sees them:
// manypy::Archive::from_bytes, then inspect_aoti_package (records that
// would leave the extraction directory, the compiled library's ELF header,
// the metadata's JSON, device, machine and instruction set), and the
// library's dependency on libtorch.so pointed at libtorch_cpu.so as the
// runner does. Needs no torch
// 2.x, so it runs in the fuzz build on every leg. libtorch's loader itself
// is not fuzzed: it opens the package's compiled library, which is native
// code by design; what guards it is the trust check (docs/security.md).
//
// A second half reads the input as a serialized TreeSpec (the call spec of
// a compiled model) and flattens arguments of its shape along it.
#include <memory>
#include <string>
#include <vector>

#include "aoti_package.h"
#include "archive.h"
#include "fuzz_core_support.h"
#include "tree_spec.h"
#include "zip_mutator.h"

namespace {

using manypy::Code;
using manypy::TreeSpec;
using manypy::Value;
using manypy::ValueKind;

// A value of `spec`'s shape, tensors stood in for by tensor values without
// data (flattening looks only at kinds).
Value shaped_like(const TreeSpec& spec) {
  switch (spec.kind) {
    case TreeSpec::Kind::kLeaf: {
      Value v;
      v.kind = ValueKind::kTensor;
      return v;
    }
    case TreeSpec::Kind::kNone:
      return Value::none();
    case TreeSpec::Kind::kTuple:
    case TreeSpec::Kind::kList: {
      Value v = Value::container(spec.kind == TreeSpec::Kind::kTuple ? ValueKind::kTuple
                                                                     : ValueKind::kList);
      for (const TreeSpec& child : spec.children) {
        Value item = shaped_like(child);
        v.depth = v.depth_with(item);
        v.append(std::move(item));
      }
      return v;
    }
    case TreeSpec::Kind::kDict: {
      Value v = Value::container(ValueKind::kDict);
      for (size_t k = 0; k < spec.children.size(); ++k) {
        Value item = shaped_like(spec.children[k]);
        v.depth = v.depth_with(item);
        v.put(spec.keys[k], std::move(item));
      }
      return v;
    }
  }
  return Value::none();
}

void fuzz_tree_spec(const uint8_t* data, size_t size) {
  TreeSpec spec;
  try {
    spec = TreeSpec::parse(std::string(reinterpret_cast<const char*>(data), size), "spec");
  } catch (...) {
    Code code = fuzz::classify("parse");
    FUZZ_CHECK(code == Code::kBadArchive || code == Code::kUnsupportedType ||
                   code == Code::kUnsupportedVersion,
               std::to_string(static_cast<int>(code)));
    return;
  }
  (void)spec.describe();
  Value whole = shaped_like(spec);
  if (spec.kind != TreeSpec::Kind::kTuple || spec.children.size() != 2 ||
      spec.children[1].kind != TreeSpec::Kind::kDict || whole.items[0].kind == ValueKind::kNone) {
    return;
  }
  // Keys may repeat in a hostile spec; flattening then reports what it finds.
  try {
    auto leaves = manypy::flatten_arguments(spec, &whole.items[0], &whole.items[1]);
    FUZZ_CHECK(leaves.size() <= spec.leaves, "more leaves than the spec has");
  } catch (...) {
    Code code = fuzz::classify("flatten");
    FUZZ_CHECK(code == Code::kInvalidArgument || code == Code::kUnsupportedType ||
                   code == Code::kWrongKind,
               std::to_string(static_cast<int>(code)));
  }
}

// What the runner does to an accepted package's library before the loader
// sees it (aoti_runner_torch2.cpp): its libtorch.so dependency pointed at
// libtorch_cpu.so. Never throws on a library inspect accepted, changes no
// size, and leaves exactly the names it said it changed.
void check_redirect(std::string library) {
  const std::vector<std::string> before = manypy::needed_libraries(library);
  const size_t size = library.size();
  const int changed = manypy::redirect_needed(library, "libtorch.so", "libtorch_cpu.so");
  FUZZ_CHECK(library.size() == size, "the library changed size");
  const std::vector<std::string> after = manypy::needed_libraries(library);
  FUZZ_CHECK(after.size() == before.size(), "the number of dependencies changed");
  int differ = 0;
  for (size_t k = 0; k < before.size(); ++k) {
    if (before[k] == after[k]) continue;
    FUZZ_CHECK(before[k] == "libtorch.so" && after[k] == "libtorch_cpu.so",
               "a dependency other than libtorch.so changed");
    ++differ;
  }
  FUZZ_CHECK(differ == changed, "redirect_needed miscounted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == '[') {
    fuzz_tree_spec(data, size);
    return 0;
  }
  std::shared_ptr<manypy::Archive> archive;
  try {
    archive = manypy::Archive::from_bytes(data, size);
    manypy::AotiPackageInfo info = manypy::inspect_aoti_package(*archive);
    FUZZ_CHECK(!info.library.empty() && !info.model_name.empty(), "an empty library or model");
    check_redirect(manypy::read_listed_record(*archive, info.library));
  } catch (...) {
    Code code = fuzz::classify("inspect");
    FUZZ_CHECK(fuzz::is_archive_error(code), std::to_string(static_cast<int>(code)));
  }
  return 0;
}

MANYPY_FUZZ_ZIP_MUTATOR
