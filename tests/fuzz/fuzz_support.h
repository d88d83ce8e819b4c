// Shared by the libFuzzer targets (docs/hardening.md): every manypy_status is
// a normal outcome except MANYPY_ERR_INTERNAL, which is a bug in manypy, and
// any broken invariant, which is one too: both abort() so that libFuzzer
// reports the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "manypy.h"

namespace fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, what)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::fuzz::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond ": " + \
                   (what));                                                                 \
  } while (0)

// For campaigns against code with a known, not yet fixed bug: the
// environment variable MANYPY_FUZZ_TOLERATE holds '|'-separated substrings;
// a MANYPY_ERR_INTERNAL (or an exception the C API would report as one)
// whose message contains one of them is taken as MANYPY_ERR_BAD_ARCHIVE,
// the code a fix gives, so the campaign looks past it. Never set by ctest.
inline bool tolerated(const std::string& message) {
  static const std::string list = [] {
    const char* env = std::getenv("MANYPY_FUZZ_TOLERATE");
    return std::string(env ? env : "");
  }();
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find('|', start);
    if (end == std::string::npos) end = list.size();
    if (end > start && message.find(list.substr(start, end - start)) != std::string::npos) {
      return true;
    }
    start = end + 1;
  }
  return false;
}

// Frees `status` and returns its code; aborts on MANYPY_ERR_INTERNAL (or a
// code this version does not know).
inline manypy_code take(manypy_status* status, const char* call) {
  manypy_code code = manypy_status_code(status);
  if (code == MANYPY_ERR_INTERNAL && tolerated(manypy_status_message(status))) {
    manypy_status_free(status);
    return MANYPY_ERR_BAD_ARCHIVE;
  }
  if (code == MANYPY_ERR_INTERNAL || std::strcmp(manypy_code_name(code), "MANYPY_UNKNOWN") == 0) {
    fail(std::string(call) + " returned " + manypy_code_name(code) + ": " +
         manypy_status_message(status));
  }
  // Every failure says something.
  if (status != nullptr && manypy_status_message(status)[0] == '\0') {
    fail(std::string(call) + " failed with " + manypy_code_name(code) + " and no message");
  }
  manypy_status_free(status);
  return code;
}

// Reads the fuzz input front to back; past its end every read is 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  size_t left() const { return n_; }
  uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return u16() | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return u32() | (static_cast<uint64_t>(u32()) << 32); }
  // Up to `max` bytes (fewer at the end of the input).
  std::string bytes(size_t max) {
    size_t k = max < n_ ? max : n_;
    std::string s(reinterpret_cast<const char*>(p_), k);
    p_ += k;
    n_ -= k;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace fuzz
