// Fuzz target: the fuzz input is a small program of value operations through
// the C API (constructors, append, dict_set, wrapping a value in containers
// many levels deep, get_item, dict_key, dict_get, length, the typed
// accessors, free) on 8 slots of owned values. Every operation is mirrored
// on a model of what each value must hold, and every read is checked
// against it: kinds, lengths, scalars, strings and bytes, keys in insertion
// order, replacement by dict_set, MANYPY_ERR_WRONG_KIND and _OUT_OF_RANGE
// where they belong. Whatever is left is freed at the end, so LeakSanitizer
// sees any leak.
//
// Appending or setting an item may fail only when the value would be nested
// more than 60 levels deep (the argument depth limit); it consumes the item
// either way.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_support.h"

namespace {

constexpr int kSlots = 8;
// Allowed failures of append/dict_set: a depth limit of at least this.
constexpr size_t kMinDepthLimit = 60;

// The model of one value.
struct Node {
  manypy_value_kind kind = MANYPY_VALUE_NONE;
  int b = 0;
  int64_t i = 0;
  double d = 0;
  std::string s;  // string, bytes
  std::vector<std::unique_ptr<Node>> items;
  std::vector<std::string> keys;
  size_t height = 1;  // 1 for a leaf or an empty container

  Node() = default;
  explicit Node(manypy_value_kind k) : kind(k) {}
  // Without recursion: a model nested 60,000 deep must not overflow the
  // harness's own stack.
  ~Node() {
    std::vector<std::unique_ptr<Node>> pending;
    for (auto& item : items) pending.push_back(std::move(item));
    while (!pending.empty()) {
      std::unique_ptr<Node> n = std::move(pending.back());
      pending.pop_back();
      for (auto& item : n->items) pending.push_back(std::move(item));
      n->items.clear();
    }
  }
  bool is_container() const {
    return kind == MANYPY_VALUE_LIST || kind == MANYPY_VALUE_TUPLE || kind == MANYPY_VALUE_DICT;
  }
  long find(const std::string& key) const {
    for (size_t k = 0; k < keys.size(); ++k)
      if (keys[k] == key) return static_cast<long>(k);
    return -1;
  }
};

// UTF-8 as RFC 3629 defines it, decoded rather than matched byte by byte (a
// second opinion on the library's validator).
bool utf8_ok(const std::string& s) {
  size_t k = 0;
  while (k < s.size()) {
    unsigned c = static_cast<unsigned char>(s[k]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || k + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t j = 1; j < len; ++j) {
      unsigned b = static_cast<unsigned char>(s[k + j]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static const uint32_t min_for_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    k += len;
  }
  return true;
}

struct Slots {
  manypy_value* h[kSlots] = {};
  std::unique_ptr<Node> m[kSlots];

  void put(int k, manypy_value* v, std::unique_ptr<Node> n) {
    FUZZ_CHECK(v != nullptr, "a constructor returned NULL");
    manypy_value_free(h[k]);
    h[k] = v;
    m[k] = std::move(n);
  }
  void drop(int k) {
    manypy_value_free(h[k]);
    h[k] = nullptr;
    m[k].reset();
  }
  ~Slots() {
    for (int k = 0; k < kSlots; ++k) drop(k);
  }
};

manypy_code call(manypy_status* s, const char* what) { return fuzz::take(s, what); }

// Reads `v` back through every accessor and compares with `n`, down to at
// most `budget` nodes (without recursion).
void check_tree(const manypy_value* root, const Node* root_model, size_t* budget) {
  std::vector<std::pair<const manypy_value*, const Node*>> todo{{root, root_model}};
  while (!todo.empty() && *budget > 0) {
    --*budget;
    auto [v, n] = todo.back();
    todo.pop_back();
    FUZZ_CHECK(manypy_value_get_kind(v) == n->kind, "kind");
    int b;
    int64_t i;
    double d;
    const char* str;
    size_t len;
    const void* bytes;
    manypy_code c = call(manypy_value_get_bool(v, &b), "get_bool");
    FUZZ_CHECK(c == (n->kind == MANYPY_VALUE_BOOL ? MANYPY_OK : MANYPY_ERR_WRONG_KIND), "get_bool");
    if (c == MANYPY_OK) FUZZ_CHECK(b == n->b, "bool value");
    c = call(manypy_value_get_int64(v, &i), "get_int64");
    FUZZ_CHECK(c == (n->kind == MANYPY_VALUE_INT64 ? MANYPY_OK : MANYPY_ERR_WRONG_KIND),
               "get_int64");
    if (c == MANYPY_OK) FUZZ_CHECK(i == n->i, "int value");
    c = call(manypy_value_get_double(v, &d), "get_double");
    FUZZ_CHECK(c == (n->kind == MANYPY_VALUE_DOUBLE ? MANYPY_OK : MANYPY_ERR_WRONG_KIND),
               "get_double");
    if (c == MANYPY_OK) FUZZ_CHECK(std::memcmp(&d, &n->d, sizeof d) == 0, "double value");
    c = call(manypy_value_get_string(v, &str, &len), "get_string");
    FUZZ_CHECK(c == (n->kind == MANYPY_VALUE_STRING ? MANYPY_OK : MANYPY_ERR_WRONG_KIND),
               "get_string");
    if (c == MANYPY_OK) {
      FUZZ_CHECK(std::string(str, len) == n->s && str[len] == '\0', "string value");
      FUZZ_CHECK(call(manypy_value_get_string(v, &str, nullptr), "get_string") == MANYPY_OK,
                 "get_string without a length");
    }
    c = call(manypy_value_get_bytes(v, &bytes, &len), "get_bytes");
    FUZZ_CHECK(c == (n->kind == MANYPY_VALUE_BYTES ? MANYPY_OK : MANYPY_ERR_WRONG_KIND),
               "get_bytes");
    if (c == MANYPY_OK) {
      FUZZ_CHECK(len == n->s.size() && (len == 0 || std::memcmp(bytes, n->s.data(), len) == 0),
                 "bytes value");
    }
    size_t length = 0;
    c = call(manypy_value_length(v, &length), "length");
    FUZZ_CHECK(c == (n->is_container() ? MANYPY_OK : MANYPY_ERR_WRONG_KIND), "length");
    const manypy_value* item = nullptr;
    c = call(manypy_value_get_item(v, n->items.size(), &item), "get_item past the end");
    FUZZ_CHECK(c == (n->is_container() ? MANYPY_ERR_OUT_OF_RANGE : MANYPY_ERR_WRONG_KIND),
               "get_item past the end");
    FUZZ_CHECK(item == nullptr, "a failed get_item wrote its out-parameter");
    const char* key = nullptr;
    c = call(manypy_value_dict_key(v, n->keys.size(), &key, &len), "dict_key past the end");
    FUZZ_CHECK(
        c == (n->kind == MANYPY_VALUE_DICT ? MANYPY_ERR_OUT_OF_RANGE : MANYPY_ERR_WRONG_KIND),
        "dict_key past the end");
    if (!n->is_container()) continue;
    FUZZ_CHECK(length == n->items.size(), "length");
    for (size_t k = 0; k < n->items.size(); ++k) {
      FUZZ_CHECK(call(manypy_value_get_item(v, k, &item), "get_item") == MANYPY_OK, "get_item");
      FUZZ_CHECK(item != nullptr, "get_item gave NULL");
      if (n->kind == MANYPY_VALUE_DICT) {
        FUZZ_CHECK(call(manypy_value_dict_key(v, k, &key, &len), "dict_key") == MANYPY_OK,
                   "dict_key");
        FUZZ_CHECK(std::string(key, len) == n->keys[k] && key[len] == '\0', "key order");
        const manypy_value* same = nullptr;
        FUZZ_CHECK(call(manypy_value_dict_get(v, key, &same), "dict_get") == MANYPY_OK,
                   "dict_get of a listed key");
        FUZZ_CHECK(same == item, "dict_get and get_item disagree");
      }
      todo.emplace_back(item, n->items[k].get());
    }
  }
}

// Follows a path of indices from slot `k`'s root; returns the value and its
// model (the root if the path leads nowhere).
std::pair<const manypy_value*, const Node*> follow(const Slots& s, int k, fuzz::Reader& in) {
  const manypy_value* v = s.h[k];
  const Node* n = s.m[k].get();
  for (int steps = in.u8() % 8; steps > 0 && n->is_container() && !n->items.empty(); --steps) {
    size_t index = in.u8() % n->items.size();
    const manypy_value* item = nullptr;
    FUZZ_CHECK(call(manypy_value_get_item(v, index, &item), "get_item") == MANYPY_OK, "get_item");
    v = item;
    n = n->items[index].get();
  }
  return {v, n};
}

// Moves slot `from` into container slot `to` (append, or dict_set under
// `key`) on both the value and the model.
void insert(Slots& s, int to, int from, const std::string* key) {
  Node& parent = *s.m[to];
  std::unique_ptr<Node> child = std::move(s.m[from]);
  manypy_value* item = s.h[from];
  s.h[from] = nullptr;  // consumed whatever happens
  manypy_code c = key ? call(manypy_value_dict_set(s.h[to], key->c_str(), item), "dict_set")
                      : call(manypy_value_append(s.h[to], item), "append");
  const bool right_kind =
      key ? parent.kind == MANYPY_VALUE_DICT
          : parent.kind == MANYPY_VALUE_LIST || parent.kind == MANYPY_VALUE_TUPLE;
  if (!right_kind) {
    FUZZ_CHECK(
        c == MANYPY_ERR_WRONG_KIND || (key && !utf8_ok(*key) && c == MANYPY_ERR_INVALID_ARGUMENT),
        "insert into a non-container");
    return;
  }
  if (key && !utf8_ok(*key)) {
    FUZZ_CHECK(c == MANYPY_ERR_INVALID_ARGUMENT, "a key that is not UTF-8");
    return;
  }
  const size_t height = std::max(parent.height, child->height + 1);
  if (c != MANYPY_OK) {
    FUZZ_CHECK(height > kMinDepthLimit && c != MANYPY_ERR_WRONG_KIND,
               std::string("insert failed: ") + manypy_code_name(c));
    return;
  }
  parent.height = height;
  if (key) {
    long at = parent.find(*key);
    if (at >= 0) {
      parent.items[at] = std::move(child);  // replaced: keeps its position
      return;
    }
    parent.keys.push_back(*key);
  }
  parent.items.push_back(std::move(child));
}

manypy_value* new_container(manypy_value_kind kind) {
  return kind == MANYPY_VALUE_LIST    ? manypy_value_new_list()
         : kind == MANYPY_VALUE_TUPLE ? manypy_value_new_tuple()
                                      : manypy_value_new_dict();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  Slots s;
  size_t wraps = 0;        // nesting levels added by op 6, bounded per input
  size_t budget = 200000;  // nodes checked, per input
  for (int op_count = 0; !in.empty() && op_count < 512; ++op_count) {
    const uint8_t op = in.u8();
    const int a = in.u8() % kSlots;
    switch (op % 10) {
      case 0: {  // a scalar
        auto n = std::make_unique<Node>();
        switch (in.u8() % 4) {
          case 0:
            s.put(a, manypy_value_new_none(), std::move(n));
            break;
          case 1: {
            int v = static_cast<int8_t>(in.u8());
            n->kind = MANYPY_VALUE_BOOL;
            n->b = v != 0;
            s.put(a, manypy_value_new_bool(v), std::move(n));
            break;
          }
          case 2:
            n->kind = MANYPY_VALUE_INT64;
            n->i = static_cast<int64_t>(in.u64());
            s.put(a, manypy_value_new_int64(n->i), std::move(n));
            break;
          default: {
            uint64_t bits = in.u64();
            n->kind = MANYPY_VALUE_DOUBLE;
            std::memcpy(&n->d, &bits, sizeof bits);
            s.put(a, manypy_value_new_double(n->d), std::move(n));
            break;
          }
        }
        break;
      }
      case 1: {  // a string: valid UTF-8 or not
        std::string text = in.bytes(in.u8());
        manypy_value* v = nullptr;
        manypy_code c = call(manypy_value_new_string(text.data(), text.size(), &v), "new_string");
        if (utf8_ok(text)) {
          FUZZ_CHECK(c == MANYPY_OK, "valid UTF-8 refused");
          auto n = std::make_unique<Node>(MANYPY_VALUE_STRING);
          n->s = text;
          s.put(a, v, std::move(n));
        } else {
          FUZZ_CHECK(c == MANYPY_ERR_INVALID_ARGUMENT && v == nullptr, "invalid UTF-8 accepted");
        }
        break;
      }
      case 2: {  // bytes
        std::string bytes = in.bytes(in.u8());
        auto n = std::make_unique<Node>(MANYPY_VALUE_BYTES);
        n->s = bytes;
        s.put(a, manypy_value_new_bytes(bytes.data(), bytes.size()), std::move(n));
        break;
      }
      case 3: {  // an empty container
        manypy_value_kind kind = static_cast<manypy_value_kind>(MANYPY_VALUE_LIST + in.u8() % 3);
        s.put(a, new_container(kind), std::make_unique<Node>(kind));
        break;
      }
      case 4:    // append slot b to slot a
      case 5: {  // dict_set slot a[key] = slot b
        const int b = in.u8() % kSlots;
        std::string key;
        if (op % 10 == 5) {
          // An existing key (replacing) or a new one; never with a NUL.
          if (s.m[a] && !s.m[a]->keys.empty() && in.u8() % 2) {
            key = s.m[a]->keys[in.u8() % s.m[a]->keys.size()];
          } else {
            key = in.bytes(in.u8() % 16);
            key = key.substr(0, key.find('\0'));
          }
        }
        if (!s.h[a] || !s.h[b]) break;
        if (a == b) {  // a value cannot contain itself: refused, nothing freed
          manypy_code c =
              op % 10 == 4 ? call(manypy_value_append(s.h[a], s.h[a]), "append")
                           : call(manypy_value_dict_set(s.h[a], key.c_str(), s.h[a]), "dict_set");
          FUZZ_CHECK(c == MANYPY_ERR_INVALID_ARGUMENT, "a value contained itself");
          break;
        }
        insert(s, a, b, op % 10 == 5 ? &key : nullptr);
        break;
      }
      case 6: {  // wrap slot a in `levels` containers: deep nesting
        if (!s.h[a]) break;
        size_t levels = in.u16();
        const manypy_value_kind kind =
            static_cast<manypy_value_kind>(MANYPY_VALUE_LIST + in.u8() % 3);
        if (levels > 200000 - wraps) levels = 200000 - wraps;
        wraps += levels;
        const int tmp = (a + 1) % kSlots;
        for (size_t k = 0; k < levels && s.h[a]; ++k) {
          // Move the value to the spare slot, put a new container in slot a,
          // and insert the value into it.
          s.drop(tmp);
          s.h[tmp] = s.h[a];
          s.m[tmp] = std::move(s.m[a]);
          s.h[a] = new_container(kind);
          s.m[a] = std::make_unique<Node>(kind);
          const std::string key = "k";
          insert(s, a, tmp, kind == MANYPY_VALUE_DICT ? &key : nullptr);
          if (s.m[a]->items.empty()) break;  // refused: too deep
        }
        break;
      }
      case 7:  // free
        s.drop(a);
        break;
      case 8: {  // check a whole value
        if (s.h[a]) check_tree(s.h[a], s.m[a].get(), &budget);
        break;
      }
      default: {  // walk into a value, check that node, look keys up
        if (!s.h[a]) break;
        auto [v, n] = follow(s, a, in);
        size_t one = 1;
        check_tree(v, n, &one);
        std::string key = in.bytes(in.u8() % 8);
        key = key.substr(0, key.find('\0'));
        const manypy_value* got = nullptr;
        manypy_code c = call(manypy_value_dict_get(v, key.c_str(), &got), "dict_get");
        if (!utf8_ok(key)) {  // the key is checked before the value's kind
          FUZZ_CHECK(c == MANYPY_ERR_INVALID_ARGUMENT && got == nullptr,
                     "dict_get of a key that is not UTF-8");
        } else if (n->kind != MANYPY_VALUE_DICT) {
          FUZZ_CHECK(c == MANYPY_ERR_WRONG_KIND, "dict_get of a non-dict");
        } else if (n->find(key) < 0) {
          FUZZ_CHECK(c == MANYPY_ERR_NO_SUCH_NAME && got == nullptr, "dict_get of a missing key");
        } else {
          FUZZ_CHECK(c == MANYPY_OK && manypy_value_get_kind(got) == n->items[n->find(key)]->kind,
                     "dict_get of a key");
        }
        break;
      }
    }
  }
  for (int k = 0; k < kSlots; ++k) {
    if (s.h[k]) check_tree(s.h[k], s.m[k].get(), &budget);
  }
  return 0;
}
