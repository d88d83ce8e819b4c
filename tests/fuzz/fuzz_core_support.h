// For the targets that call the core directly (no C API): what the C API's
// fence would make of the exception being handled.
#pragma once

#include <new>
#include <string>

#include "error.h"
#include "fuzz_support.h"

namespace fuzz {

// The code the fence would return for the exception in flight; aborts on
// what it would call MANYPY_ERR_INTERNAL, and on an error without a
// message. Call only inside a catch block.
inline manypy::Code classify(const char* step) {
  using manypy::Code;
  try {
    throw;
  } catch (const manypy::Error& e) {
    if (e.code() == Code::kInternal && tolerated(e.message())) return Code::kBadArchive;
    if (e.code() == Code::kInternal) fail(std::string(step) + ": kInternal: " + e.message());
    if (e.message().empty()) fail(std::string(step) + ": an error without a message");
    return e.code();
  } catch (const std::bad_alloc&) {
    return Code::kResourceExhausted;
  } catch (const std::exception& e) {
    if (tolerated(e.what())) return Code::kBadArchive;
    fail(std::string(step) +
         ": an exception the C API reports as MANYPY_ERR_INTERNAL: " + e.what());
  } catch (...) {
    fail(std::string(step) + ": an unknown exception (MANYPY_ERR_INTERNAL)");
  }
}

// What reading a hostile archive may end in.
inline bool is_archive_error(manypy::Code code) {
  using manypy::Code;
  return code == Code::kBadArchive || code == Code::kNotAPackage ||
         code == Code::kUnsupportedVersion || code == Code::kResourceExhausted;
}

}  // namespace fuzz
