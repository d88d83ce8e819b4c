// The one error type of the core. The C API fence turns it into a
// manypy_status; nothing else in the core knows about the C API.
#pragma once

#include <exception>
#include <string>

namespace manypy {

// Codes are manypy_code values (capi/include/manypy.h); the core uses the
// same numbers so the fence needs no table.
enum class Code : int {
  kInvalidArgument = 1,
  kOutOfRange = 2,
  kPython = 3,
  kSyntax = 4,
  kUnsupportedType = 5,
  kWrongKind = 6,
  kStaticTls = 7,
  kResourceExhausted = 8,
  kLoader = 9,
  kInterpreterBroken = 10,
  kInternal = 11,
  kNotFound = 12,
  kBadArchive = 13,
  kNotAPackage = 14,
  kUnsupportedVersion = 15,
  kModuleNotFound = 16,
  kBadTensor = 17,
  kNoSuchName = 18,
  kDeadlineExceeded = 19,
  kCancelled = 20,
  kUntrustedArchive = 21,
  kOverloaded = 22,
  kDraining = 23,
};

class Error : public std::exception {
 public:
  Error(Code code, std::string message, std::string python_type = {}, std::string traceback = {})
      : code_(code),
        message_(std::move(message)),
        python_type_(std::move(python_type)),
        traceback_(std::move(traceback)) {}

  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const std::string& python_type() const noexcept { return python_type_; }
  const std::string& traceback() const noexcept { return traceback_; }
  const char* what() const noexcept override { return message_.c_str(); }

  // The same error with `prefix` put before its message ("interpreter 2: ").
  Error prefixed(const std::string& prefix) const {
    return Error(code_, prefix + message_, python_type_, traceback_);
  }
  // The same error with `traceback` (TorchScript's, say).
  Error with_traceback(std::string traceback) const {
    return Error(code_, message_, python_type_, std::move(traceback));
  }

 private:
  Code code_;
  std::string message_;
  std::string python_type_;
  std::string traceback_;
};

// The fix for hazard 4 of docs/isolation.md, named in every static-TLS error.
inline constexpr const char* kStaticTlsHint =
    "out of static TLS for another interpreter; start the process with "
    "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 (or more) in its "
    "environment (it cannot be changed once the process runs)";

}  // namespace manypy
