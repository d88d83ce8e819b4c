// manypy_value: typed read access to values copied out of interpreters.
#include "handles.h"

using manypy::ValueKind;

namespace {

manypy_status* expect_kind(const char* function, const manypy_value* value, ValueKind kind) {
  if (value->value.kind == kind) return nullptr;
  static const char* const kNames[] = {"None", "bool", "int64", "double", "string"};
  return manypy::capi::make_status(
      MANYPY_ERR_WRONG_KIND, std::string(function) + ": the value is " +
                                 kNames[static_cast<int>(value->value.kind)] + ", not " +
                                 kNames[static_cast<int>(kind)]);
}

}  // namespace

extern "C" {

manypy_value_kind manypy_value_get_kind(const manypy_value* value) {
  return value ? static_cast<manypy_value_kind>(value->value.kind) : MANYPY_VALUE_NONE;
}

manypy_status* manypy_value_get_bool(const manypy_value* value, int* out) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kBool)) return s;
    *out = value->value.b ? 1 : 0;
    return nullptr;
  });
}

manypy_status* manypy_value_get_int64(const manypy_value* value, int64_t* out) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kInt64)) return s;
    *out = value->value.i;
    return nullptr;
  });
}

manypy_status* manypy_value_get_double(const manypy_value* value, double* out) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kDouble)) return s;
    *out = value->value.d;
    return nullptr;
  });
}

manypy_status* manypy_value_get_string(const manypy_value* value, const char** out_utf8,
                                       size_t* out_length) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_utf8);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kString)) return s;
    *out_utf8 = value->value.s.c_str();
    if (out_length != nullptr) *out_length = value->value.s.size();
    return nullptr;
  });
}

void manypy_value_free(manypy_value* value) { delete value; }

}  // extern "C"
