#include "torchscript_debug_check.h"

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/source_range_serialization.h>

#include <vector>

#include "error.h"

namespace manypy {
namespace {

// A view of a tuple's items: they live as long as the unpickled value.
using Elements = c10::ArrayRef<c10::IValue>;

class DebugRecordCheck {
 public:
  explicit DebugRecordCheck(const std::string& where) : where_(where) {}

  // The layout ConcreteSourceRangeUnpickler::unpickle reads: a tuple of
  // records, or ("FORMAT_WITH_STRING_TABLE", text table, records).
  void run(const c10::IValue& top) {
    const Elements items = tuple(top, "the record");
    if (items.empty()) fail("the record is an empty tuple");
    Elements records = items;
    if (items[0].isString() && items[0].toStringRef() == torch::jit::kFormatWithStringTable) {
      if (items.size() < 3) fail("a string-table record has fewer than 3 parts");
      for (const c10::IValue& text : tuple(items[1], "the text table")) {
        if (!text.isString()) fail("the text table holds a non-string");
        text_sizes_.push_back(static_cast<int64_t>(text.toStringRef().size()));
      }
      records = tuple(items[2], "the ranges");
    }
    for (const c10::IValue& record : records) {
      const Elements parts = tuple(record, "a range");
      if (parts.size() < 2 || !parts[torch::jit::kByteOffsetIndex].isInt()) {
        fail("a range is not (offset, source range, ...)");
      }
      source_range(parts[torch::jit::kSourceRangeIndex]);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(Code::kBadArchive, where_ + ": malformed TorchScript debug record: " + why);
  }

  Elements tuple(const c10::IValue& v, const char* what) const {
    if (!v.isTuple()) fail(std::string(what) + " is not a tuple");
    return v.toTupleRef().elements().asArrayRef();
  }

  // (source, start, end), where source is (text, filename, line) or, with
  // a text table, (text indices, filename index, line).
  void source_range(const c10::IValue& v) const {
    const Elements range = tuple(v, "a source range");
    if (range.size() != 3 || !range[1].isInt() || !range[2].isInt()) {
      fail("a source range is not (source, start, end)");
    }
    const Elements source = tuple(range[0], "a source");
    if (source.size() != 3 || !source[2].isInt()) fail("a source is not (text, file, line)");
    int64_t text_size = 0;
    if (!text_sizes_.empty()) {  // libtorch's test: a text table is in use
      if (!source[0].isIntList() || !source[1].isInt())
        fail("a source's text indices are not ints");
      check_index(source[1].toInt());
      for (int64_t index : source[0].toIntList()) text_size += text_sizes_[check_index(index)];
    } else {
      if (!source[0].isString()) fail("a source's text is not a string");
      if (!source[1].isNone() && !source[1].isString())
        fail("a source's file name is not a string");
      text_size = static_cast<int64_t>(source[0].toStringRef().size());
    }
    const int64_t start = range[1].toInt(), end = range[2].toInt();
    if (start < 0 || end < start || end > text_size) {
      fail("a source range [" + std::to_string(start) + ", " + std::to_string(end) +
           ") lies outside its text");
    }
  }

  size_t check_index(int64_t index) const {
    if (index < 0 || static_cast<size_t>(index) >= text_sizes_.size()) {
      fail("text index " + std::to_string(index) + " is outside the text table");
    }
    return static_cast<size_t>(index);
  }

  const std::string& where_;
  std::vector<int64_t> text_sizes_;  // of the text table's strings
};

}  // namespace

void check_torchscript_debug_record(const std::string& bytes, const std::string& where) {
  c10::IValue top;
  try {
    top = torch::jit::unpickle(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    throw Error(Code::kBadArchive,
                where + ": malformed TorchScript debug record: " + e.what_without_backtrace());
  }
  DebugRecordCheck(where).run(top);
}

}  // namespace manypy
