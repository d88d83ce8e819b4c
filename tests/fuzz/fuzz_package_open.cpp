// Fuzz target: any bytes as a torch.package, checked on the host as
// manypy_package_load_bytes checks them before any Python runs, without a
// pool: manypy::Archive::from_bytes and the manypy::Package constructor
// (core/src/package.cpp: a torch.package has .data/extern_modules). A package
// that opens is then read as manypy_package_list_files and _read_file read
// it: every record (up to 64).
#include <new>
#include <string>
#include <vector>

#include "archive.h"
#include "error.h"
#include "fuzz_core_support.h"
#include "package.h"
#include "zip_mutator.h"

namespace {

using fuzz::classify;
using fuzz::is_archive_error;
using manypy::Code;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<manypy::Archive> archive;
  std::unique_ptr<manypy::Package> package;
  try {
    archive = manypy::Archive::from_bytes(data, size);
    // No pool: the constructor checks the archive and registers it, and
    // touches the pool only when an interpreter opens the package.
    package = std::make_unique<manypy::Package>(nullptr, archive);
  } catch (...) {
    Code code = classify("open");
    FUZZ_CHECK(is_archive_error(code), std::to_string(static_cast<int>(code)));
    return 0;
  }
  FUZZ_CHECK(archive->has_record(".data/extern_modules"), "a package without extern_modules");

  std::vector<std::string> names;
  try {
    manypy::Value list = package->archive().records_value();
    FUZZ_CHECK(list.kind == manypy::ValueKind::kList, "records are not a list");
    for (const manypy::Value& name : list.items) {
      FUZZ_CHECK(name.kind == manypy::ValueKind::kString, "a record name is not a string");
      names.push_back(name.s);
    }
  } catch (...) {
    Code code = classify("records");
    FUZZ_CHECK(is_archive_error(code), std::to_string(static_cast<int>(code)));
    return 0;
  }
  if (names.size() > 64) names.resize(64);
  for (const std::string& name : names) {
    try {
      std::string bytes = package->archive().read(name);
      volatile unsigned sum = 0;
      for (unsigned char c : bytes) sum += c;
      (void)sum;
    } catch (...) {
      Code code = classify("read");
      // kNoSuchName as in fuzz_archive_read.cpp.
      FUZZ_CHECK(is_archive_error(code) || code == Code::kNoSuchName,
                 name + ": " + std::to_string(static_cast<int>(code)));
    }
  }
  return 0;
}

MANYPY_FUZZ_ZIP_MUTATOR
