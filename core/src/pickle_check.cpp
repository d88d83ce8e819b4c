#include "pickle_check.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "error.h"

namespace manypy {
namespace {

// How an opcode's argument is laid out after it (pickletools' ArgumentDescriptor).
enum class Arg : uint8_t {
  kNone,
  kFixed1,    // 1 byte
  kFixed2,    // 2 bytes
  kFixed4,    // 4 bytes
  kFixed8,    // 8 bytes
  kLen1,      // a 1-byte length, then that many bytes
  kLen4,      // a 4-byte little-endian length, then that many bytes
  kLen8,      // an 8-byte little-endian length, then that many bytes
  kLine,      // text up to a newline
  kTwoLines,  // two such lines (GLOBAL, INST)
};

// What an opcode does to the stack.
enum Effect : uint8_t {
  kPlain = 0,      // pops `pops`, then pushes `pushes`
  kMark = 1,       // pushes a mark
  kToMark = 2,     // pops everything above the innermost mark and the mark
  kBelowMark = 4,  // ... and needs an item below the mark (the container)
  kEven = 8,       // ... and needs an even number of items above it
  kStop = 16,      // ends the pickle
  kMemoPut = 32,   // stores the top item in the memo slot its argument names
  kMemoGet = 64,   // pushes the memo slot its argument names
  kMemoize = 128,  // stores the top item in the next memo slot
};

struct Op {
  const char* name;
  Arg arg;
  uint8_t pops;  // items it needs and removes (after a pop to mark)
  uint8_t pushes;
  uint8_t keeps;  // items it needs on the stack and leaves there
  uint8_t effect;
};

// Every opcode of pickle protocols 0 to 5, from pickletools.
const Op* find_op(unsigned char code) {
  static const struct {
    unsigned char code;
    Op op;
  } kOps[] = {
      {'(', {"MARK", Arg::kNone, 0, 0, 0, kMark}},
      {'.', {"STOP", Arg::kNone, 1, 0, 0, kStop}},
      {'0', {"POP", Arg::kNone, 1, 0, 0, kPlain}},
      {'1', {"POP_MARK", Arg::kNone, 0, 0, 0, kToMark}},
      {'2', {"DUP", Arg::kNone, 0, 1, 1, kPlain}},
      {'F', {"FLOAT", Arg::kLine, 0, 1, 0, kPlain}},
      {'I', {"INT", Arg::kLine, 0, 1, 0, kPlain}},
      {'J', {"BININT", Arg::kFixed4, 0, 1, 0, kPlain}},
      {'K', {"BININT1", Arg::kFixed1, 0, 1, 0, kPlain}},
      {'L', {"LONG", Arg::kLine, 0, 1, 0, kPlain}},
      {'M', {"BININT2", Arg::kFixed2, 0, 1, 0, kPlain}},
      {'N', {"NONE", Arg::kNone, 0, 1, 0, kPlain}},
      {'P', {"PERSID", Arg::kLine, 0, 1, 0, kPlain}},
      {'Q', {"BINPERSID", Arg::kNone, 1, 1, 0, kPlain}},
      {'R', {"REDUCE", Arg::kNone, 2, 1, 0, kPlain}},
      {'S', {"STRING", Arg::kLine, 0, 1, 0, kPlain}},
      {'T', {"BINSTRING", Arg::kLen4, 0, 1, 0, kPlain}},
      {'U', {"SHORT_BINSTRING", Arg::kLen1, 0, 1, 0, kPlain}},
      {'V', {"UNICODE", Arg::kLine, 0, 1, 0, kPlain}},
      {'X', {"BINUNICODE", Arg::kLen4, 0, 1, 0, kPlain}},
      {'a', {"APPEND", Arg::kNone, 1, 0, 1, kPlain}},
      {'b', {"BUILD", Arg::kNone, 1, 0, 1, kPlain}},
      {'c', {"GLOBAL", Arg::kTwoLines, 0, 1, 0, kPlain}},
      {'d', {"DICT", Arg::kNone, 0, 1, 0, kToMark | kEven}},
      {'}', {"EMPTY_DICT", Arg::kNone, 0, 1, 0, kPlain}},
      {'e', {"APPENDS", Arg::kNone, 0, 0, 0, kToMark | kBelowMark}},
      {'g', {"GET", Arg::kLine, 0, 1, 0, kMemoGet}},
      {'h', {"BINGET", Arg::kFixed1, 0, 1, 0, kMemoGet}},
      {'i', {"INST", Arg::kTwoLines, 0, 1, 0, kToMark}},
      {'j', {"LONG_BINGET", Arg::kFixed4, 0, 1, 0, kMemoGet}},
      {'l', {"LIST", Arg::kNone, 0, 1, 0, kToMark}},
      {']', {"EMPTY_LIST", Arg::kNone, 0, 1, 0, kPlain}},
      {'o', {"OBJ", Arg::kNone, 0, 1, 0, kToMark}},
      {'p', {"PUT", Arg::kLine, 0, 0, 1, kMemoPut}},
      {'q', {"BINPUT", Arg::kFixed1, 0, 0, 1, kMemoPut}},
      {'r', {"LONG_BINPUT", Arg::kFixed4, 0, 0, 1, kMemoPut}},
      {'s', {"SETITEM", Arg::kNone, 2, 0, 1, kPlain}},
      {'t', {"TUPLE", Arg::kNone, 0, 1, 0, kToMark}},
      {')', {"EMPTY_TUPLE", Arg::kNone, 0, 1, 0, kPlain}},
      {'u', {"SETITEMS", Arg::kNone, 0, 0, 0, kToMark | kBelowMark | kEven}},
      {'G', {"BINFLOAT", Arg::kFixed8, 0, 1, 0, kPlain}},
      {'B', {"BINBYTES", Arg::kLen4, 0, 1, 0, kPlain}},
      {'C', {"SHORT_BINBYTES", Arg::kLen1, 0, 1, 0, kPlain}},
      {0x80, {"PROTO", Arg::kFixed1, 0, 0, 0, kPlain}},
      {0x81, {"NEWOBJ", Arg::kNone, 2, 1, 0, kPlain}},
      {0x82, {"EXT1", Arg::kFixed1, 0, 1, 0, kPlain}},
      {0x83, {"EXT2", Arg::kFixed2, 0, 1, 0, kPlain}},
      {0x84, {"EXT4", Arg::kFixed4, 0, 1, 0, kPlain}},
      {0x85, {"TUPLE1", Arg::kNone, 1, 1, 0, kPlain}},
      {0x86, {"TUPLE2", Arg::kNone, 2, 1, 0, kPlain}},
      {0x87, {"TUPLE3", Arg::kNone, 3, 1, 0, kPlain}},
      {0x88, {"NEWTRUE", Arg::kNone, 0, 1, 0, kPlain}},
      {0x89, {"NEWFALSE", Arg::kNone, 0, 1, 0, kPlain}},
      {0x8a, {"LONG1", Arg::kLen1, 0, 1, 0, kPlain}},
      {0x8b, {"LONG4", Arg::kLen4, 0, 1, 0, kPlain}},
      {0x8c, {"SHORT_BINUNICODE", Arg::kLen1, 0, 1, 0, kPlain}},
      {0x8d, {"BINUNICODE8", Arg::kLen8, 0, 1, 0, kPlain}},
      {0x8e, {"BINBYTES8", Arg::kLen8, 0, 1, 0, kPlain}},
      {0x8f, {"EMPTY_SET", Arg::kNone, 0, 1, 0, kPlain}},
      {0x90, {"ADDITEMS", Arg::kNone, 0, 0, 0, kToMark | kBelowMark}},
      {0x91, {"FROZENSET", Arg::kNone, 0, 1, 0, kToMark}},
      {0x92, {"NEWOBJ_EX", Arg::kNone, 3, 1, 0, kPlain}},
      {0x93, {"STACK_GLOBAL", Arg::kNone, 2, 1, 0, kPlain}},
      {0x94, {"MEMOIZE", Arg::kNone, 0, 0, 1, kMemoize}},
      {0x95, {"FRAME", Arg::kFixed8, 0, 0, 0, kPlain}},
      {0x96, {"BYTEARRAY8", Arg::kLen8, 0, 1, 0, kPlain}},
      {0x97, {"NEXT_BUFFER", Arg::kNone, 0, 1, 0, kPlain}},
      {0x98, {"READONLY_BUFFER", Arg::kNone, 0, 0, 1, kPlain}},
  };
  for (const auto& entry : kOps) {
    if (entry.code == code) return &entry.op;
  }
  return nullptr;
}

uint64_t little_endian(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t k = n; k-- > 0;) v = (v << 8) | p[k];
  return v;
}

class Walker {
 public:
  Walker(std::string_view bytes, const std::string& where) : bytes_(bytes), where_(where) {}

  void run() {
    for (;;) {
      if (pos_ >= bytes_.size()) fail("the pickle ends without a STOP opcode");
      at_ = pos_;
      const unsigned char code = static_cast<unsigned char>(bytes_[pos_++]);
      const Op* op = find_op(code);
      if (op == nullptr) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", code);
        fail(std::string("unknown pickle opcode ") + hex);
      }
      op_ = op;
      const uint64_t argument = read_argument(op->arg);
      apply(*op, argument);
      if (op->effect & kStop) return;
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    std::string what = where_ + ": malformed pickle at byte " + std::to_string(at_);
    if (op_ != nullptr) what += std::string(" (") + op_->name + ")";
    throw Error(Code::kBadArchive, what + ": " + why);
  }

  std::string_view take(uint64_t n) {
    if (n > bytes_.size() - pos_) fail("its argument runs past the end of the record");
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  std::string_view line() {
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos) fail("its argument has no terminating newline");
    std::string_view out = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  uint64_t fixed(size_t n) {
    return little_endian(reinterpret_cast<const unsigned char*>(take(n).data()), n);
  }

  // The argument's numeric value where a memo opcode needs it, else 0.
  uint64_t read_argument(Arg arg) {
    switch (arg) {
      case Arg::kNone:
        return 0;
      case Arg::kFixed1:
        return fixed(1);
      case Arg::kFixed2:
        return fixed(2);
      case Arg::kFixed4:
        return fixed(4);
      case Arg::kFixed8:
        return fixed(8);
      case Arg::kLen1:
        take(fixed(1));
        return 0;
      case Arg::kLen4:
        take(fixed(4) & 0xffffffffu);
        return 0;
      case Arg::kLen8:
        take(fixed(8));
        return 0;
      case Arg::kTwoLines:
        line();
        line();
        return 0;
      case Arg::kLine: {
        const std::string_view text = line();
        if (!(op_->effect & (kMemoGet | kMemoPut))) return 0;
        uint64_t v = 0;
        if (text.empty() || text.size() > 18) fail("its memo index is not a number");
        for (char c : text) {
          if (c < '0' || c > '9') fail("its memo index is not a number");
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        return v;
      }
    }
    return 0;
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  void apply(const Op& op, uint64_t argument) {
    if (op.effect & kMark) {
      marks_.push_back(depth_);
      return;
    }
    if (op.effect & kToMark) {
      if (marks_.empty()) fail("it pops to a mark, but there is none");
      const size_t items = depth_ - marks_.back();
      depth_ = marks_.back();
      marks_.pop_back();
      if ((op.effect & kEven) && items % 2 != 0) fail("it needs key-value pairs");
      if ((op.effect & kBelowMark) && depth_ <= floor())
        fail("there is no container below the mark");
    }
    const size_t needed = size_t{op.pops} + op.keeps;
    if (depth_ - floor() < needed) {
      fail("it needs " + std::to_string(needed) + " items but the stack holds " +
           std::to_string(depth_ - floor()) + (marks_.empty() ? "" : " above its mark"));
    }
    depth_ = depth_ - op.pops + op.pushes;
    // Picklers number memo slots 0, 1, 2, ... and libtorch's unpickler
    // relies on it: it appends to its memo table and reserves room up to
    // the slot named, so one LONG_BINPUT of 0x5f5f6862 asked for 25 GB.
    if ((op.effect & kMemoPut) && argument > memo_.size()) {
      fail("it sets memo slot " + std::to_string(argument) + " but the memo holds " +
           std::to_string(memo_.size()) + " (slots are numbered in order)");
    }
    if (op.effect & kMemoPut) memo_.insert(argument);
    if (op.effect & kMemoize) memo_.insert(memo_.size());
    if ((op.effect & kMemoGet) && memo_.count(argument) == 0) {
      fail("it reads memo slot " + std::to_string(argument) + ", which was never set");
    }
  }

  std::string_view bytes_;
  const std::string& where_;
  size_t pos_ = 0, at_ = 0;
  const Op* op_ = nullptr;
  size_t depth_ = 0;
  std::vector<size_t> marks_;  // the stack depth at each open mark
  std::unordered_set<uint64_t> memo_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

void check_pickle(std::string_view bytes, const std::string& where) { Walker(bytes, where).run(); }

bool is_torch_pickle_record(std::string_view name) {
  return ends_with(name, ".pkl") || is_torch_debug_record(name);
}

bool is_torch_debug_record(std::string_view name) { return ends_with(name, ".debug_pkl"); }

}  // namespace manypy
