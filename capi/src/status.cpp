// manypy_status: construction and accessors.
#include <cstdlib>
#include <cstring>

#include "code_names.h"
#include "handles.h"

namespace manypy::capi {

namespace {
// Returned when a status cannot be allocated; manypy_status_free knows it.
manypy_status g_out_of_memory{MANYPY_ERR_RESOURCE_EXHAUSTED, "out of memory", "", ""};
}  // namespace

manypy_status* make_status(manypy_code code, std::string message, std::string python_type,
                           std::string traceback) noexcept {
  try {
    return new manypy_status{code, std::move(message), std::move(python_type),
                             std::move(traceback)};
  } catch (...) {
    return &g_out_of_memory;
  }
}

manypy_status* invalid_argument(const char* function, const char* what) noexcept {
  try {
    return make_status(MANYPY_ERR_INVALID_ARGUMENT, std::string(function) + ": " + what);
  } catch (...) {
    return &g_out_of_memory;
  }
}

bool is_static(const manypy_status* status) { return status == &g_out_of_memory; }

std::shared_ptr<UserData> own_user_data(void* data, void (*free_user_data)(void*)) {
  try {
    return std::shared_ptr<UserData>(
        new UserData{data, free_user_data});  // in place: a copy would free
  } catch (...) {
    if (free_user_data) free_user_data(data);
    throw;
  }
}

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

namespace {

// The int a manypy_code parameter holds, read without loading it as the enum
// (taken by reference: a C caller may have passed any int).
int code_value(const manypy_code& code) noexcept {
  static_assert(sizeof(manypy_code) == sizeof(int), "manypy_code is an int");
  int value;
  std::memcpy(&value, &code, sizeof value);
  return value;
}

}  // namespace

}  // namespace manypy::capi

extern "C" {

manypy_code manypy_status_code(const manypy_status* status) {
  return status ? status->code : MANYPY_OK;
}

const char* manypy_status_message(const manypy_status* status) {
  return status ? status->message.c_str() : "";
}

const char* manypy_status_python_type(const manypy_status* status) {
  return status ? status->python_type.c_str() : "";
}

const char* manypy_status_traceback(const manypy_status* status) {
  return status ? status->traceback.c_str() : "";
}

manypy_status* manypy_status_new(manypy_code code, const char* message) {
  // The fence turns an allocation that fails into the out-of-memory status
  // (the static one, if even that cannot be allocated): never NULL, which
  // would mean success.
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    const int value = manypy::capi::code_value(code);  // any int a C caller passed
    if (value == MANYPY_OK) return nullptr;            // success is no status
    if (std::strcmp(manypy::code_name(value), "MANYPY_UNKNOWN") == 0) {
      return manypy::capi::invalid_argument(
          api_function,
          ("code " + std::to_string(value) + " is not one this library knows").c_str());
    }
    if (message == nullptr) message = "";
    const size_t length = std::strlen(message);
    if (!manypy::capi::valid_utf8(message, length)) {
      return manypy::capi::invalid_argument(api_function, "message is not valid UTF-8");
    }
    return manypy::capi::make_status(static_cast<manypy_code>(value), std::string(message, length));
  });
}

void manypy_status_free(manypy_status* status) {
  if (!manypy::capi::is_static(status)) delete status;
}

const char* manypy_code_name(manypy_code code) {
  // A C caller may pass any int ("MANYPY_UNKNOWN" for codes this version does
  // not know); in C++, loading one outside the enumerators' range as a
  // manypy_code is undefined (UBSan: "not a valid value for type
  // 'manypy_code'"), so the parameter is read as the int it holds.
  return manypy::code_name(manypy::capi::code_value(code));
}

uint32_t manypy_version_number(void) { return MANYPY_VERSION_NUMBER; }

const char* manypy_version_string(void) { return MANYPY_VERSION_STRING; }

}  // extern "C"
