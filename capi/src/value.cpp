// manypy_value: building arguments and reading results.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "handles.h"

using manypy::Value;
using manypy::ValueKind;
using manypy::capi::handle_of;
using manypy::capi::value_of;

namespace {

manypy_status* expect_kind(const char* function, const manypy_value* value, ValueKind kind) {
  if (value_of(value).kind == kind) return nullptr;
  return manypy::capi::make_status(MANYPY_ERR_WRONG_KIND,
                                   std::string(function) + ": the value is " +
                                       manypy::kind_name(value_of(value).kind) + ", not " +
                                       manypy::kind_name(kind));
}

// A getter of one scalar kind: the checks, then `read` of the core value.
template <typename Out, typename Read>
manypy_status* get_scalar(const char* function, const manypy_value* value, Out* out, ValueKind kind,
                          Read read) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out);
    if (manypy_status* s = expect_kind(api_function, value, kind)) return s;
    *out = read(value_of(value));
    return nullptr;
  });
}

// Refuses an item that would nest `container` deeper than Value::kMaxDepth.
manypy_status* check_depth(const char* function, const Value& container, const Value& item) {
  if (container.depth_with(item) <= Value::kMaxDepth) return nullptr;
  return manypy::capi::invalid_argument(
      function, ("the item would nest containers " + std::to_string(item.depth + 1) +
                 " deep; at most " + std::to_string(Value::kMaxDepth) + " are allowed")
                    .c_str());
}

// A key for a message: quoted, with control characters (NUL, which a key
// may hold, among them) escaped.
std::string quoted(std::string_view key) {
  std::string out = "'";
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "'";
}

// A key of `length` bytes must not be NULL, unless `null_key_ok` (an
// explicit length of 0).
manypy_status* check_key_pointer(const char* function, const char* key, bool null_key_ok) {
  if (key != nullptr || null_key_ok) return nullptr;
  return manypy::capi::invalid_argument(function, "key must not be NULL");
}

manypy_status* check_key_utf8(const char* function, const char* key, size_t length) {
  if (key == nullptr || manypy::capi::valid_utf8(key, length)) return nullptr;
  return manypy::capi::invalid_argument(function, "key is not valid UTF-8");
}

// manypy_value_dict_set and _set_n.
manypy_status* dict_set(const char* function, manypy_value* dict, const char* key, size_t length,
                        bool null_key_ok, manypy_value* item) {
  if (item != nullptr && item == dict) {  // freeing it would free the dict
    return manypy::capi::invalid_argument(function, "a value cannot contain itself");
  }
  std::unique_ptr<Value> owned(item ? &value_of(item) : nullptr);  // ours whatever happens
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(dict);
    if (manypy_status* s = check_key_pointer(api_function, key, null_key_ok)) return s;
    MANYPY_NOT_NULL(item);
    if (manypy_status* s = expect_kind(api_function, dict, ValueKind::kDict)) return s;
    if (manypy_status* s = check_key_utf8(api_function, key, length)) return s;
    if (manypy_status* s = check_depth(api_function, value_of(dict), *owned)) return s;
    value_of(dict).put(std::string(key ? key : "", length), std::move(*owned));
    return nullptr;
  });
}

// manypy_value_dict_get and _get_n.
manypy_status* dict_get(const char* function, const manypy_value* value, const char* key,
                        size_t length, bool null_key_ok, const manypy_value** out_item) {
  return manypy::capi::fence(function, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    if (manypy_status* s = check_key_pointer(api_function, key, null_key_ok)) return s;
    MANYPY_NOT_NULL(out_item);
    if (manypy_status* s = check_key_utf8(api_function, key, length)) return s;
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kDict)) return s;
    const std::string_view wanted(key ? key : "", length);
    long at = value_of(value).find_key(wanted);
    if (at < 0) {
      return manypy::capi::make_status(MANYPY_ERR_NO_SUCH_NAME,
                                       std::string(api_function) + ": no key " + quoted(wanted));
    }
    *out_item = handle_of(&value_of(value).items[at]);
    return nullptr;
  });
}

manypy_value* make(Value v) noexcept {
  try {
    return manypy::capi::new_value(std::move(v));
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

namespace manypy::capi {

manypy_value* new_value(Value value) { return handle_of(new Value(std::move(value))); }

bool valid_utf8(const char* s, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t k = 0;
  while (k < n) {
    unsigned char c = p[k];
    size_t extra;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) {
      extra = 0;
    } else if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (extra > n - k - 1) return false;
    for (size_t j = 1; j <= extra; ++j) {
      unsigned char b = p[k + j];
      if (j == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return false;
    }
    k += extra + 1;
  }
  return true;
}

}  // namespace manypy::capi

extern "C" {

manypy_value* manypy_value_new_none(void) { return make(Value::none()); }
manypy_value* manypy_value_new_bool(int value) { return make(Value::of_bool(value != 0)); }
manypy_value* manypy_value_new_int64(int64_t value) { return make(Value::of_int(value)); }
manypy_value* manypy_value_new_double(double value) { return make(Value::of_double(value)); }
manypy_value* manypy_value_new_list(void) { return make(Value::container(ValueKind::kList)); }
manypy_value* manypy_value_new_tuple(void) { return make(Value::container(ValueKind::kTuple)); }
manypy_value* manypy_value_new_dict(void) { return make(Value::container(ValueKind::kDict)); }

manypy_value* manypy_value_new_bytes(const void* data, size_t length) {
  if (data == nullptr && length > 0) return nullptr;
  try {
    return make(Value::of_bytes(std::string(static_cast<const char*>(data), length)));
  } catch (...) {
    return nullptr;
  }
}

manypy_status* manypy_value_new_string(const char* utf8, size_t length, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(out_value);
    if (utf8 == nullptr && length > 0) {
      return manypy::capi::invalid_argument(api_function, "utf8 must not be NULL");
    }
    if (!manypy::capi::valid_utf8(utf8, length)) {
      return manypy::capi::invalid_argument(api_function, "the string is not valid UTF-8");
    }
    *out_value = manypy::capi::new_value(Value::of_string(std::string(utf8 ? utf8 : "", length)));
    return nullptr;
  });
}

manypy_status* manypy_value_append(manypy_value* sequence, manypy_value* item) {
  if (item != nullptr && item == sequence) {  // freeing it would free the sequence
    return manypy::capi::invalid_argument(__func__, "a value cannot contain itself");
  }
  std::unique_ptr<Value> owned(item ? &value_of(item) : nullptr);  // ours whatever happens
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(sequence);
    MANYPY_NOT_NULL(item);
    if (!value_of(sequence).is_sequence()) {
      return manypy::capi::make_status(MANYPY_ERR_WRONG_KIND,
                                       std::string(api_function) + ": the value is " +
                                           manypy::kind_name(value_of(sequence).kind) +
                                           ", not a list or tuple");
    }
    if (manypy_status* s = check_depth(api_function, value_of(sequence), *owned)) return s;
    value_of(sequence).append(std::move(*owned));
    return nullptr;
  });
}

manypy_status* manypy_value_dict_set(manypy_value* dict, const char* key, manypy_value* item) {
  return dict_set(__func__, dict, key, key ? std::strlen(key) : 0, /*null_key_ok=*/false, item);
}

manypy_status* manypy_value_dict_set_n(manypy_value* dict, const char* key, size_t key_length,
                                       manypy_value* item) {
  return dict_set(__func__, dict, key, key_length, /*null_key_ok=*/key_length == 0, item);
}

manypy_status* manypy_value_clone(const manypy_value* value, manypy_value** out_value) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_value);
    *out_value = manypy::capi::new_value(value_of(value).clone());
    return nullptr;
  });
}

manypy_value_kind manypy_value_get_kind(const manypy_value* value) {
  return value ? static_cast<manypy_value_kind>(value_of(value).kind) : MANYPY_VALUE_NONE;
}

manypy_status* manypy_value_get_bool(const manypy_value* value, int* out) {
  return get_scalar(__func__, value, out, ValueKind::kBool,
                    [](const Value& v) { return v.b ? 1 : 0; });
}

manypy_status* manypy_value_get_int64(const manypy_value* value, int64_t* out) {
  return get_scalar(__func__, value, out, ValueKind::kInt64, [](const Value& v) { return v.i; });
}

manypy_status* manypy_value_get_double(const manypy_value* value, double* out) {
  return get_scalar(__func__, value, out, ValueKind::kDouble, [](const Value& v) { return v.d; });
}

manypy_status* manypy_value_get_string(const manypy_value* value, const char** out_utf8,
                                       size_t* out_length) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_utf8);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kString)) return s;
    *out_utf8 = value_of(value).s.c_str();
    if (out_length != nullptr) *out_length = value_of(value).s.size();
    return nullptr;
  });
}

manypy_status* manypy_value_get_bytes(const manypy_value* value, const void** out_data,
                                      size_t* out_length) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_data);
    MANYPY_NOT_NULL(out_length);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kBytes)) return s;
    *out_data = value_of(value).s.data();
    *out_length = value_of(value).s.size();
    return nullptr;
  });
}

manypy_status* manypy_value_length(const manypy_value* value, size_t* out_length) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_length);
    if (!value_of(value).is_sequence() && value_of(value).kind != ValueKind::kDict) {
      return manypy::capi::make_status(MANYPY_ERR_WRONG_KIND,
                                       std::string(api_function) + ": the value is " +
                                           manypy::kind_name(value_of(value).kind) +
                                           ", not a list, tuple or dict");
    }
    *out_length = value_of(value).items.size();
    return nullptr;
  });
}

manypy_status* manypy_value_get_item(const manypy_value* value, size_t index,
                                     const manypy_value** out_item) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_item);
    const Value& v = value_of(value);
    if (!v.is_sequence() && v.kind != ValueKind::kDict) {
      return manypy::capi::make_status(
          MANYPY_ERR_WRONG_KIND, std::string(api_function) + ": the value is " +
                                     manypy::kind_name(v.kind) + ", not a list, tuple or dict");
    }
    if (index >= v.items.size()) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE, std::string(api_function) + ": index " + std::to_string(index) +
                                       " is out of range (length " +
                                       std::to_string(v.items.size()) + ")");
    }
    *out_item = handle_of(&v.items[index]);
    return nullptr;
  });
}

manypy_status* manypy_value_dict_key(const manypy_value* value, size_t index, const char** out_key,
                                     size_t* out_length) {
  return manypy::capi::fence(__func__, [&](const char* api_function) -> manypy_status* {
    MANYPY_NOT_NULL(value);
    MANYPY_NOT_NULL(out_key);
    if (manypy_status* s = expect_kind(api_function, value, ValueKind::kDict)) return s;
    if (index >= value_of(value).keys.size()) {
      return manypy::capi::make_status(
          MANYPY_ERR_OUT_OF_RANGE, std::string(api_function) + ": index " + std::to_string(index) +
                                       " is out of range (length " +
                                       std::to_string(value_of(value).keys.size()) + ")");
    }
    *out_key = value_of(value).keys[index].c_str();
    if (out_length != nullptr) *out_length = value_of(value).keys[index].size();
    return nullptr;
  });
}

manypy_status* manypy_value_dict_get(const manypy_value* value, const char* key,
                                     const manypy_value** out_item) {
  return dict_get(__func__, value, key, key ? std::strlen(key) : 0, /*null_key_ok=*/false,
                  out_item);
}

manypy_status* manypy_value_dict_get_n(const manypy_value* value, const char* key,
                                       size_t key_length, const manypy_value** out_item) {
  return dict_get(__func__, value, key, key_length, /*null_key_ok=*/key_length == 0, out_item);
}

void manypy_value_free(manypy_value* value) {
  if (value != nullptr) delete &value_of(value);
}

}  // extern "C"
