// Fuzz target: any bytes as an AOTInductor package (.pt2), checked as
// manypy_aoti_load_bytes checks them before libtorch's loader sees them:
// manypy::Archive::from_bytes, then inspect_aoti_package (records that
// would leave the extraction directory, the compiled library's ELF header,
// the metadata's JSON, device, machine and instruction set). Needs no torch
// 2.x, so it runs in the fuzz build on every leg. libtorch's loader itself
// is not fuzzed: it opens the package's compiled library, which is native
// code by design; what guards it is the trust check (docs/security.md).
//
// A second half reads the input as a serialized TreeSpec (the call spec of
// a compiled model) and flattens arguments of its shape along it.
#include <memory>
#include <string>

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
  } catch (...) {
    Code code = fuzz::classify("inspect");
    FUZZ_CHECK(fuzz::is_archive_error(code), std::to_string(static_cast<int>(code)));
  }
  return 0;
}

MANYPY_FUZZ_ZIP_MUTATOR
